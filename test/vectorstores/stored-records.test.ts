/**
 * Rows and statistics changed by hand, on Postgres and on PGlite: an oversized row is skipped with a warning
 * (a probe: 100 MB of metadata on a top passage made every search wait out the statement timeout and answer
 * 503), and impossible lexical statistics are counted again from the rows instead of silently changing the
 * ranking (a probe: /rag answered another top passage, or lexical search nothing).
 */
import { describe, expect, it, vi } from 'vitest';
import { Document, HashingEmbeddings, PgVectorStore, type SqlExecutor } from '../../src/index.js';
import { testDatabases } from './databases.js';

const { postgres, pglite, collection } = testDatabases('stored');

const corpus = [
  new Document({ id: 'history', pageContent: 'Chat history is stored in Redis, one list per session.', metadata: { source: 'history.md' } }),
  new Document({ id: 'cache', pageContent: 'The response cache keeps whole answers in Redis by prompt hash.', metadata: { source: 'cache.md' } }),
  new Document({ id: 'vectors', pageContent: 'Vectors live in Postgres with pgvector; an HNSW index serves the search.', metadata: { source: 'vectors.md' } }),
  new Document({ id: 'limits', pageContent: 'A body over the limit is refused with 413 before it is read whole.', metadata: { source: 'limits.md' } }),
  new Document({ id: 'session', pageContent: 'A session id names the Redis list of its chat history.', metadata: { source: 'session.md' } }),
];

const embeddings = (): HashingEmbeddings => new HashingEmbeddings({ dimensions: 256 });

async function open(db: SqlExecutor): Promise<{ store: PgVectorStore; name: string; warn: ReturnType<typeof vi.fn> }> {
  const name = collection();
  const warn = vi.fn();
  const store = await PgVectorStore.create({ executor: db, embeddings: embeddings(), collection: name, warn });
  await store.addDocuments(corpus);
  return { store, name, warn };
}

const ids = (found: { document: Document }[]): (string | undefined)[] => found.map((match) => match.document.id);

