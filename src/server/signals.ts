/**
 * What the process does on SIGTERM and SIGINT: `app.shutdown()` (readiness
 * off, in-flight requests finish, open streams get the grace period and
 * then a final frame), then exit — and exit anyway after 10 s.
 */
import type { FastifyInstance } from 'fastify';

const HARD_DEADLINE_MS = 10_000;

export function exitOnSignals(app: FastifyInstance): void {
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    app.log.info(`${signal}: shutting down`);
    setTimeout(() => {
      app.log.error('shutdown took too long; exiting');
      process.exit(1);
    }, HARD_DEADLINE_MS).unref();
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
