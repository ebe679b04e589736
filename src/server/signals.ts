/**
 * What the process does on SIGTERM and SIGINT: `app.shutdown()` (readiness
 * off while still listening, open streams get the grace period and then a
 * final frame, in-flight requests finish), then exit — and exit 1 anyway at
 * the hard deadline, the grace plus a bounded margin.
 */
import type { FastifyInstance } from 'fastify';

/** Time after the grace for the final frames, in-flight requests and closing the services. */
const SHUTDOWN_MARGIN_MS = 5_000;

/**
 * When the process exits 1 if shutdown has not finished: after the configured
 * grace (`RUNNEL_SHUTDOWN_GRACE_MS`) and a bounded margin, so the grace is
 * always honoured, however long.
 *
 * @example
 * shutdownDeadlineMs(15_000); // 20_000
 */
export function shutdownDeadlineMs(shutdownGraceMs: number): number {
  return shutdownGraceMs + SHUTDOWN_MARGIN_MS;
}

/**
 * Shuts `app` down on SIGTERM and SIGINT and exits: 0 when shutdown finished,
 * 1 when it failed or missed {@link shutdownDeadlineMs}.
 *
 * @example
 * await app.listen({ port: 8000 });
 * exitOnSignals(app);
 */
export function exitOnSignals(app: FastifyInstance): void {
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    app.log.info(`${signal}: shutting down`);
    const deadline = shutdownDeadlineMs(app.runnel.config.shutdownGraceMs);
    setTimeout(() => {
      app.log.error(`shutdown took longer than ${deadline} ms; exiting`);
      process.exit(1);
    }, deadline).unref();
    app.shutdown().then(
      () => process.exit(0),
      (error: unknown) => {
        app.log.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}
