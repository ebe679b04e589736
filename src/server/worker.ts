/**
 * `npm run worker`: executes the shipped chains' background runs from the
 * queue in Redis (`REDIS_URL`), with no HTTP server — run as many as the
 * load needs, apart from the HTTP replicas (docker compose's `worker`).
 */
import { pino } from 'pino';
import { createChains } from '../../chains/index.js';
import { isRunnelError } from '../core/index.js';
import { setProviderLogger } from '../models/index.js';
import { loadServerConfig } from './config.js';
import { logConsoleWarnings } from './log-options.js';
import { dataDirProblem } from './data-dir-lock.js';
import { providerKeyWarning, unknownSettings } from './startup-warnings.js';
import { redactUrlCredentials } from '../observability/index.js';
import { connectServices } from './services.js';
import { shutdownDeadlineMs } from './signals.js';
import { Metrics } from './metrics.js';
import { modelMeter } from './usage.js';
import { serveWorkerMetrics } from './worker-metrics.js';
import { startRunWorkers, stopWorkersOnSignals } from './worker-process.js';

try {
  // RUNNEL_PROCESSES is the HTTP server's (said below, not checked here: a worker without DATABASE_URL was
  // stopped by the server's rule that many processes need Postgres).
  const { RUNNEL_PROCESSES: processes, ...env } = process.env;
  const config = loadServerConfig(env);
  // The server's log lines (pino's JSON, LOG_LEVEL honoured); of an error, its message only.
  const logger = pino({ level: config.logLevel });
  setProviderLogger(logger);
  logConsoleWarnings(logger);
  const log = {
    info: (message: string) => logger.info(message),
    error: (message: string, error?: unknown) => logger.error({ err: error instanceof Error ? redactUrlCredentials(error.message) : undefined }, message),
    warn: (fields: Record<string, unknown>, message: string) => logger.warn(fields, message),
  };
  if (config.redisUrl === undefined) throw new Error('runnel worker: REDIS_URL is required (the run queue lives in Redis)');
  // 0 is an HTTP-only server's setting (no workers in it); a worker process with none would run nothing.
  if (config.workerConcurrency < 1) throw new Error('runnel worker: RUNNEL_WORKER_CONCURRENCY must be at least 1 in a worker process (0 is for a server without workers)');
  // Its chains' embedded database (no DATABASE_URL): a folder it cannot use is a wrong setting, as for the server.
  const dataDir = config.databaseUrl === undefined ? dataDirProblem(config.dataDir) : undefined;
  if (dataDir !== undefined) throw new Error(`runnel worker: ${dataDir}`);
  const services = await connectServices({ redisUrl: config.redisUrl, databaseUrl: config.databaseUrl, dataDir: config.dataDir, namespace: config.runNamespace, role: 'worker' });
  if (services.redis?.status !== 'ready') logger.warn('runnel worker: Redis is not reachable (REDIS_URL); runs are taken once it is');
  for (const line of unknownSettings(process.env)) logger.warn(`runnel worker: ${line}`);
  // A provider chosen without its key: every run this worker takes would end in the provider's refusal.
  const keyless = providerKeyWarning(env);
  if (keyless !== undefined) logger.warn(`runnel worker: ${keyless}`);
  if (processes !== undefined && processes.trim() !== '' && processes.trim() !== '1') logger.warn('runnel worker: RUNNEL_PROCESSES is for the HTTP server; a worker runs RUNNEL_WORKER_CONCURRENCY runs at once in one process (start more workers for more)');
  services.onStoreWarning = log.warn;
  const { chains } = createChains({ services });
  // Its own /metrics when asked for (a server's cannot see the runs a worker executes), listening before any
  // run is taken: a port that is taken stops the start.
  const metrics = config.workerMetricsPort > 0 ? new Metrics() : undefined;
  const served =
    metrics === undefined
      ? undefined
      : await serveWorkerMetrics({ port: config.workerMetricsPort, metrics, config }).catch((error: unknown) => {
          throw new Error(`runnel worker: RUNNEL_WORKER_METRICS_PORT ${config.workerMetricsPort}: ${error instanceof Error ? error.message : String(error)}`);
        });
  // Its runs' response-cache lookups too, as a server counts its own.
  if (metrics !== undefined) services.onCacheLookup = (result) => metrics.cache.inc({ result });
  const worker = startRunWorkers({ config, chains, services, log, ...(metrics === undefined ? {} : { meter: (path: string) => modelMeter(metrics, path) }) });
  const stop = async (): Promise<void> => {
    await worker.stop();
    await served?.close();
  };
  stopWorkersOnSignals({ stop }, shutdownDeadlineMs(config.shutdownGraceMs), log);
  if (served !== undefined) log.info(`runnel worker: /metrics on port ${served.port}`);
  // Without the server's database, a worker's chains read an embedded one of its own, which holds none of
  // what was ingested for the server (/rag finds nothing).
  if (config.databaseUrl === undefined) {
    // (A probe: in the server's own data directory, "of their own" misled — that one is the server's, locked.)
    logger.warn(
      `runnel worker: no DATABASE_URL, so its chains use the embedded database in ${config.dataDir}: a server using that directory holds it locked (their runs that search fail RUNNEL_ERR_DATABASE_UNAVAILABLE), and another holds none of the server's documents. Give the worker the server's DATABASE_URL`,
    );
  }
  // Said once SIGTERM is handled: whoever waits for this line to stop the worker finds it draining, not killed.
  log.info(`runnel worker: ${config.workerConcurrency} runs at a time, chains ${chains.map((chain) => chain.path).join(', ')}`);
} catch (error) {
  console.error(isRunnelError(error) || error instanceof Error ? error.message : error);
  process.exit(1);
}
