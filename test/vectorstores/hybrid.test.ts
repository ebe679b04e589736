/**
 * Lexical and hybrid search, on every store: BM25 ranks alike in memory, on
 * Postgres and on PGlite; the index stays exact through upserts, deletes,
 * concurrent writers and old rows; filters and hostile queries hold; a
 * collection refuses vectors of other embeddings; the retriever fuses and
 * reranks.
 */
import { describe, expect, it } from 'vitest';
import {
  Document,
  HashingEmbeddings,
  lambda,
  MemoryVectorStore,
  PgVectorStore,
  queryTerms,
  terms,
  type RerankInput,
  type VectorStore,
} from '../../src/index.js';
import { testDatabases } from './databases.js';

const { pool, postgres, pglite, collection } = testDatabases('hybrid', { max: 6 });

const embeddings = () => new HashingEmbeddings({ dimensions: 256 });

const corpus = [
  new Document({ id: 'history', pageContent: 'Chat history is stored in Redis, one list per session, trimmed to the last messages.', metadata: { topic: 'storage', year: 2021 } }),
  new Document({ id: 'vectors', pageContent: 'Vectors are stored in Postgres with pgvector; an HNSW index finds neighbours.', metadata: { topic: 'storage', year: 2023 } }),
  new Document({ id: 'body', pageContent: 'bodyLimit: requests larger than the body limit are refused with 413.', metadata: { topic: 'http', year: 2024, headings: ['# Server', '## Limits'] } }),
  new Document({ id: 'stream', pageContent: 'The server streams tokens over server-sent events; a dropped client cancels the run.', metadata: { topic: 'http', year: 2025 } }),
  new Document({ id: 'deploy', pageContent: 'Docker compose starts the app with Redis and Postgres; scale the workers separately.', metadata: { topic: 'deploy', year: 2022 } }),
  new Document({ id: 'logger', pageContent: 'The logger writes each entry as one line of JSON.', metadata: { topic: 'logging', year: 2020 } }),
];

const QUERIES = ['Where is chat history stored?', 'redis postgres', 'body limit 413', 'how are tokens streamed to the client', 'limits of the server', 'nothing matches zebra'];

const stores: [string, () => Promise<VectorStore>][] = [
  ['memory', async () => new MemoryVectorStore(embeddings())],
  ['Postgres', () => PgVectorStore.create({ executor: postgres, embeddings: embeddings(), collection: collection() })],
  ['PGlite', () => PgVectorStore.create({ executor: pglite, embeddings: embeddings(), collection: collection() })],
];

/** Each query's lexical ranking as `id:score` with scores rounded, comparable across stores. */
async function lexicalRankings(store: VectorStore): Promise<string[][]> {
  const out: string[][] = [];
  for (const query of QUERIES) out.push((await store.search(query, { k: 10, search: 'lexical' })).map((m) => `${m.document.id}:${m.score.toFixed(9)}`));
  return out;
}

describe('lexical search ranks alike on every store', () => {
  it('gives the same BM25 scores in memory, on Postgres and on PGlite', async () => {
    const rankings: string[][][] = [];
    for (const [, make] of stores) {
      const store = await make();
      await store.addDocuments(corpus);
      rankings.push(await lexicalRankings(store));
    }
    expect(rankings[0]?.[0]?.[0]).toMatch(/^history:/);
    expect(rankings[0]?.[2]?.[0]).toMatch(/^body:/);
    // A heading path is searchable: "limits" and "server" are in body's headings, not in its text.
    expect(rankings[0]?.[4]?.[0]).toMatch(/^body:/);
    expect(rankings[0]?.[5]).toEqual([]);
    expect(rankings[1]).toEqual(rankings[0]);
    expect(rankings[2]).toEqual(rankings[0]);
  });
});

