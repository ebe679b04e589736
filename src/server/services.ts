/**
 * The services a server uses: Redis (`REDIS_URL`) for chat history and the
 * response cache, Postgres with pgvector (`DATABASE_URL`) for vectors — or,
 * when they are not configured, the embedded defaults: histories in memory,
 * vectors in PGlite under `RUNNEL_DATA_DIR`. Connections are bounded (Redis
 * commands time out and are never queued offline; the pg pool has an error
 * handler, a statement timeout and a connection timeout), appear in
 * `/readyz`, and close on shutdown.
 */
import type { Redis } from 'ioredis';
import pg from 'pg';
import { createRedisClient, DEFAULT_CACHE_TTL_SECONDS, RedisCache } from '../cache/index.js';
import { connectRefusal } from '../cache/redis-client.js';
import { RunnelError } from '../core/index.js';
import { InMemoryCache, type ModelCache } from '../models/index.js';
import { MemoryHistoryStore, RedisChatMessageHistory, type ChatMessageHistory } from '../history/index.js';
import { pgExecutor, pgliteExecutor, processWarn, type SqlExecutor, type StoreWarn } from '../vectorstores/index.js';
import { lockDataDir, makeDirectory, type DataDirLock } from './data-dir-lock.js';
import { makeDatabase } from './pglite-init.js';

/** Where the services are, from the environment. */
export interface ServicesConfig {
  redisUrl?: string | undefined;
  databaseUrl?: string | undefined;
  /** Where PGlite keeps its files without DATABASE_URL (default `./.runnel`). */
  dataDir?: string | undefined;
  /** Redis command timeout, ms (default 500). */
  redisCommandTimeoutMs?: number;
  /** Ms a Redis connection may answer nothing while commands wait before it is closed (default 10,000). */
  redisStallTimeoutMs?: number;
  /** Postgres statement timeout, ms (default 5,000). */
  statementTimeoutMs?: number;
  /**
   * The deployment's Redis prefix (`RUNNEL_RUN_NAMESPACE`, default `runnel`): histories are kept under
   * `{namespace}:history`, the response cache under `{namespace}:cache`, as runs are under `{namespace}:runs`.
   * Deployments that share a Redis and have API keys of the same names keep their callers apart by it.
   */
  namespace?: string;
  /** The Redis key prefix of the response cache (default `{namespace}:cache`). */
  cacheNamespace?: string;
  /** PGlite's `shared_buffers` (default `16MB`; Postgres's own default is 128MB, all of it resident). */
  embeddedSharedBuffers?: string;
  /** What this process is, as the data directory's lock tells others (default `server`). */
  role?: string;
}

/** The connected services. */
export interface Services {
  redis: Redis | undefined;
  /**
   * The Redis prefix of histories and the cache (`ServicesConfig.namespace`). `buildApp` refuses services on
   * Redis whose namespace is not its `runNamespace`: the deployment's runs would be under one prefix and its
   * conversations under another, shared with every deployment that left it out. Services of your own may leave
   * it out, and are then not checked.
   */
  namespace?: string;
  /** The conversation of one caller's session: Redis when configured, else memory. */
  history(identity: string, sessionId: string): ChatMessageHistory;
  /** The SQL executor for vectors: Postgres when configured, else PGlite (opened on first use). */
  sql(): Promise<SqlExecutor>;
  /**
   * A response cache for chat models: Redis when configured (fails open),
   * else in memory. Every lookup is reported to `onCacheLookup`. A
   * `namespace` keeps a chain's entries apart from the other chains' inside
   * the deployment's cache (`{RUNNEL_RUN_NAMESPACE}:cache:{namespace}:…`).
   */
  modelCache(options?: { namespace?: string; ttlSeconds?: number }): ModelCache;
  /** Receives each cache lookup's result; `buildApp` points it at `/metrics`. */
  onCacheLookup: (result: 'hit' | 'miss' | 'error') => void;
  /**
   * Where a vector store opened on these services reports a stored row it skipped or repaired (`stored record
   * not valid`): a process warning on stderr until `buildApp` (or the worker) points it at its log.
   */
  onStoreWarning: StoreWarn;
  /** Readiness checks by name, for `/readyz`. */
  checks: Map<string, () => Promise<boolean>>;
  close(): Promise<void>;
}

/**
 * Connects what `config` names, and prepares the embedded defaults for the rest.
 *
 * @example
 * const services = await connectServices({ redisUrl: process.env.REDIS_URL, databaseUrl: process.env.DATABASE_URL });
 */
