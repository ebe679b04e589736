/** `/healthz` (alive), `/readyz` (ready to take work; false while shutting down or a service is down), `/metrics`. */
import type { FastifyPluginAsync } from 'fastify';
import { clusterMetrics } from '../src/server/cluster.js';
import { RunnelError } from '../src/core/index.js';
import { errorBody } from '../src/server/http-errors.js';
import { metricsRefusal } from '../src/server/auth.js';

/**
 * How long `/readyz` waits for a check: a service that does not answer in time (a frozen database) is not
 * ready, and the probe gets its answer within a balancer's usual 1 s timeout.
 */
export const READY_CHECK_MS = 900;

export const healthRoutes: FastifyPluginAsync = async (app) => {
  // One run of each check at a time: probes arriving while a frozen service holds a check share its answer.
  const inFlight = new Map<string, Promise<boolean>>();
  const checked = (name: string, check: () => Promise<boolean>): Promise<boolean> => {
    let running = inFlight.get(name);
    if (running === undefined) {
      running = check().then(
        (ok) => ok === true,
        () => false,
      );
      inFlight.set(name, running);
      void running.finally(() => inFlight.delete(name));
    }
    const answer = running;
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), READY_CHECK_MS);
      void answer.then((ok) => {
        clearTimeout(timer);
        resolve(ok);
      });
    });
  };

  app.get('/healthz', { schema: { tags: ['operations'], summary: 'Alive', security: [], response: { 200: { type: 'object', properties: { status: { type: 'string' } } } } } }, async () => ({
    status: 'ok',
  }));

  app.get('/readyz', { schema: { tags: ['operations'], summary: 'Ready to take work', security: [] } }, async (_request, reply) => {
    const state = app.runnel;
    const names = [...state.readiness.keys()];
    const results = await Promise.all([...state.readiness].map(([name, check]) => checked(name, check)));
    const checks: Record<string, boolean> = {};
    names.forEach((name, i) => (checks[name] = results[i] as boolean));
    const ready = !state.shuttingDown && Object.values(checks).every(Boolean);
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : state.shuttingDown ? 'shutting down' : 'not ready', checks });
  });

  // With keys on, only the keys named in RUNNEL_METRICS_KEYS read the series: they add up every caller's
  // traffic (chains, models, tokens, errors), which one caller of a shared server has no business seeing.
  const { config } = app.runnel;
  app.get('/metrics', { schema: { tags: ['operations'], summary: 'Prometheus metrics' } }, async (request, reply) => {
    const { metrics } = app.runnel;
    const refusal = config.apiKeys.length > 0 ? metricsRefusal(config, request.identity) : undefined;
    if (refusal !== undefined) throw new RunnelError('RUNNEL_ERR_FORBIDDEN', refusal);
    // One of a cluster's processes (RUNNEL_PROCESSES): the whole server's series, whichever process answers —
    // or none, when a process did not hand its in: a failed scrape, not a sum that looks like a counter reset.
    const cluster = await clusterMetrics();
    if (cluster === 'incomplete') {
      return reply.code(503).send(errorBody(503, 'RUNNEL_ERR_METRICS_INCOMPLETE', 'A server process did not hand in its metrics in time'));
    }
    return reply.type(metrics.contentType).send(cluster ?? (await metrics.render()));
  });
};
