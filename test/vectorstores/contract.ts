/**
 * The contract every vector store passes: upsert by id, delete by ids or
 * filter, search with scores (closest first), MMR, every filter operator,
 * `k` capped, bad filters refused. Each implementation's test calls
 * `vectorStoreContract` with a factory for an empty store.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { Document, HashingEmbeddings, type VectorStore } from '../../src/index.js';

const docs = [
  new Document({ id: 'redis', pageContent: 'Redis keeps the chat history of every session', metadata: { topic: 'storage', year: 2021, tags: 'a' } }),
  new Document({ id: 'pg', pageContent: 'Postgres with pgvector stores document vectors', metadata: { topic: 'storage', year: 2023 } }),
  new Document({ id: 'sse', pageContent: 'The server streams tokens to the browser over SSE', metadata: { topic: 'http', year: 2024, nested: { level: 2 } } }),
  new Document({ id: 'sse2', pageContent: 'The server streams tokens to the browser over SSE frames', metadata: { topic: 'http', year: 2025 } }),
  new Document({ id: 'docker', pageContent: 'Docker compose starts the app with Redis and Postgres', metadata: { topic: 'deploy', year: 2022 } }),
];

export function vectorStoreContract(name: string, makeStore: (embeddings: HashingEmbeddings) => Promise<VectorStore>): void {
  describe(`${name}: the vector store contract`, () => {
    let store: VectorStore;
    beforeEach(async () => {
      store = await makeStore(new HashingEmbeddings({ dimensions: 256 }));
      await store.addDocuments(docs);
    });

    it('finds the closest documents first, with scores', async () => {
      const results = await store.similaritySearchWithScore('chat history in redis', 2);
      expect(results.map(([doc]) => doc.id)).toEqual(['redis', 'docker']);
      expect(results[0]?.[1]).toBeGreaterThan(results[1]?.[1] as number);
      expect(results[0]?.[0]).toMatchObject({ pageContent: docs[0]?.pageContent, metadata: docs[0]?.metadata });
      expect((await store.similaritySearch('pgvector', 1))[0]?.id).toBe('pg');
    });

    it('upserts by id', async () => {
      await store.addDocuments([new Document({ id: 'redis', pageContent: 'Memcached is not used', metadata: { topic: 'none' } })]);
      const [top] = await store.similaritySearch('memcached', 1);
      expect(top).toMatchObject({ id: 'redis', pageContent: 'Memcached is not used', metadata: { topic: 'none' } });
      expect(await store.similaritySearch('anything', 10)).toHaveLength(5);
    });

    it('filters by metadata with every operator', async () => {
      const ids = async (filter: Record<string, unknown>) => (await store.similaritySearch('server', 10, filter)).map((d) => d.id).sort();
      expect(await ids({ topic: 'http' })).toEqual(['sse', 'sse2']);
      expect(await ids({ topic: { $eq: 'deploy' } })).toEqual(['docker']);
      expect(await ids({ topic: { $ne: 'storage' } })).toEqual(['docker', 'sse', 'sse2']);
      expect(await ids({ year: { $gt: 2023 } })).toEqual(['sse', 'sse2']);
      expect(await ids({ year: { $gte: 2023, $lt: 2025 } })).toEqual(['pg', 'sse']);
      expect(await ids({ year: { $lte: 2021 } })).toEqual(['redis']);
      expect(await ids({ topic: { $in: ['deploy', 'http'] } })).toEqual(['docker', 'sse', 'sse2']);
      expect(await ids({ topic: { $nin: ['deploy', 'http'] } })).toEqual(['pg', 'redis']);
      expect(await ids({ $or: [{ topic: 'deploy' }, { year: 2021 }] })).toEqual(['docker', 'redis']);
      expect(await ids({ $and: [{ topic: 'http' }, { year: { $gt: 2024 } }] })).toEqual(['sse2']);
      expect(await ids({ 'nested.level': 2 })).toEqual(['sse']);
    });

    // A probe: Postgres compared strings by the database's collation (ICU "en": "Banana" after "b") and memory
    // by UTF-16 units (an emoji before "｡"); every store now orders them by code point.
    it('compares strings by code point', async () => {
      const names = ['Banana', 'Zebra', 'cherry', 'éclair', '😀', '｡'];
      await store.addDocuments(names.map((name, i) => new Document({ id: `name${i}`, pageContent: `fruit ${name}`, metadata: { kind: 'names', name } })));
      const named = async (condition: Record<string, unknown>) =>
        (await store.similaritySearch('fruit', 20, { kind: 'names', name: condition })).map((d) => d.metadata.name as string).sort((a, b) => names.indexOf(a) - names.indexOf(b));
      expect(await named({ $gt: 'b' })).toEqual(['cherry', 'éclair', '😀', '｡']);
      expect(await named({ $lt: 'b' })).toEqual(['Banana', 'Zebra']);
      expect(await named({ $gt: '｡' })).toEqual(['😀']);
      expect(await named({ $gte: '😀' })).toEqual(['😀']);
      expect(await named({ $lte: 'éclair', $gt: 'Zebra' })).toEqual(['cherry', 'éclair']);
      // A review: a range over a boolean or null matches nothing (it compiled to SQL whose key parameter went unused: a 503).
      expect(await named({ $gt: true })).toEqual([]);
      expect(await store.similaritySearch('fruit', 20, { kind: 'names', name: { $gte: null }, year: { $lt: 3000 } })).toEqual([]);
      expect(await store.similaritySearch('fruit', 20, { kind: 'names', flag: { $lt: false } })).toEqual([]);
    });

    it('refuses bad filters and k out of range with RUNNEL_ERR_INPUT_INVALID', async () => {
      for (const filter of [{ 'bad key; DROP TABLE': 1 }, { topic: { $regex: '.*' } }, { $or: [] }, { topic: { $in: 'http' } }, { topic: { $gt: { a: 1 } } }]) {
        await expect(store.similaritySearch('x', 2, filter)).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
      }
      await expect(store.similaritySearch('x', 0)).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
      await expect(store.similaritySearch('x', 101)).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
    });

    // A probe: on Postgres these were SQL syntax errors, values JSON cannot hold (a NaN matched every number),
    // and stacks overflowed; the memory store answered some of them its own way.
    it('refuses filters no store can answer alike: no operator, values metadata cannot hold, too deep or too many', async () => {
      let deep: Record<string, unknown> = { topic: 'http' };
      for (let i = 0; i < 20; i++) deep = { $and: [deep] };
      const many = Object.fromEntries(Array.from({ length: 1_001 }, (_, i) => [`k${i}`, i]));
      const filters: Record<string, unknown>[] = [
        { topic: {} },
        { topic: {}, year: 1 },
        { $and: [{ topic: {} }] },
        { year: { $gt: Infinity } },
        { year: { $gt: Number.parseFloat('1e309') } },
        { year: Number.NaN },
        { topic: 'a\u0000b' },
        { topic: '\ud800' },
        { topic: { $in: ['http', '\udc00x'] } },
        deep,
        many,
      ];
      for (const filter of filters) {
        await expect(store.similaritySearch('x', 2, filter), JSON.stringify(filter).slice(0, 80)).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
        await expect(store.delete({ filter }), JSON.stringify(filter).slice(0, 80)).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
      }
      // Up to the bounds, and astral characters (whole pairs), are taken.
      let fifteen: Record<string, unknown> = { topic: 'http' };
      for (let i = 0; i < 15; i++) fifteen = { $or: [fifteen] };
      expect(await store.similaritySearch('x', 2, fifteen)).toEqual(expect.any(Array));
      expect(await store.similaritySearch('x', 2, { topic: '😀' })).toEqual([]);
    });

    it('deletes by ids and by filter', async () => {
      expect(await store.delete({ ids: ['redis', 'missing'] })).toBe(1);
      expect(await store.delete({ filter: { topic: 'http' } })).toBe(2);
      expect((await store.similaritySearch('anything', 10)).map((d) => d.id).sort()).toEqual(['docker', 'pg']);
    });

    it('diversifies with maximal marginal relevance', async () => {
      const plain = await store.similaritySearch('server streams tokens over SSE', 2);
      expect(plain.map((d) => d.id).sort()).toEqual(['sse', 'sse2']);
      const diverse = await store.maxMarginalRelevanceSearch('server streams tokens over SSE', { k: 2, fetchK: 5, lambda: 0.3 });
      expect(diverse).toHaveLength(2);
      expect(diverse.map((d) => d.id)).not.toEqual(expect.arrayContaining(['sse', 'sse2']));
    });

    it('serves as a retriever runnable', async () => {
      const retriever = store.asRetriever({ k: 1, filter: { topic: 'storage' } });
      expect(retriever.runType).toBe('retriever');
      const [doc] = await retriever.invoke('vectors');
      expect(doc?.id).toBe('pg');
      const events: string[] = [];
      for await (const event of retriever.streamEvents('vectors')) events.push(event.event);
      // LangServe's names: a retriever starts and ends (a trial found an on_retriever_stream, which it has not).
      expect(events).toEqual(['on_retriever_start', 'on_retriever_end']);
      expect((await store.asRetriever({ k: 2, searchType: 'mmr' }).invoke('SSE')).length).toBe(2);
    });
  });
}
