import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Document, HashingEmbeddings, PgVectorStore, pgExecutor, pgliteExecutor, type SqlExecutor } from '../../src/index.js';
import { vectorStoreContract } from './contract.js';

const DATABASE_URL = process.env.RUNNEL_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/runnel_test';
const run = `${process.pid}_${Date.now()}`;
let n = 0;
const collection = () => `test_${run}_${n++}`;

const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
pool.on('error', () => {});
const postgres = pgExecutor(pool);
let pglite: SqlExecutor;

beforeAll(async () => {
  pglite = pgliteExecutor(await PGlite.create({ extensions: { vector } }));
});
afterAll(async () => {
  await pool.query(`DELETE FROM runnel_embeddings_256 WHERE collection LIKE $1`, [`test_${run}_%`]).catch(() => undefined);
  await pool.query(`DELETE FROM runnel_collections WHERE name LIKE $1`, [`test_${run}_%`]).catch(() => undefined);
  await postgres.close();
  await pglite.close();
});

vectorStoreContract('PgVectorStore on Postgres', (embeddings) => PgVectorStore.create({ executor: postgres, embeddings, collection: collection() }));
vectorStoreContract('PgVectorStore on PGlite', (embeddings) => PgVectorStore.create({ executor: pglite, embeddings, collection: collection() }));

describe('PgVectorStore', () => {
  it('migrates idempotently, with an HNSW index, and refuses a collection of another vector length', async () => {
    const name = collection();
    const first = await PgVectorStore.create({ executor: postgres, embeddings: new HashingEmbeddings({ dimensions: 256 }), collection: name });
    await first.addDocuments([new Document({ id: 'a', pageContent: 'alpha' })]);
    const again = await PgVectorStore.create({ executor: postgres, embeddings: new HashingEmbeddings({ dimensions: 256 }), collection: name });
    expect(await again.count()).toBe(1);
    const { rows } = await pool.query(`SELECT indexdef FROM pg_indexes WHERE tablename = 'runnel_embeddings_256'`);
    expect(rows.map((r) => r.indexdef).join('\n')).toMatch(/USING hnsw \(embedding vector_cosine_ops\)/);
    await expect(PgVectorStore.create({ executor: postgres, embeddings: new HashingEmbeddings({ dimensions: 128 }), collection: name })).rejects.toThrow(/256-dimensional/);
  });

  it('keeps collections apart and upserts in batches', async () => {
    const a = await PgVectorStore.create({ executor: pglite, embeddings: new HashingEmbeddings({ dimensions: 256 }), collection: collection(), batchSize: 7 });
    const b = await PgVectorStore.create({ executor: pglite, embeddings: new HashingEmbeddings({ dimensions: 256 }), collection: collection() });
    await a.addDocuments(Array.from({ length: 20 }, (_, i) => new Document({ id: `d${i}`, pageContent: `document number ${i}` })));
    await b.addDocuments([new Document({ id: 'd1', pageContent: 'other' })]);
    expect(await a.count()).toBe(20);
    expect(await b.count()).toBe(1);
    expect((await a.similaritySearch('document number 13', 1))[0]?.id).toBe('d13');
  });

  it('never builds SQL from filter keys or values', async () => {
    const store = await PgVectorStore.create({ executor: postgres, embeddings: new HashingEmbeddings({ dimensions: 256 }), collection: collection() });
    await store.addDocuments([new Document({ id: 'x', pageContent: 'safe', metadata: { topic: "x'; DROP TABLE runnel_collections; --" } })]);
    await expect(store.similaritySearch('safe', 1, { "topic') OR 1=1 --": 'x' })).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
    expect(await store.similaritySearch('safe', 1, { topic: "x'; DROP TABLE runnel_collections; --" })).toHaveLength(1);
    expect((await pool.query('SELECT count(*) FROM runnel_collections')).rows[0].count).not.toBe('0');
  });
});