for (const [name, make] of stores) {
  describe(`${name}: lexical and hybrid search`, () => {
    it('keeps the index exact through upserts and deletes: the same scores as a collection built from the result', async () => {
      const store = await make();
      await store.addDocuments(corpus);
      await store.addDocuments([
        new Document({ id: 'history', pageContent: 'Conversation memory lives in Redis lists; history survives restarts.', metadata: { topic: 'storage', year: 2021 } }),
        new Document({ id: 'extra', pageContent: 'Prometheus scrapes /metrics; Grafana shows the history of latency.', metadata: { topic: 'ops', year: 2026 } }),
      ]);
      expect(await store.delete({ ids: ['vectors'] })).toBe(1);
      expect(await store.delete({ filter: { topic: 'deploy' } })).toBe(1);
      const final = await make();
      await final.addDocuments([
        new Document({ id: 'history', pageContent: 'Conversation memory lives in Redis lists; history survives restarts.', metadata: { topic: 'storage', year: 2021 } }),
        ...corpus.filter((doc) => !['history', 'vectors', 'deploy'].includes(doc.id as string)),
        new Document({ id: 'extra', pageContent: 'Prometheus scrapes /metrics; Grafana shows the history of latency.', metadata: { topic: 'ops', year: 2026 } }),
      ]);
      expect(await lexicalRankings(store)).toEqual(await lexicalRankings(final));
      expect((await store.search('pgvector HNSW', { search: 'lexical' })).map((m) => m.document.id)).toEqual([]);
    });

    it('fuses the two rankings: a document found only by its words and one found only by its vector both come back, with their ranks', async () => {
      const store = await make();
      await store.addDocuments(corpus);
      // "logging" shares no term with "logger" (Porter stems them apart: log, logger), but their character n-grams are close.
      const query = 'logging 413';
      const lexical = (await store.search(query, { k: 6, search: 'lexical' })).map((m) => m.document.id);
      expect(lexical).toEqual(['body']);
      const dense = (await store.search(query, { k: 2, search: 'dense' })).map((m) => m.document.id);
      expect(dense).toEqual(['body', 'logger']);
      const hybrid = await store.search(query, { k: 2 });
      expect(hybrid.map((m) => m.document.id)).toEqual(['body', 'logger']);
      expect(hybrid[0]?.ranks).toEqual({ dense: 1, lexical: 1 });
      expect(hybrid[1]?.ranks).toEqual({ dense: 2 });
      expect(hybrid[0]?.score).toBeCloseTo(1 / 61 + 1 / 61, 12);
      // Weights move the order: with the vector ranking weighed 0, the logger passage is not among the first two.
      expect((await store.search(query, { k: 2, fusion: { dense: 0 } })).map((m) => m.document.id)).toEqual(['body']);
    });

    it('applies filters to lexical and hybrid search, and treats a hostile query as words', async () => {
      const store = await make();
      await store.addDocuments(corpus);
      const ids = async (search: 'lexical' | 'hybrid', filter: Record<string, unknown>) => (await store.search('redis postgres server', { k: 10, search, filter })).map((m) => m.document.id).sort();
      expect(await ids('lexical', { topic: 'storage' })).toEqual(['history', 'vectors']);
      // body matches by its heading path (# Server).
      expect(await ids('lexical', { year: { $gte: 2023 } })).toEqual(['body', 'stream', 'vectors']);
      expect(await ids('hybrid', { topic: { $in: ['deploy', 'http'] } })).toEqual(['body', 'deploy', 'stream']);
      const hostile = "x'); DROP TABLE runnel_lexical_postings; -- $1 \\ \u0000 redis";
      expect((await store.search(hostile, { k: 3, search: 'lexical' })).map((m) => m.document.id)).toContain('history');
      expect((await store.search('redis', { search: 'lexical' })).length).toBeGreaterThan(0);
      await expect(store.search('x', { search: 'fuzzy' as never })).rejects.toMatchObject({ code: 'RUNNEL_ERR_INVALID_ARGUMENT' });
      await expect(store.search('x', { fusion: { dense: -1 } })).rejects.toMatchObject({ code: 'RUNNEL_ERR_INVALID_ARGUMENT' });
      await expect(store.search('x', { fusion: { dense: 0, lexical: 0 } })).rejects.toMatchObject({ code: 'RUNNEL_ERR_INVALID_ARGUMENT' });
      await expect(store.search('x', { k: 101 })).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
      await expect(store.search('x', { filter: { 'bad key;': 1 } })).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
    });

    it('serves hybrid search as a retriever by default, with a reranking step run as a child', async () => {
      const store = await make();
      await store.addDocuments(corpus);
      expect((await store.asRetriever({ k: 1 }).invoke('Where is chat history stored?')).map((d) => d.id)).toEqual(['history']);
      expect((await store.asRetriever({ k: 1, search: 'lexical' }).invoke('413')).map((d) => d.id)).toEqual(['body']);
      const seen: RerankInput[] = [];
      const reverse = lambda((input: RerankInput) => {
        seen.push(input);
        return [...input.documents].reverse();
      }, { name: 'reverse' });
      const retriever = store.asRetriever({ k: 2, fetchK: 5, rerank: reverse });
      const events = [];
      for await (const event of retriever.streamEvents('redis postgres')) events.push(event);
      const end = events.find((e) => e.event === 'on_retriever_end');
      const candidates = seen[0]?.documents ?? [];
      expect(candidates).toHaveLength(5);
      expect((end?.data as { output: Document[] }).output.map((d) => d.id)).toEqual([candidates[4]?.id, candidates[3]?.id]);
      expect(events.some((e) => e.event === 'on_chain_start' && e.name === 'reverse')).toBe(true);
      expect(() => store.asRetriever({ searchType: 'mmr', rerank: reverse })).toThrow(/mmr/);
    });
  });
}

