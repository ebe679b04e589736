/**
 * The two databases the store tests run on — the test Postgres (a pool) and
 * a fresh PGlite — with collection names unique to this run, and every
 * trace of those collections (rows, lexical index, records) removed after
 * the file's tests.
 */
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { pgExecutor, pgliteExecutor, type SqlExecutor, type SqlQueryable } from '../../src/index.js';

export const DATABASE_URL = process.env.RUNNEL_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/runnel_test';

/** Deletes the collections whose names match `like` (a LIKE pattern) from every table a store writes. */
export async function dropCollections(db: SqlQueryable, like: string): Promise<void> {
  const { rows } = await db.query<{ table_name: string }>(
    `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_name LIKE 'runnel\\_embeddings\\_%'`,
  );
  for (const table of [...rows.map((row) => row.table_name), 'runnel_lexical_postings', 'runnel_lexical_terms', 'runnel_lexical_stats']) {
    await db.query(`DELETE FROM ${table} WHERE collection LIKE $1`, [like]).catch(() => undefined);
  }
  await db.query('DELETE FROM runnel_collections WHERE name LIKE $1', [like]).catch(() => undefined);
}

/** Registers the file's setup and cleanup; `pglite` is usable from the first test on. */
export function testDatabases(prefix: string, options: { max?: number } = {}) {
  const run = `${prefix}_${process.pid}_${Date.now()}`;
  let n = 0;
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: options.max ?? 4 });
  pool.on('error', () => {});
  const postgres = pgExecutor(pool);
  let db: SqlExecutor | undefined;
  const opened = (): SqlExecutor => db as SqlExecutor;
  const pglite: SqlExecutor = {
    query: (sql, params) => opened().query(sql, params),
    exec: (sql) => opened().exec(sql),
    transaction: (fn) => opened().transaction(fn),
    close: async () => db?.close(),
  };
  beforeAll(async () => {
    db = pgliteExecutor(await PGlite.create({ extensions: { vector } }));
  });
  afterAll(async () => {
    await dropCollections(postgres, `${run}\\_%`);
    await postgres.close();
    await pglite.close();
  });
  return { pool, postgres, pglite, collection: () => `${run}_${n++}` };
}
