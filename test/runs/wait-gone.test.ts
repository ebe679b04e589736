/**
 * A probe: a `/wait` whose client left while the handler read the run (its first await) listened for the
 * connection's `close` only after it had fired, so the wait went on for nobody until `timeout_s` — polling
 * the store every second, holding its request (9 KB) and a watch. The same window left a live stream
 * running for a client already gone. A handler now hears a close that came before it listened.
 */
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type ChainSpec } from '../../src/index.js';
import { runChains } from '../support/run-server.js';

let app: FastifyInstance;
let port: number;
const sent: { url: string; status: number }[] = [];

beforeAll(async () => {
  app = await buildApp({ chains: runChains as ChainSpec<never, unknown>[], config: { workerConcurrency: 2 } });
  // The window a slow store makes: the handler starts only once its client has gone.
  app.addHook('preHandler', async (request) => {
    if (request.headers['x-test-leave-first'] === undefined) return;
    if (!request.raw.socket.destroyed) await new Promise((resolve) => request.raw.socket.once('close', resolve));
  });
  app.addHook('onSend', async (request, reply) => {
    sent.push({ url: request.url, status: reply.statusCode });
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  port = (app.server.address() as AddressInfo).port;
});
afterAll(async () => app.close());

/** Sends a GET whose client leaves as soon as it is sent. */
function leave(path: string): void {
  const socket = connect(port, '127.0.0.1', () => {
    socket.end(`GET ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nx-test-leave-first: 1\r\n\r\n`, () => socket.destroy());
  });
  socket.on('error', () => undefined);
}

describe('a client that leaves before the handler listens', () => {
  it('ends a /wait at once instead of polling until timeout_s', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/long/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { topic: 'gone' } }) });
    const { run_id: runId } = (await res.json()) as { run_id: string };
    leave(`/long/runs/${runId}/wait?timeout_s=300`);
    // Ended while the run is still under way, as a request whose client left: a 499 in /metrics (the review
    // after: it answered a 408 to nobody, counted as neither), and nothing sent.
    const waitsGone = /^runnel_requests_total\{chain="\/long",endpoint="runs_wait",status="499"\} 1$/m;
    for (;;) {
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      if (waitsGone.test(metrics)) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(sent.filter((s) => s.url.includes('/wait'))).toEqual([]);
    const record = (await (await fetch(`http://127.0.0.1:${port}/long/runs/${runId}`)).json()) as { status: string };
    expect(record.status).toBe('running');
  });
});