/** Terms whose document frequency differs from their postings' count (none, when the index is right). */
async function dfDrift(name: string): Promise<unknown[]> {
  const { rows } = await pool.query(
    `SELECT t.term FROM runnel_lexical_terms t
     LEFT JOIN (SELECT term, count(*)::int AS n FROM runnel_lexical_postings WHERE collection = $1 GROUP BY term) p ON p.term = t.term
     WHERE t.collection = $1 AND t.df IS DISTINCT FROM p.n`,
    [name],
  );
  return rows;
}

describe('the Postgres lexical index', () => {
  it('stays consistent under concurrent writers of the same new ids', async () => {
    const name = collection();
    const a = await PgVectorStore.create({ executor: postgres, embeddings: embeddings(), collection: name });
    const b = await PgVectorStore.create({ executor: postgres, embeddings: embeddings(), collection: name });
    const docs = (tag: string) => Array.from({ length: 40 }, (_, i) => new Document({ id: `d${i}`, pageContent: `document ${i} about ${tag} topic${i % 7} and shared words` }));
    await Promise.all([a.addDocuments(docs('apples')), b.addDocuments(docs('pears')), a.addDocuments(docs('plums')), b.delete({ ids: ['d1', 'd2'] })]);
    const { rows: stats } = await pool.query('SELECT documents, total_length FROM runnel_lexical_stats WHERE collection = $1', [name]);
    const { rows: docsNow } = await pool.query('SELECT count(*)::int AS n, sum(lexical_length)::int AS len FROM runnel_embeddings_256 WHERE collection = $1', [name]);
    expect(Number(stats[0]?.documents)).toBe(docsNow[0]?.n);
    expect(Number(stats[0]?.total_length)).toBe(docsNow[0]?.len);
    expect(await dfDrift(name)).toEqual([]);
    // Each document's postings are exactly the terms of its current text.
    const { rows: stored } = await pool.query('SELECT id, content FROM runnel_embeddings_256 WHERE collection = $1', [name]);
    const { rows: postings } = await pool.query('SELECT id, array_agg(term ORDER BY term) AS terms FROM runnel_lexical_postings WHERE collection = $1 GROUP BY id', [name]);
    const byId = new Map(postings.map((row) => [row.id as string, row.terms as string[]]));
    expect(stored.length).toBeGreaterThanOrEqual(38);
    for (const row of stored) expect(byId.get(row.id)).toEqual([...new Set(terms(row.content as string))].sort());
    expect(byId.size).toBe(stored.length);
  });

  it('clears postings a writer without the index left behind, instead of failing every later upsert of that id', async () => {
    const name = collection();
    const store = await PgVectorStore.create({ executor: postgres, embeddings: embeddings(), collection: name });
    await store.addDocuments(corpus);
    // A replica of an earlier version deletes a row: its postings, and its share of the statistics, stay.
    await pool.query('DELETE FROM runnel_embeddings_256 WHERE collection = $1 AND id = $2', [name, 'history']);
    await store.addDocuments([new Document({ id: 'history', pageContent: 'Sessions are kept in Redis lists.' })]);
    const { rows } = await pool.query('SELECT term FROM runnel_lexical_postings WHERE collection = $1 AND id = $2 ORDER BY term', [name, 'history']);
    expect(rows.map((row) => row.term)).toEqual([...new Set(terms('Sessions are kept in Redis lists.'))].sort());
    expect(await dfDrift(name)).toEqual([]);
    expect((await store.search('chat history', { search: 'lexical', k: 10 })).map((m) => m.document.id)).not.toContain('history');
  });

  it('indexes rows written before it existed when the collection opens', async () => {
    const name = collection();
    const store = await PgVectorStore.create({ executor: postgres, embeddings: embeddings(), collection: name });
    const vectorOf = async (text: string) => `[${(await embeddings().embedQuery(text)).join(',')}]`;
    // As an earlier version wrote them: no terms, no statistics.
    for (const doc of corpus.slice(0, 3)) {
      await pool.query(`INSERT INTO runnel_embeddings_256 (collection, id, content, metadata, embedding) VALUES ($1, $2, $3, $4, $5::vector)`, [
        name,
        doc.id,
        doc.pageContent,
        JSON.stringify(doc.metadata),
        await vectorOf(doc.pageContent),
      ]);
    }
    expect(await store.search('chat history', { search: 'lexical' })).toEqual([]);
    const reopened = await PgVectorStore.create({ executor: postgres, embeddings: embeddings(), collection: name });
    expect((await reopened.search('chat history', { search: 'lexical' }))[0]?.document.id).toBe('history');
    const { rows } = await pool.query('SELECT documents FROM runnel_lexical_stats WHERE collection = $1', [name]);
    expect(Number(rows[0]?.documents)).toBe(3);
  });

  it.each([
    ['Postgres', () => postgres],
    ['PGlite', () => pglite],
  ] as const)('finds rows and opens collections whose records were changed by hand (%s): metadata not an object, counts below zero', async (_name, db) => {
    const name = collection();
    const store = await PgVectorStore.create({ executor: db(), embeddings: embeddings(), collection: name });
    await store.addDocuments(corpus);
    // Metadata no version writes (a JSON string, an array), on a row the next open must index again; statistics
    // and postings below zero, and a term in more documents than the collection holds.
    await db().query(`UPDATE runnel_embeddings_256 SET metadata = '"str"'::jsonb, lexical_length = NULL WHERE collection = $1 AND id = 'history'`, [name]);
    await db().query(`UPDATE runnel_embeddings_256 SET metadata = '[1,2]'::jsonb WHERE collection = $1 AND id = 'vectors'`, [name]);
    await db().query('UPDATE runnel_lexical_stats SET documents = -5 WHERE collection = $1', [name]);
    await db().query(`UPDATE runnel_lexical_terms SET df = CASE WHEN term = 'redi' THEN 1000 ELSE -3 END WHERE collection = $1`, [name]);
    await db().query(`UPDATE runnel_lexical_postings SET tf = -100, length = -1000 WHERE collection = $1 AND id = 'body'`, [name]);
    // Opening indexes the row again (it failed on JSON.parse of "str", and kept the collection from opening).
    const reopened = await PgVectorStore.create({ executor: db(), embeddings: embeddings(), collection: name });
    for (const search of ['dense', 'lexical', 'hybrid'] as const) {
      const found = await reopened.search('Where is chat history stored in redis?', { k: 6, search });
      expect(found.length, search).toBeGreaterThan(0);
      for (const match of found) {
        expect(Number.isFinite(match.score), search).toBe(true);
        expect(match.document.metadata, search).toEqual(expect.any(Object));
        expect(Array.isArray(match.document.metadata), search).toBe(false);
      }
      const history = found.find((match) => match.document.id === 'history');
      if (history !== undefined) expect(history.document.metadata).toEqual({});
    }
    expect((await reopened.search('body limit 413', { k: 6, search: 'lexical' })).length).toBeGreaterThan(0);
  });

  it('refuses to open a collection with other embeddings than it holds, and empties a derived one instead when asked', async () => {
    const name = collection();
    const words = new HashingEmbeddings({ dimensions: 256, features: 'words' });
    const store = await PgVectorStore.create({ executor: pglite, embeddings: words, collection: name });
    await store.addDocuments(corpus);
    await expect(PgVectorStore.create({ executor: pglite, embeddings: embeddings(), collection: name })).rejects.toThrow(/other embeddings \(hashing:words:256\), not hashing:terms:256/);
    // A collection from before the record: its vectors are checked by embedding one document again.
    await pglite.query('UPDATE runnel_collections SET embedder = NULL WHERE name = $1', [name]);
    await expect(PgVectorStore.create({ executor: pglite, embeddings: embeddings(), collection: name })).rejects.toThrow(/an earlier kind/);
    expect(await (await PgVectorStore.create({ executor: pglite, embeddings: words, collection: name })).count()).toBe(corpus.length);
    const replaced = await PgVectorStore.create({ executor: pglite, embeddings: embeddings(), collection: name, replaceIncompatible: true });
    expect(await replaced.count()).toBe(0);
    expect(await replaced.search('redis', { search: 'lexical' })).toEqual([]);
    expect(queryTerms('redis')).toEqual(['redi']);
  });

  it('does not take a collection whose first document has no words for one of other embeddings', async () => {
    const name = collection();
    const store = await PgVectorStore.create({ executor: pglite, embeddings: embeddings(), collection: name });
    await store.addDocuments([new Document({ id: 'a', pageContent: 'It is what it is.' }), ...corpus]);
    await pglite.query('UPDATE runnel_collections SET embedder = NULL WHERE name = $1', [name]);
    expect(await (await PgVectorStore.create({ executor: pglite, embeddings: embeddings(), collection: name })).count()).toBe(corpus.length + 1);
  });
});

describe('a store without a lexical index', () => {
  it('searches by vectors when no mode is named, and says so when lexical search is asked for', async () => {
    class VectorsOnly extends MemoryVectorStore {}
    Object.defineProperty(VectorsOnly.prototype, 'searchTerms', { value: Object.getPrototypeOf(MemoryVectorStore.prototype).searchTerms });
    const store = new VectorsOnly(embeddings());
    await store.addDocuments(corpus);
    expect(store.lexical).toBe(false);
    expect((await store.asRetriever({ k: 1 }).invoke('Where is chat history stored?')).map((d) => d.id)).toEqual(['history']);
    await expect(store.search('x', { search: 'hybrid' })).rejects.toThrow(/VectorsOnly has no lexical index/);
    expect(new MemoryVectorStore(embeddings()).lexical).toBe(true);
  });
});
