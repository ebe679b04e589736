/**
 * `npm start`: reads the configuration from the environment, builds the app
 * with the chains of `chains/index.ts`, listens, and shuts down gracefully on
 * SIGTERM and SIGINT (readiness off while still listening, streams finish or
 * get a final frame after the grace, exit by the grace plus 5 s).
 */
import { isIPv6 } from 'node:net';
import { pino } from 'pino';
import { createChains } from '../../chains/index.js';
import { isRunnelError } from '../core/index.js';
import { chatModelFromEnv, setProviderLogger } from '../models/index.js';
import { buildApp } from './app.js';
import { loadServerConfig, type ServerConfig } from './config.js';
import { serviceFailure } from './error-reply.js';
import { logConsoleWarnings, serverLoggerOptions } from './log-options.js';
import { connectServices } from './services.js';
import { dataDirProblem } from './data-dir-lock.js';
import { offerClusterMetrics, serveOnProcesses } from './cluster.js';
import { exitOnSignals, shutdownDeadlineMs } from './signals.js';
import { startupWarnings } from './startup-warnings.js';

async function main(): Promise<void> {
  let config;
  try {
    config = loadServerConfig(process.env);
  } catch (error) {
    console.error(isRunnelError(error) ? error.message : error);
    process.exit(1);
  }
  // RUNNEL_PROCESSES > 1: this process forks the servers (one per core) and looks after them; each runs serve().
  // The supervisor's lines are the servers' JSON lines too (one log stream for an operator's collector).
  const logger = pino(serverLoggerOptions(config.logLevel));
  await serveOnProcesses(
    { count: config.processes, deadlineMs: shutdownDeadlineMs(config.shutdownGraceMs), log: (level, line) => logger[level](line) },
    () => serve(config, logger),
  );
}

