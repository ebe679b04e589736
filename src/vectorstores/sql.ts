/**
 * One small SQL-executor interface, so the pgvector store runs the same SQL
 * on a `pg` Pool (Postgres) and on PGlite (embedded, in-process).
 */
import type { Pool } from 'pg';
import type { PGlite } from '@electric-sql/pglite';

/** Runs parameterised SQL. */
export interface SqlExecutor {
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<{ rows: T[] }>;
  /** Runs several statements without parameters (migrations). */
  exec(sql: string): Promise<void>;
  close(): Promise<void>;
}

/** A `pg` Pool as an executor. */
export function pgExecutor(pool: Pool): SqlExecutor {
  return {
    query: async <T>(sql: string, params: unknown[] = []) => ({ rows: (await pool.query(sql, params)).rows as T[] }),
    exec: async (sql: string) => {
      await pool.query(sql);
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
    close: () => db.close(),
  };
}
