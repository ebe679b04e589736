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
import { buildApp, defineChain, lambda, type ChainSpec } from '../../src/index.js';
import { runChains } from '../support/run-server.js';

let app: FastifyInstance;
let port: number;
const sent: { url: string; status: number }[] = [];

beforeAll(async () => {
  // `/hang` answers only when its run is called off: a stream left running for nobody never ends.
  const hang = defineChain({ path: '/hang', runnable: lambda(() => new Promise<never>(() => undefined)) });
  app = await buildApp({ chains: [...runChains, hang] as ChainSpec<never, unknown>[], config: { workerConcurrency: 2 } });
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

/** Sends a GET (or a POST of `body`) whose client leaves as soon as it is sent. */
function leave(path: string, body?: string): void {
  const head = body === undefined ? `GET ${path} HTTP/1.1\r\n` : `POST ${path} HTTP/1.1\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n`;
  const socket = connect(port, '127.0.0.1', () => {
    socket.end(`${head}host: 127.0.0.1\r\nx-test-leave-first: 1\r\n\r\n${body ?? ''}`, () => socket.destroy());
  });
  socket.on('error', () => undefined);
}

/** Waits until `/metrics` shows `series` (a line of it, whole). */
async function metricShows(series: RegExp): Promise<void> {
  for (;;) {
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    if (series.test(metrics)) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('a client that leaves before the handler listens', () => {
  it('ends a /wait at once instead of polling until timeout_s', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/long/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { topic: 'gone' } }) });
    const { run_id: runId } = (await res.json()) as { run_id: string };
    leave(`/long/runs/${runId}/wait?timeout_s=300`);
    // Ended while the run is still under way, as a request whose client left: a 499 in /metrics (the review
    // after: it answered a 408 to nobody, counted as neither), and nothing sent.
    await metricShows(/^runnel_requests_total\{chain="\/long",endpoint="runs_wait",status="499"\} 1$/m);
    expect(sent.filter((s) => s.url.includes('/wait'))).toEqual([]);
    const record = (await (await fetch(`http://127.0.0.1:${port}/long/runs/${runId}`)).json()) as { status: string };
    expect(record.status).toBe('running');
  });

  it('calls off a live stream at once, and counts it as a client gone', async () => {
    // Its run never ends by itself: only hearing the close that came first ends it.
    leave('/hang/stream', JSON.stringify({ input: null }));
    await metricShows(/^runnel_requests_total\{chain="\/hang",endpoint="stream",status="499"\} 1$/m);
    expect(app.runnel.streams.size).toBe(0);
  });
});
