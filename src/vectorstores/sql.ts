/**
 * One small SQL-executor interface, so the pgvector store runs the same SQL
 * on a `pg` Pool (Postgres) and on PGlite (embedded, in-process).
 */
import type { Pool } from 'pg';
import type { PGlite } from '@electric-sql/pglite';

/** Runs parameterised SQL. */
export interface SqlQueryable {
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<{ rows: T[] }>;
}

/** Runs parameterised SQL, migrations and transactions. */
export interface SqlExecutor extends SqlQueryable {
  /** Runs several statements without parameters (migrations). */
  exec(sql: string): Promise<void>;
  /** Runs `fn` in one transaction on one connection: committed when it resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: SqlQueryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** A `pg` Pool as an executor. */
export function pgExecutor(pool: Pool): SqlExecutor {
  return {
    query: async <T>(sql: string, params: unknown[] = []) => ({ rows: (await pool.query(sql, params)).rows as T[] }),
    exec: async (sql: string) => {
      await pool.query(sql);
    },
    transaction: async <T>(fn: (tx: SqlQueryable) => Promise<T>): Promise<T> => {
      const client = await pool.connect();
      let broken: Error | undefined;
      try {
        await client.query('BEGIN');
        const result = await fn({ query: async <R>(sql: string, params: unknown[] = []) => ({ rows: (await client.query(sql, params)).rows as R[] }) });
        await client.query('COMMIT');
        return result;
      } catch (error) {
        // A failed ROLLBACK means the connection itself is gone: it must not return to the pool.
        await client.query('ROLLBACK').catch((rollbackError: unknown) => {
          broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
        });
        throw error;
      } finally {
        client.release(broken);
      }
    },
    close: () => pool.end(),
  };
}

/** A PGlite database as an executor. */
export function pgliteExecutor(db: PGlite): SqlExecutor {
  return {
    query: async <T>(sql: string, params: unknown[] = []) => ({ rows: (await db.query<T>(sql, params)).rows }),
    exec: async (sql: string) => {
      await db.exec(sql);
    },
    transaction: <T>(fn: (tx: SqlQueryable) => Promise<T>): Promise<T> =>
      db.transaction((tx) => fn({ query: async <R>(sql: string, params: unknown[] = []) => ({ rows: (await tx.query<R>(sql, params)).rows }) })),
    close: () => db.close(),
  };
}
