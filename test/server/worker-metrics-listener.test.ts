/**
 * The listener of a worker's own `/metrics` (`RUNNEL_WORKER_METRICS_PORT`) on its own: where it binds and how
 * it treats keys, without Redis or a worker process (worker-metrics.test.ts runs the real `npm run worker`).
 */
import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { loadServerConfig } from '../../src/index.js';
import { Metrics } from '../../src/server/metrics.js';
import { serveWorkerMetrics } from '../../src/server/worker-metrics.js';

const PORT = 19641;
const closing: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const close of closing.splice(0)) await close();
});

/** Listens on `host`:`port`, or rejects with the listen error. */
async function listenOn(host: string, port: number): Promise<Server> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}

describe("a worker's /metrics listener", () => {
  it('binds where HOST says, loopback by default as the server does, not every interface', async () => {
    const served = await serveWorkerMetrics({ port: PORT, metrics: new Metrics(), config: loadServerConfig({}) });
    closing.push(() => served.close());
    // Bound to 127.0.0.1 only, the port is free on another address; bound to every interface, it was taken there too.
    const other = await listenOn('127.0.0.2', PORT);
    closing.push(() => new Promise<void>((resolve) => other.close(() => resolve())));
    expect((await fetch(`http://127.0.0.1:${PORT}/metrics`)).status).toBe(200);
  });
});