describe.each([
  ['Postgres', () => postgres],
  ['PGlite', () => pglite],
] as const)('stored records changed by hand (%s)', (_name, db) => {
  // 2 MB of one letter: 23 KB as Postgres stores it compressed (pg_column_size), so only its length as JSON text tells.
  it.each([
    ['metadata', `metadata = jsonb_build_object('source', repeat('S', 2000000))`],
    ['content', `content = repeat('chat history ', 200000)`],
  ])('skips a row of oversized %s in every read, with a warning naming it, and serves the rest', async (_what, change) => {
    const { store, name, warn } = await open(db());
    const question = 'Where is chat history stored?';
    const before = await store.search(question, { k: 5, search: 'hybrid' });
    expect(ids(before)).toContain('history');
    await db().query(`UPDATE runnel_embeddings_256 SET ${change} WHERE collection = $1 AND id = 'history'`, [name]);
    for (const search of ['dense', 'lexical', 'hybrid'] as const) {
      warn.mockClear();
      const found = await store.search(question, { k: 5, search });
      expect(ids(found), search).not.toContain('history');
      expect(found.length, search).toBeGreaterThan(0);
      expect(warn, search).toHaveBeenCalledWith(expect.objectContaining({ code: 'RUNNEL_ERR_STORED_RECORD_INVALID', collection: name, ids: ['history'] }), 'stored record not valid');
    }
    expect((await store.maxMarginalRelevanceSearch(question, { k: 5, fetchK: 5 })).map((doc) => doc.id)).not.toContain('history');
    // Ingestion sees it as absent, so its next run writes it again, mending it.
    expect(await store.existingIds(['history', 'cache'])).toEqual(new Set(['cache']));
    expect([...(await store.metadataOf(['history', 'cache'])).keys()]).toEqual(['cache']);
    expect((await store.sources()).every((source) => source.length < 100)).toBe(true);
    await store.addDocuments([corpus[0] as Document]);
    expect(ids(await store.search(question, { k: 5, search: 'hybrid' }))).toEqual(ids(before));
  });

  it('indexes an oversized row written before the lexical index without reading it, and opens', async () => {
    const { name } = await open(db());
    await db().query(`UPDATE runnel_embeddings_256 SET content = repeat('x', 1048577), lexical_length = NULL WHERE collection = $1 AND id = 'history'`, [name]);
    const warn = vi.fn();
    const reopened = await PgVectorStore.create({ executor: db(), embeddings: embeddings(), collection: name, warn });
    expect(warn).toHaveBeenCalledWith(expect.objectContaining({ collection: name, ids: ['history'] }), 'stored record not valid');
    expect(ids(await reopened.search('chat history', { k: 5, search: 'lexical' }))).not.toContain('history');
  });

  it('refuses to write what a read would skip: text past 1 MiB, metadata past 64 KiB as JSON, also as Postgres writes it', async () => {
    const { store } = await open(db());
    await expect(store.addDocuments([new Document({ id: 'big', pageContent: 'é'.repeat(524_289) })])).rejects.toMatchObject({ code: 'RUNNEL_ERR_INVALID_ARGUMENT' });
    await expect(store.addDocuments([new Document({ id: 'big', pageContent: 'a', metadata: { note: 'n'.repeat(65_536) } })])).rejects.toMatchObject({ code: 'RUNNEL_ERR_INVALID_ARGUMENT' });
    // 2 KB of JSON that Postgres writes as 90 KB (each 1e300 as 301 digits): refused after the insert, rolled back.
    const numbers = { n: Array.from({ length: 300 }, () => 1e300) };
    await expect(store.addDocuments([new Document({ id: 'big', pageContent: 'a', metadata: numbers })])).rejects.toMatchObject({ code: 'RUNNEL_ERR_INVALID_ARGUMENT' });
    await expect(store.updateMetadata([new Document({ id: 'cache', pageContent: '', metadata: numbers })])).rejects.toMatchObject({ code: 'RUNNEL_ERR_INVALID_ARGUMENT' });
    expect(await store.existingIds(['big', 'cache'])).toEqual(new Set(['cache']));
    // The largest allowed is written and read back.
    const largest = new Document({ id: 'largest', pageContent: 'a'.repeat(1024 * 1024), metadata: { note: 'n'.repeat(65_000) } });
    await store.addDocuments([largest]);
    expect((await store.metadataOf(['largest'])).get('largest')).toEqual(largest.metadata);
  });

  it.each([
    ['documents = -5, total_length = -100', 'UPDATE runnel_lexical_stats SET documents = -5, total_length = -100 WHERE collection = $1'],
    ['documents = 0, total_length = 0', 'UPDATE runnel_lexical_stats SET documents = 0, total_length = 0 WHERE collection = $1'],
    ['documents = 1, total_length = 0', 'UPDATE runnel_lexical_stats SET documents = 1, total_length = 0 WHERE collection = $1'],
    ['total_length = -1', 'UPDATE runnel_lexical_stats SET total_length = -1 WHERE collection = $1'],
    ['the row deleted', 'DELETE FROM runnel_lexical_stats WHERE collection = $1'],
  ])('counts impossible lexical statistics (%s) again from the rows, with a warning, and ranks as before', async (_what, change) => {
    const { store, name, warn } = await open(db());
    const question = 'Where is the chat history of a session stored in Redis?';
    const lexical = await store.search(question, { k: 5, search: 'lexical' });
    const hybrid = await store.search(question, { k: 5, search: 'hybrid' });
    const stats = (await db().query('SELECT documents::integer AS documents, total_length::integer AS total_length FROM runnel_lexical_stats WHERE collection = $1', [name])).rows;
    expect(lexical.length).toBeGreaterThan(1);
    await db().query(change, [name]);
    const found = await store.search(question, { k: 5, search: 'lexical' });
    expect(ids(found)).toEqual(ids(lexical));
    expect(found.map((match) => match.score)).toEqual(lexical.map((match) => match.score));
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn).toHaveBeenCalledWith(expect.objectContaining({ code: 'RUNNEL_ERR_STORED_RECORD_INVALID', collection: name }), 'stored record not valid');
    expect((await db().query('SELECT documents::integer AS documents, total_length::integer AS total_length FROM runnel_lexical_stats WHERE collection = $1', [name])).rows).toEqual(stats);
    await db().query(change, [name]);
    expect(ids(await store.search(question, { k: 5, search: 'hybrid' }))).toEqual(ids(hybrid));
    expect(warn).toHaveBeenCalledTimes(2);
  });

  it('fails the lexical search with RUNNEL_ERR_STORED_RECORD_INVALID when counting again cannot mend the statistics', async () => {
    const { store, name } = await open(db());
    // Postings of documents no row says are indexed: the rows count no document.
    await db().query('UPDATE runnel_embeddings_256 SET lexical_length = NULL WHERE collection = $1', [name]);
    await db().query('DELETE FROM runnel_lexical_stats WHERE collection = $1', [name]);
    await expect(store.search('chat history', { k: 5, search: 'lexical' })).rejects.toMatchObject({ code: 'RUNNEL_ERR_STORED_RECORD_INVALID' });
  });
});
