/**
 * Replicas opening the store at once on a fresh database: an operator's trial saw the second fail its first
 * seed with `duplicate key value violates unique constraint "pg_extension_name_index"` — two CREATE EXTENSION
 * IF NOT EXISTS at once, which Postgres does not serialise — and recover 5 s later. The migration now holds
 * an advisory lock.
 */
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { HashingEmbeddings, PgVectorStore, pgExecutor } from '../../src/index.js';

const ADMIN_URL = process.env.RUNNEL_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/runnel_test';
const database = `runnel_migrate_${process.pid}_${Date.now()}`;
const admin = new pg.Pool({ connectionString: ADMIN_URL, max: 1 });
admin.on('error', () => {});
const pools: pg.Pool[] = [];

afterAll(async () => {
  for (const pool of pools) await pool.end();
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.end();
});

describe('PgVectorStore.create by several replicas at once, on a database without pgvector yet', () => {
  it('creates the extension, tables and indexes once, and every replica opens', async () => {
    await admin.query(`CREATE DATABASE ${database}`);
    const url = new URL(ADMIN_URL);
    url.pathname = `/${database}`;
    const opened = await Promise.allSettled(
      Array.from({ length: 6 }, () => {
        const pool = new pg.Pool({ connectionString: url.toString(), max: 2 });
        // The drop at the end terminates whatever connection is still closing: not an error of the test's.
        pool.on('error', () => {});
        pools.push(pool);
        return PgVectorStore.create({ executor: pgExecutor(pool), embeddings: new HashingEmbeddings(), collection: 'docs' });
      }),
    );
    expect(opened.map((result) => (result.status === 'rejected' ? String(result.reason) : 'opened'))).toEqual(Array(6).fill('opened'));
  });
});
