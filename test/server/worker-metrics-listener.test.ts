/**
 * The listener of a worker's own `/metrics` (`RUNNEL_WORKER_METRICS_PORT`) on its own: where it binds and how
 * it treats keys, without Redis or a worker process (worker-metrics.test.ts runs the real `npm run worker`).
 */
import { connect as netConnect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { loadServerConfig } from '../../src/index.js';
import { Metrics } from '../../src/server/metrics.js';
import { serveWorkerMetrics } from '../../src/server/worker-metrics.js';

const closing: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const close of closing.splice(0)) await close();
});

/** A connection to 127.0.0.1:`port`, once it is open. */
function connect(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = netConnect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

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
    const served = await serveWorkerMetrics({ port: 0, metrics: new Metrics(), config: loadServerConfig({}) });
    closing.push(() => served.close());
    // Bound to 127.0.0.1 only, the port is free on another address; bound to every interface, it was taken there too.
    const other = await listenOn('127.0.0.2', served.port);
    closing.push(() => new Promise<void>((resolve) => other.close(() => resolve())));
    expect((await fetch(`http://127.0.0.1:${served.port}/metrics`)).status).toBe(200);
  });

  it("throttles failed keys as the server does (RUNNEL_AUTH_FAIL_LIMIT): a 403 would tell which guess is a key", async () => {
    const config = loadServerConfig({ RUNNEL_API_KEYS: 'ada:ada-key-0123456789abcdef,scraper:scraper-key-0123456789abcdef', RUNNEL_METRICS_KEYS: 'scraper', RUNNEL_AUTH_FAIL_LIMIT: '3' });
    const served = await serveWorkerMetrics({ port: 0, metrics: new Metrics(), config });
    closing.push(() => served.close());
    const scrape = (key?: string) => fetch(`http://127.0.0.1:${served.port}/metrics`, { headers: key === undefined ? {} : { authorization: `Bearer ${key}` } });
    // No key at all is not a guess.
    for (let i = 0; i < 5; i++) expect((await scrape()).status).toBe(401);
    for (let i = 0; i < 3; i++) expect((await scrape(`guess-${i}`)).status).toBe(401);
    // Past the limit, the address is refused, with a right key too.
    for (const key of ['ada-key-0123456789abcdef', 'scraper-key-0123456789abcdef']) {
      const refused = await scrape(key);
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(await refused.json()).toMatchObject({ code: 'RUNNEL_ERR_RATE_LIMITED' });
    }
  });

  it('does not throttle with the limit off', async () => {
    const config = loadServerConfig({ RUNNEL_API_KEYS: 'scraper:scraper-key-0123456789abcdef', RUNNEL_METRICS_KEYS: 'scraper', RUNNEL_AUTH_FAIL_LIMIT: '0' });
    const served = await serveWorkerMetrics({ port: 0, metrics: new Metrics(), config });
    closing.push(() => served.close());
    for (let i = 0; i < 25; i++) expect((await fetch(`http://127.0.0.1:${served.port}/metrics`, { headers: { authorization: `Bearer guess-${i}` } })).status).toBe(401);
    expect((await fetch(`http://127.0.0.1:${served.port}/metrics`, { headers: { authorization: 'Bearer scraper-key-0123456789abcdef' } })).status).toBe(200);
  });

  // A review: answers kept the connection open, and nothing bounded how many a client could hold.
  it('closes the connection after each answer, and holds at most 64 at once', async () => {
    const served = await serveWorkerMetrics({ port: 0, metrics: new Metrics(), config: loadServerConfig({}) });
    closing.push(() => served.close());
    const answer = await fetch(`http://127.0.0.1:${served.port}/metrics`);
    expect(answer.headers.get('connection')).toBe('close');
    await answer.text();
    // 64 connections that send nothing are held; the 65th is closed at once, unanswered.
    const idle = await Promise.all(Array.from({ length: 64 }, () => connect(served.port)));
    closing.push(async () => void idle.forEach((socket) => socket.destroy()));
    const extra = await connect(served.port);
    await new Promise<void>((resolve) => extra.once('close', () => resolve()));
    expect(extra.destroyed).toBe(true);
    expect(idle.every((socket) => !socket.destroyed)).toBe(true);
  });
});
