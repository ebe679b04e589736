/** Test chains and a helper to serve them from a real listening socket. */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import {
  buildApp,
  ChatPromptTemplate,
  defineChain,
  Document,
  FakeListChatModel,
  generator,
  lambda,
  RunnelError,
  StringOutputParser,
  type ChainSpec,
  type ServerConfig,
} from '../../src/index.js';

/** Records what runs saw: the configs and whether their signal fired. */
export const observed: { configs: unknown[]; aborted: number } = { configs: [], aborted: 0 };

export const echo = defineChain({
  path: '/echo',
  description: 'Echoes a greeting',
  configKeys: ['configurable', 'tags', 'metadata', 'run_id'],
  runnable: lambda(
    (input: { name: string; times?: number }, config) => {
      observed.configs.push(config);
      return `hello ${input.name}`.repeat(input.times ?? 1);
    },
    { input: z.object({ name: z.string().max(100), times: z.number().int().min(1).max(3).optional() }), output: z.string() },
  ).configurableFields({}),
});

export const slow = defineChain({
  path: '/slow',
  description: 'Streams a token every 20 ms, forever unless told how many',
  configKeys: ['tags'],
  runnable: generator(async function* (inputs: AsyncIterable<{ count?: number }>, config) {
    let count = 1000;
    for await (const input of inputs) count = input.count ?? count;
    try {
      for (let i = 0; i < count; i++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        if (config.signal?.aborted) return;
        yield `t${i} `;
      }
    } finally {
      if (config.signal?.aborted) observed.aborted += 1;
    }
  }).withTypes({ input: z.object({ count: z.number().int().optional() }), output: z.string() }),
});

export const failing = defineChain({
  path: '/failing',
  runnable: generator(async function* (inputs: AsyncIterable<{ when: 'before' | 'after' | 'typed' }>) {
    let when = 'before';
    for await (const input of inputs) when = input.when;
    if (when === 'typed') throw new RunnelError('RUNNEL_ERR_PROVIDER_RATE_LIMITED', 'provider rate-limited the request (429)');
    if (when === 'after') yield 'partial';
    throw new Error(`secret internals: OPENAI_API_KEY=sk-canary-${when}`);
  }).withTypes({ input: z.object({ when: z.enum(['before', 'after', 'typed']) }) }),
});

const jokeModel = new FakeListChatModel({ responses: ['Why did the cat sit on the computer?'] });
export const joke = defineChain({
  path: '/joke',
  description: 'Tells a joke',
  runnable: ChatPromptTemplate.fromMessages([['system', 'You are funny.'], ['human', 'A joke about {topic}']])
    .pipe(jokeModel.configurableFields({ temperature: { id: 'temperature', name: 'Temperature', description: 'Sampling temperature', schema: z.number().min(0).max(2) } }))
    .pipe(new StringOutputParser()),
});

export const chat = defineChain({
  path: '/chat-model',
  description: 'A model answering with a message',
  runnable: ChatPromptTemplate.fromMessages([['human', '{question}']]).pipe(new FakeListChatModel({ responses: ['Paris is the capital.'] })),
});

export const documents = defineChain({
  path: '/documents',
  description: 'Returns documents',
  runnable: lambda((query: string) => [
    new Document({ id: 'd1', pageContent: `About ${query}`, metadata: { source: 'a.md' } }),
    new Document({ id: 'd2', pageContent: 'More', metadata: { source: 'b.md' } }),
  ]).withTypes({ input: z.string() }),
});

export const allChains = [echo, slow, failing, joke, chat, documents] as ChainSpec<never, unknown>[];

export interface TestServer {
  app: FastifyInstance;
  url: string;
  close(): Promise<void>;
}

/** Builds the app and listens on a free port on 127.0.0.1. */
export async function startServer(config: Partial<ServerConfig> = {}, chains: ChainSpec<never, unknown>[] = allChains): Promise<TestServer> {
  const app = await buildApp({ chains, config });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return { app, url: `http://127.0.0.1:${port}`, close: () => app.close() };
}

/** Reads a whole response body as text. */
export async function text(response: Response): Promise<string> {
  return new TextDecoder().decode(await response.arrayBuffer());
}

/** POSTs JSON and returns the response. */
export function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
}
