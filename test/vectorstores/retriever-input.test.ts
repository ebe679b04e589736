import { describe, expect, it } from 'vitest';
import { createChains } from '../../chains/index.js';
import { connectServices, Document, HashingEmbeddings, MemoryVectorStore, parallel, passthrough } from '../../src/index.js';

describe('a retriever given something other than a query string', () => {
  it('refuses it instead of searching for its String() ("[object Object]")', async () => {
    const store = new MemoryVectorStore(new HashingEmbeddings());
    await store.addDocuments([new Document({ id: 'sse', pageContent: 'Runnel streams over SSE.' })]);
    const retriever = store.asRetriever({ k: 1 });
    // A probe: the usual RAG slip, the whole input object piped into the retriever, answered with documents found
    // for "[object Object]" — a chain that looked as if it worked.
    const rag = parallel({ context: retriever, question: passthrough() });
    await expect(rag.invoke({ question: 'How does Runnel stream?' } as never)).rejects.toMatchObject({
      code: 'RUNNEL_ERR_INPUT_INVALID',
      message: expect.stringMatching(/expects the query as a string, got object/),
    });
    await expect(retriever.invoke(['SSE'] as never)).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
    expect((await retriever.invoke('How does Runnel stream?')).map((d) => d.id)).toEqual(['sse']);
  });
});

// A review: /rag's own retriever (chains/docs.ts) still searched for String(query).
describe("the docs chains' retriever given something other than a query string", () => {
  it('refuses it too, before any search', async () => {
    const services = await connectServices({});
    try {
      const { docs } = createChains({ services, env: {} });
      await expect(docs.retriever(1).invoke({ question: 'How does Runnel stream?' } as never)).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
    } finally {
      await services.close();
    }
  });
});