export async function connectServices(config: ServicesConfig): Promise<Services> {
  const checks = new Map<string, () => Promise<boolean>>();
  const namespace = config.namespace ?? 'runnel';
  let redis: Redis | undefined;
  if (config.redisUrl) {
    redis = createRedisClient(config.redisUrl, { commandTimeoutMs: config.redisCommandTimeoutMs ?? 500, stallTimeoutMs: config.redisStallTimeoutMs ?? 10_000 });
    // Start even when Redis is down: features that need it answer 503 until it is back.
    await redis.connect().catch(() => undefined);
    // A database this Redis does not have (SELECT refused): ioredis would go on in database 0, mixing this
    // deployment's keys with whatever is there — a wrong setting, refused at start.
    const refused = connectRefusal(redis);
    if (refused !== undefined) {
      redis.disconnect();
      // Its SELECT also fails when the password is wrong (NOAUTH, WRONGPASS): then that is what to fix.
      throw new RunnelError(
        'RUNNEL_ERR_INVALID_ARGUMENT',
        /^(NOAUTH|WRONGPASS)\b/.test(refused)
          ? `Redis refused the credentials of REDIS_URL (${refused})`
          : `REDIS_URL names a database this Redis does not have (${refused}); see its "databases" setting`,
      );
    }
    const client = redis;
    checks.set('redis', async () => (await client.ping().catch(() => '')) === 'PONG');
  }
  const memory = new MemoryHistoryStore();
  const memoryCache = new InMemoryCache();

  let pool: pg.Pool | undefined;
  let executor: Promise<SqlExecutor> | undefined;
  let lock: DataDirLock | undefined;
  /** The embedded database being made on a worker thread, while it is. */
  let making: ReturnType<typeof makeDatabase> | undefined;
  let closed = false;
  if (config.databaseUrl) {
    const statementTimeoutMs = config.statementTimeoutMs ?? 5_000;
    pool = new pg.Pool({
      connectionString: config.databaseUrl,
      max: 10,
      connectionTimeoutMillis: 2_000,
      idleTimeoutMillis: 30_000,
      statement_timeout: statementTimeoutMs,
      // Postgres enforces statement_timeout itself, so a frozen server (or a partition) would hold a query on
      // an open connection for good: the client gives up a second later, and the connection is dropped.
      query_timeout: statementTimeoutMs + 1_000,
      // An idle connection to a peer that went away is found by TCP keepalive, not at its next query.
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
    });
    // Without this, a terminated idle connection would kill the process.
    pool.on('error', () => {});
    const connected = pool;
    executor = Promise.resolve(pgExecutor(connected));
    checks.set('postgres', async () => {
      try {
        await connected.query('SELECT 1');
        return true;
      } catch {
        return false;
      }
    });
  }

  const services: Services = {
    redis,
    namespace,
    onCacheLookup: () => {},
    onStoreWarning: processWarn,
    modelCache: (options = {}) => {
      const report = (result: 'hit' | 'miss' | 'error'): void => services.onCacheLookup(result);
      // A chain's own namespace is a part of the deployment's cache, never beside it: two deployments sharing a
      // Redis (RUNNEL_RUN_NAMESPACE) must not answer each other's prompts from one cache.
      const cacheNamespace = config.cacheNamespace ?? `${namespace}:cache`;
      if (redis !== undefined) {
        return new RedisCache({
          client: redis,
          ttlSeconds: options.ttlSeconds,
          namespace: options.namespace === undefined ? cacheNamespace : `${cacheNamespace}:${options.namespace}`,
          onLookup: report,
        });
      }
      // One store for every chain's model, bounded as a whole (one each let every chain hold its own 64 MiB);
      // a chain's namespace keeps its entries apart, as it does in Redis.
      const prefix = options.namespace === undefined ? '' : `${options.namespace}:`;
      return {
        lookup: async (key) => {
          const hit = await memoryCache.lookup(`${prefix}${key}`);
          report(hit === undefined ? 'miss' : 'hit');
          return hit;
        },
        // As long as a Redis entry lives: the chain's own TTL, else the same day.
        update: (key, chunks) => memoryCache.update(`${prefix}${key}`, chunks, options.ttlSeconds ?? DEFAULT_CACHE_TTL_SECONDS),
      };
    },
    history: (identity, sessionId) =>
      redis === undefined
        ? memory.history(`${identity}:${sessionId}`)
        : new RedisChatMessageHistory({ client: redis, namespace: `${namespace}:history`, sessionId: `${identity}:${sessionId}` }),
    sql: () => {
      if (executor !== undefined) return executor;
      const opening = (async () => {
        const [{ PGlite }, { vector }] = await Promise.all([import('@electric-sql/pglite'), import('@electric-sql/pglite-pgvector')]);
        const dir = config.dataDir ?? './.runnel';
        makeDirectory(dir);
        // One process per data directory: PGlite does not share its files (see data-dir-lock.ts).
        lock = lockDataDir(dir, config.role ?? 'server');
        try {
          // Postgres's default 128 MB of shared buffers sits inside PGlite's WebAssembly memory for the life of
          // the process (~150 MB of RSS); an embedded, single-user database reads through the OS page cache anyway.
          const conf = [`shared_buffers=${config.embeddedSharedBuffers ?? '16MB'}`];
          if (closed) throw new RunnelError('RUNNEL_ERR_SHUTTING_DOWN', 'The server is closing');
          // A new database is made on a worker thread (its initdb would hold this one for seconds), then opened.
          making = makeDatabase(`${dir}/pgdata`, conf);
          await making.made;
          making = undefined;
          if (closed) throw new RunnelError('RUNNEL_ERR_SHUTTING_DOWN', 'The server is closing');
          const db = await PGlite.create(`${dir}/pgdata`, { extensions: { vector }, postgresqlconf: conf });
          await db.exec('CREATE EXTENSION IF NOT EXISTS vector');
          return pgliteExecutor(db);
        } catch (error) {
          lock.release();
          // Closed while the database was being made: said as the close it is, not as the making's failure.
          if (closed) throw new RunnelError('RUNNEL_ERR_SHUTTING_DOWN', 'The server is closing');
          throw error;
        }
      })();
      // A failure (the directory is locked by another process) is not kept: the next call tries again.
      opening.catch(() => {
        if (executor === opening) executor = undefined;
      });
      return (executor = opening);
    },
    checks,
    close: async () => {
      closed = true;
      redis?.disconnect();
      // A database being made is not waited for (seconds of initdb): its worker is ended, its files removed.
      making?.stop();
      if (executor !== undefined) await executor.then((opened) => opened.close()).catch(() => undefined);
      lock?.release();
    },
  };
  return services;
}
