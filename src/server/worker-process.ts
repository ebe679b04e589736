/**
 * A process that only executes background runs: no HTTP, workers on the
 * BullMQ queue in Redis (scaled apart from the HTTP replicas). SIGTERM and
 * SIGINT stop it taking runs; runs under way get the shutdown grace, then end
 * `RUNNEL_ERR_SHUTTING_DOWN`; runs still waiting stay queued for the others.
 */
import { RunnelError } from '../core/index.js';
import { Tracing } from '../observability/index.js';
import type { RunMeter, RunQueue } from '../runs/index.js';
import { createRunQueue, packageVersion } from './app.js';
import type { ServerConfig } from './config.js';
import type { ChainSpec } from './registry.js';
import type { Services } from './services.js';

/**
 * Starts the workers; resolves with a `stop()` that drains them.
 *
 * @example
 * const worker = startRunWorkers({ config, chains, services, log: console });
 */
export function startRunWorkers(options: {
  config: ServerConfig;
  chains: readonly ChainSpec<never, unknown>[];
  services: Services;
  log: { info(message: string): void; error(message: string, error?: unknown): void; warn?(fields: Record<string, unknown>, message: string): void };
  /** Counts the runs' model calls and tokens (the worker's own `/metrics`, when it serves one). */
  meter?: (chain: string) => RunMeter;
}): { queue: RunQueue; stop(): Promise<void> } {
  const { config, services, log } = options;
  if (services.redis === undefined) {
    throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'runnel worker: REDIS_URL is required (the run queue lives in Redis)');
  }
  // Runs continue the traces of the requests that submitted them, when tracing is on.
  const tracing = config.tracing === undefined ? undefined : new Tracing(config.tracing, { version: packageVersion() });
  // An export the collector did not take is said in the log, as a server says it (a probe: a worker dropped
  // every span of a wrong endpoint without a word), whether or not the worker serves /metrics.
  tracing?.warnOnDroppedSpans((fields, message) => log.warn?.(fields, message));
  const queue = createRunQueue({
    config: { ...config, workerConcurrency: Math.max(1, config.workerConcurrency) },
    chains: options.chains,
    redis: services.redis,
    tracing,
    log: (error, message) => log.error(message, error),
    warn: (fields, message) => log.warn?.(fields, message),
    meter: options.meter,
  });
  let stopping: Promise<void> | undefined;
  return {
    queue,
    stop: () =>
      (stopping ??= (async () => {
        await queue.close(config.shutdownGraceMs);
        await tracing?.shutdown();
        await services.close();
      })()),
  };
}

/**
 * Stops the workers on SIGTERM or SIGINT, then exits (1 after the hard deadline). A second signal while
 * stopping is ignored, as the server ignores it: Ctrl-C on `npm run worker` sends SIGINT twice (the
 * terminal's and npm's forward), and with a one-time handler the second one killed the worker at once,
 * its runs left `running` until the sweep ended them lost.
 */
export function stopWorkersOnSignals(worker: { stop(): Promise<void> }, hardDeadlineMs: number, log: { info(message: string): void }): void {
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info(`${signal}: stopping the worker`);
    setTimeout(() => process.exit(1), hardDeadlineMs).unref();
    worker.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}