async function serve(config: ServerConfig, logger: { warn(message: string): void }): Promise<void> {
  // The embedded database's folder, checked before anything listens: one it cannot use is a wrong setting.
  const dataDir = config.databaseUrl === undefined ? dataDirProblem(config.dataDir) : undefined;
  if (dataDir !== undefined) {
    console.error(`runnel: ${dataDir}`);
    process.exit(1);
  }
  logConsoleWarnings(logger);
  const services = await connectServices({ redisUrl: config.redisUrl, databaseUrl: config.databaseUrl, dataDir: config.dataDir, namespace: config.runNamespace });
  const { chains, docs } = createChains({ services, seedDocs: config.seedDocs });
  services.checks.set('docs', async () => docs.ready);
  const app = await buildApp({
    chains,
    config,
    services,
    // This process's run workers start with it: runs submitted on any replica find them, and dead workers' runs are ended.
    runWorkers: 'start',
    logger: serverLoggerOptions(config.logLevel),
  });
  // What the provider SDKs log (a frame they cannot parse, a retry) goes into the server's JSON lines.
  setProviderLogger(app.log);
  // In a cluster, the first process reads this process's series for a scrape on any process.
  offerClusterMetrics(() => app.runnel.metrics.values());
  // A deep accept queue: a burst of connections (1,000 streams opening at once) must not wait for SYN retries.
  try {
    await app.listen({ port: config.port, host: config.host, backlog: 4096 });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reasons: Record<string, string> = {
      EADDRINUSE: 'is in use',
      EACCES: 'needs privileges this process lacks',
      EADDRNOTAVAIL: 'is not an address of this machine',
      ENOTFOUND: 'is not a name this machine can resolve',
      EAI_AGAIN: 'could not be resolved (DNS did not answer)',
    };
    const why = code === undefined ? undefined : reasons[code];
    if (why === undefined) throw error;
    const what = code === 'EADDRINUSE' || code === 'EACCES' ? `port ${config.port} ${why} (set PORT)` : `host ${config.host} ${why} (set HOST)`;
    console.error(`runnel: cannot listen: ${what}`);
    await app.close().catch(() => undefined);
    process.exit(1);
  }
  // The URLs the log gives: a wildcard host as this machine's loopback, an IPv6 address in brackets (HOST=::
  // gave http://:::8000/, which no client reads).
  const shown = config.host === '0.0.0.0' ? '127.0.0.1' : config.host === '::' ? '::1' : config.host;
  const base = `http://${isIPv6(shown) ? `[${shown}]` : shown}:${(app.server.address() as { port: number }).port}`;
  chatModelFromEnv({ log: (line) => app.log.info(line) });
  app.log.info(`docs: ${base}/docs  openapi: ${base}/openapi.json`);
  app.log.info(
    `history: ${config.redisUrl ? 'Redis' : 'in memory (set REDIS_URL for Redis)'}; ` +
      `background runs: ${config.redisUrl ? `BullMQ on Redis, ${config.workerConcurrency === 0 ? 'none in this process (npm run worker processes run them)' : `${config.workerConcurrency} at a time in this process`}` : `in this process, ${Math.max(1, config.workerConcurrency)} at a time (set REDIS_URL for a queue every replica and worker shares)`}; ` +
      `vectors: ${config.databaseUrl ? 'Postgres' : `PGlite in ${config.dataDir} (set DATABASE_URL for Postgres)`}`,
  );
  app.log.info(`index: ${base}/`);
  for (const chain of app.runnel.chains) {
    const playground = app.hasRoute({ method: 'GET', url: `${chain.spec.path}/playground/` }) ? `  playground: ${base}${chain.spec.path}/playground/` : '';
    app.log.info(`chain ${chain.spec.path}: ${base}${chain.spec.path}/invoke${playground}`);
  }
  for (const line of startupWarnings(config, process.env)) app.log.warn(line);
  if (services.redis !== undefined && services.redis.status !== 'ready') {
    app.log.warn('redis: not reachable at start (REDIS_URL): chat history and runs answer 503 and the cache is skipped until it is; /readyz says not ready');
  }
  if (config.apiKeys.length > 0) app.log.info(`API keys: on, ${config.apiKeys.length} (${config.apiKeys.map((k) => k.name).join(', ')})`);

  // The docs collection of /rag and /agent fills itself on first start, and /readyz says not ready until it
  // has (a balancer sends no traffic to a replica whose /rag would find nothing). While the database is
  // unreachable (or lacks pgvector), seeding is retried (5 s, doubling to 5 min) — /rag answers 503 until then.
  docs.seedInBackground({
    seeded: (result) => {
      if (result === undefined) app.log.info(`docs collection: ready${config.seedDocs ? '' : " (without Runnel's own docs: RUNNEL_SEED_DOCS=false)"}`);
      else if (!config.seedDocs) app.log.info(`docs collection: Runnel's own docs removed (RUNNEL_SEED_DOCS=false): ${result.removed} chunks; yours are kept`);
      else app.log.info(`docs collection: seeded from README.md and docs/ (${result.added} chunks added, ${result.updated} updated, ${result.removed} stale removed, ${result.failed.length} failed)`);
    },
    failed: (error, retryInMs) => {
      // The driver's kind of failure as well (an SQLSTATE: 3D000, a database that does not exist; 28P01,
      // credentials refused; or ECONNREFUSED…), as a request's `service unavailable` line gives it.
      app.log.warn(
        serviceFailure(error) ?? { code: isRunnelError(error) ? error.code : undefined },
        `docs collection: not seeded (${error instanceof Error ? error.message : String(error)}); retrying in ${Math.round(retryInMs / 1000)} s`,
      );
    },
  });

  exitOnSignals(app);
}

try {
  await main();
} catch (error) {
  // A setting found wrong while starting (RUNNEL_MODEL, a chain's registration): one line, not a stack.
  if (!isRunnelError(error, 'RUNNEL_ERR_INVALID_ARGUMENT')) throw error;
  console.error(`runnel: ${error.message}`);
  process.exit(1);
}
