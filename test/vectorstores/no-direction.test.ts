import { describe, expect, it } from 'vitest';
import { Document, HashingEmbeddings, MemoryVectorStore, PgVectorStore, type VectorStore } from '../../src/index.js';
import { testDatabases } from './databases.js';

const dbs = testDatabases('no_direction');

const docs = ['Snapshots are retained for 30 days.', 'Pager alerts go to the on-call engineer.', 'Chat history lives in Redis.'].map(
  (text, i) => new Document({ id: `d${i}`, pageContent: text, metadata: { n: i } }),
);

const stores: [string, () => Promise<VectorStore>][] = [
  ['memory', async () => new MemoryVectorStore(new HashingEmbeddings())],
  ['postgres', () => PgVectorStore.create({ executor: dbs.postgres, embeddings: new HashingEmbeddings(), collection: dbs.collection() })],
  ['pglite', () => PgVectorStore.create({ executor: dbs.pglite, embeddings: new HashingEmbeddings(), collection: dbs.collection() })],
];

describe.each(stores)('a query with no searchable word (%s)', (_name, open) => {
  // A probe: "(", "it's" or an emoji embed to a vector of zeros; Postgres scored every row NaN, in no order, and
  // /rag quoted four arbitrary passages for them (the memory store scored each 0, in insertion order).
  it('finds nothing by vectors, and so nothing by hybrid search', async () => {
    const store = await open();
    await store.addDocuments(docs);
    for (const query of ['(', "it's", '🙂']) {
      expect(await store.search(query, { k: 3, search: 'dense' })).toEqual([]);
      expect(await store.search(query, { k: 3 })).toEqual([]);
      expect(await store.similaritySearchWithScore(query, 3)).toEqual([]);
      expect(await store.maxMarginalRelevanceSearch(query, { k: 2 })).toEqual([]);
    }
    // A question with a word still finds its passage.
    expect((await store.search('snapshots retained', { k: 1, search: 'dense' }))[0]?.document.id).toBe('d0');
  });

  // A review: a passage with no searchable word of its own (`(((`) ranked among a query's dense matches, scored
  // NaN (null in JSON) on Postgres and PGlite, 0 in memory.
  it('never finds a passage with no searchable word by vectors; lexical search has nothing to find it by either', async () => {
    const store = await open();
    await store.addDocuments([...docs, new Document({ id: 'blank', pageContent: '(((', metadata: { n: 9 } })]);
    for (const query of ['snapshots', 'pager alerts', 'chat history redis']) {
      const dense = await store.search(query, { k: 4, search: 'dense' });
      expect(dense.map((match) => match.document.id), query).not.toContain('blank');
      expect(dense.every((match) => Number.isFinite(match.score)), query).toBe(true);
      expect((await store.search(query, { k: 4 })).map((match) => match.document.id), query).not.toContain('blank');
      expect((await store.similaritySearchWithScore(query, 4)).map(([document]) => document.id), query).not.toContain('blank');
    }
    expect((await store.search('snapshots', { k: 1, search: 'dense' }))[0]?.document.id).toBe('d0');
  });
});
