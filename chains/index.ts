/**
 * The chains the server serves, built on the connected services. Add yours
 * here: write `chains/<name>.ts` exporting a function that returns
 * `defineChain({...})`, and list it below.
 */
import { createRegistry } from '../src/index.js';
import { agentChain } from './agent.js';
import { chatChain } from './chat.js';
import { DocsCollection } from './docs.js';
import { extractChain } from './extract.js';
import { jokeChain } from './joke.js';
import type { ChainContext } from './model.js';
import { ragChain } from './rag.js';

export { DocsCollection } from './docs.js';
export type { ChainContext } from './model.js';

/** The shipped chains, and the `docs` collection that `/rag` and `/agent` search (call `docs.seed()` once at start). */
export function createChains(context: ChainContext) {
  const docs = new DocsCollection(context);
  const chains = createRegistry([jokeChain(context), chatChain(context), ragChain(context, docs), agentChain(context, docs), extractChain(context)]);
  return { chains, docs };
}
