/**
 * One small SQL-executor interface, so the pgvector store runs the same SQL
 * on a `pg` Pool (Postgres) and on PGlite (embedded, in-process).
 */
import type { Pool } from 'pg';
import type { PGlite } from '@electric-sql/pglite';
import { isRunnelError, RunnelError } from '../core/index.js';

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

/**
 * A row's `metadata` as a document's: the stored object, or `{}` for anything else. Runnel writes objects
 * only; a row changed by hand (a JSON string, an array, a number — which JSON.parse could not read, or read
 * into what is not metadata) is still found and quoted, without metadata, instead of failing every search
 * that reaches it. A driver that hands `jsonb` over as text is read too.
 *
 * @example
 * storedMetadata({ source: 'a.md' }); // { source: 'a.md' }
 * storedMetadata('"str"');             // {}
 */
export function storedMetadata(value: unknown): Record<string, unknown> {
  let metadata = value;
  if (typeof metadata === 'string') {
    try {
      metadata = JSON.parse(metadata) as unknown;
    } catch {
      return {};
    }
  }
  return metadata !== null && typeof metadata === 'object' && !Array.isArray(metadata) ? (metadata as Record<string, unknown>) : {};
}

/**
 * The largest record a store writes and reads: a document's text at most 1 MiB of UTF-8
 * (`octet_length(content)`), its metadata at most 64 KiB as JSON text (the column `metadata_bytes`, generated
 * from the stored jsonb on every write — by hand too). Reads skip any row past either, which only a row changed
 * by hand can be (a probe: 100 MB of metadata on a top passage made every search that reached it wait out the
 * statement timeout and answer 503).
 */
export const MAX_CONTENT_BYTES = 1024 * 1024;
/** The longest metadata a store writes or reads, as JSON text (see {@link MAX_CONTENT_BYTES}). */
export const MAX_METADATA_BYTES = 64 * 1024;

/** The generated column holding the length of a row's metadata as JSON text (Postgres's `metadata::text`). */
export const METADATA_BYTES_COLUMN = 'metadata_bytes';

/**
 * SQL true for a row a read may ship (`alias` qualifies the columns). Neither size reads the value:
 * `octet_length` of text takes a TOASTed value's length from its header (1 ms for 200 MB), and the metadata's
 * length is stored beside it. (`pg_column_size` would not do for metadata: it is the compressed size — 1.1 MB
 * for 100 MB of one repeated letter — and measuring the jsonb itself took 1.7 s.)
 */
export function shippable(alias = ''): string {
  const at = alias === '' ? '' : `${alias}.`;
  return `(octet_length(${at}content) <= ${MAX_CONTENT_BYTES} AND ${at}${METADATA_BYTES_COLUMN} <= ${MAX_METADATA_BYTES})`;
}

/**
 * The columns `content`, `metadata` and `oversized` of a read: a row's text and metadata when it is within the
 * bounds a store writes, else nulls and `oversized` true (the sizes are read from the values' headers: an
 * oversized value is neither fetched nor decompressed).
 */
export function shippedColumns(alias = ''): string {
  const at = alias === '' ? '' : `${alias}.`;
  const within = shippable(alias);
  return `CASE WHEN ${within} THEN ${at}content END AS content, CASE WHEN ${within} THEN ${at}metadata END AS metadata, NOT ${within} AS oversized`;
}

/** Refuses a document a store would not read back (see {@link MAX_CONTENT_BYTES}). */
export function checkStorable(doc: { id?: string | undefined; pageContent: string; metadata: Record<string, unknown> }): void {
  const name = doc.id === undefined ? 'A document' : `Document ${doc.id}`;
  const content = Buffer.byteLength(doc.pageContent, 'utf8');
  if (content > MAX_CONTENT_BYTES) {
    throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `${name} has ${content} bytes of text; a store holds at most ${MAX_CONTENT_BYTES} (split it)`);
  }
  const metadata = Buffer.byteLength(JSON.stringify(doc.metadata), 'utf8');
  if (metadata > MAX_METADATA_BYTES) {
    throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `${name} has ${metadata} bytes of metadata as JSON; a store holds at most ${MAX_METADATA_BYTES}`);
  }
}

/** Where a store reports a stored row it skipped or repaired (`stored record not valid`). */
export type StoreWarn = (fields: Record<string, unknown>, message: string) => void;

/** The default {@link StoreWarn}: a process warning (`RunnelWarning`, code `RUNNEL_ERR_STORED_RECORD_INVALID`) on stderr. */
export const processWarn: StoreWarn = (fields, message) => {
  process.emitWarning(`${message}: ${JSON.stringify(fields)}`, { type: 'RunnelWarning', code: 'RUNNEL_ERR_STORED_RECORD_INVALID' });
};

// SQLSTATE classes and codes that mean "the database is not there" rather than "this SQL is wrong":
// connection exceptions (08), credentials refused (28), resources the server is out of (53: its connection
// limit or a role's, a full disk, memory — not 53400, a query past a configured limit such as temp_file_limit,
// which fails the same way each time it is sent), its files failing under it (58: a data directory removed or
// unreadable, an I/O error — PGlite's as much as a server's), a database that does not exist (3D000),
// shutdowns, restarts, a dropped database and an idle session ended (57P01-57P05), a statement timeout
// (57014); and the driver's own timeouts (a server that does not answer).
const UNAVAILABLE_STATES = /^(08|28|53(?!400$)|58|3D000$|57P0[1-5]$|57014$)/;
const UNAVAILABLE_ERRNOS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'EAI_AGAIN']);

/**
 * A database error as Runnel reports it: `RUNNEL_ERR_DATABASE_UNAVAILABLE`
 * (503) when the database is unreachable or too slow, the error itself
 * otherwise (a bug, reported as internal).
 */
export function databaseError(error: unknown): unknown {
  if (isRunnelError(error)) return error;
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  const text = typeof message === 'string' ? message : '';
  // pgvector absent from the server (0A000 `extension "vector" is not available`; before Postgres 15, 58P01 `could
  // not open extension control file ".../vector.control"`; and its library gone under a database that has the
  // extension — a data volume moved to an image without pgvector — 58P01 `could not access file
  // "$libdir/vector"`, which class 58 below would call the database unavailable, a retry that never helps),
  // or not the user's to create (42501).
  const absent =
    (code === '0A000' && /extension "vector"/.test(text)) ||
    (typeof code === 'string' && code.startsWith('58') && /extension control file "[^"]*[\\/]vector\.control"|"\$libdir\/vector"|[\\/]vector\.(so|dylib|dll)"/.test(text));
  if (absent || (code === '42501' && /extension "vector"/.test(text))) {
    const why =
      absent
        ? 'the vector extension (pgvector) is not installed on the database server; install pgvector there (e.g. the postgresql-NN-pgvector package, or the pgvector/pgvector image)'
        : 'the database user may not create the vector extension (pgvector); have an administrator run CREATE EXTENSION vector once in this database';
    return new RunnelError('RUNNEL_ERR_VECTOR_EXTENSION_MISSING', `Postgres has no pgvector: ${why}`, { cause: error });
  }
  if (
    (typeof code === 'string' && (UNAVAILABLE_STATES.test(code) || UNAVAILABLE_ERRNOS.has(code))) ||
    /Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|Cannot use a pool after calling end/i.test(text)
  ) {
    return new RunnelError('RUNNEL_ERR_DATABASE_UNAVAILABLE', 'The database is unavailable', { cause: error });
  }
  return error;
}

async function reported<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    throw databaseError(error);
  }
}

/** A `pg` Pool as an executor; unreachable-database errors become `RUNNEL_ERR_DATABASE_UNAVAILABLE`. */
export function pgExecutor(pool: Pool): SqlExecutor {
  return {
    query: async <T>(sql: string, params: unknown[] = []) => ({ rows: (await reported(pool.query(sql, params))).rows as T[] }),
    exec: async (sql: string) => {
      await reported(pool.query(sql));
    },
    transaction: async <T>(fn: (tx: SqlQueryable) => Promise<T>): Promise<T> => {
      const client = await reported(pool.connect());
      let broken: Error | undefined;
      // A checked-out client has no pool listener: without one, a connection dropped mid-transaction
      // (Postgres stopped, a backend terminated) is an uncaught exception that ends the process.
      const onError = (error: Error): void => {
        broken = error;
      };
      client.on('error', onError);
      try {
        await reported(client.query('BEGIN'));
        const result = await fn({ query: async <R>(sql: string, params: unknown[] = []) => ({ rows: (await reported(client.query(sql, params))).rows as R[] }) });
        await reported(client.query('COMMIT'));
        return result;
      } catch (error) {
        const failure = databaseError(error);
        // (A statement timeout, 57014, leaves the connection answering: that one is rolled back as any error.)
        const stuck = isRunnelError(failure) && failure.code === 'RUNNEL_ERR_DATABASE_UNAVAILABLE' && (failure.cause as { code?: unknown } | undefined)?.code !== '57014';
        if (stuck) {
          // The connection is gone, or stuck on a query the server does not answer (a ROLLBACK would queue
          // behind it and wait out a timeout of its own): it is dropped, which ends the transaction.
          broken = error instanceof Error ? error : new Error(String(error));
          throw failure;
        }
        // A failed ROLLBACK means the connection itself is gone: it must not return to the pool.
        await client.query('ROLLBACK').catch((rollbackError: unknown) => {
          broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
        });
        throw error;
      } finally {
        client.off('error', onError);
        client.release(broken);
      }
    },
    close: () => pool.end(),
  };
}

/** A turn of the event loop: what the process has waiting (requests, timers) goes first. */
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * A PGlite database as an executor. PGlite runs each statement on this thread, synchronously, and settles it
 * in a microtask: statements awaited one after another never let the event loop turn, so a seed's or an
 * ingest's hundreds of them held a server for seconds (a trial: `/healthz` unanswered for 4 to 5 s of a
 * first start's seed, though no statement took 400 ms). Each statement, and each transaction, waits a turn of
 * the loop first.
 */
export function pgliteExecutor(db: PGlite): SqlExecutor {
  return {
    query: async <T>(sql: string, params: unknown[] = []) => {
      await turn();
      return { rows: (await reported(db.query<T>(sql, params))).rows };
    },
    exec: async (sql: string) => {
      await turn();
      await reported(db.exec(sql));
    },
    // A transaction waits its turn once, before it begins: inside, a turn would hold PGlite's lock (and every
    // other statement) through whatever else the loop had waiting. Its statements are few (an ingest's batch).
    transaction: <T>(fn: (tx: SqlQueryable) => Promise<T>): Promise<T> =>
      turn().then(() => reported(db.transaction((tx) => fn({ query: async <R>(sql: string, params: unknown[] = []) => ({ rows: (await tx.query<R>(sql, params)).rows }) })))),
    close: () => db.close(),
  };
}
