/**
 * A probe: a client that went away while `/invoke`, `/batch` or `/v1/chat/completions` waited for its run
 * was counted twice on the dashboard's "errors by code" panel — as a 499 in `runnel_requests_total`, and as
 * `RUNNEL_ERR_ABORTED` in `runnel_errors_total`, an error answer nobody received — where a stream whose
 * client went away counts as a 499 alone. `runnel_errors_total` counts error answers.
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, defineChain, lambda, type ChainSpec } from '../../src/index.js';

/** Entered: the run has started; it then waits for its cancellation, and fails with it. */
let entered: () => void = () => undefined;
const waiting = lambda(
  (_input: unknown, config) =>
    new Promise<string>((_resolve, reject) => {
      config.signal?.addEventListener('abort', () => reject(config.signal?.reason));
      entered();
    }),
);
const hang = defineChain({ path: '/hang', runnable: waiting, messages: { toInput: () => ({ input: 'x' }) } });

let app: FastifyInstance;
let url: string;
beforeAll(async () => {
  app = await buildApp({ chains: [hang] as ChainSpec<never, unknown>[] });
  await app.listen({ port: 0, host: '127.0.0.1' });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});
afterAll(async () => app.close());

/** Posts `body` to `path`, and leaves once the run has started. */
async function leave(path: string, body: unknown): Promise<void> {
  const reached = new Promise<void>((resolve) => (entered = resolve));
  const gone = new AbortController();
  const request = fetch(`${url}${path}`, { method: 'POST', signal: gone.signal, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }).then(
    async (res) => void (await res.text()),
    () => undefined,
  );
  await reached;
  gone.abort();
  await request;
}

/** `/metrics`, once it shows `series` (a line of it, whole). */
async function metricsShowing(series: RegExp): Promise<string> {
  for (;;) {
    const metrics = await (await fetch(`${url}/metrics`)).text();
    if (series.test(metrics)) return metrics;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('a client that goes away while its answer is awaited', () => {
  it.each([
    ['/hang/invoke', 'invoke', { input: 1 }],
    ['/hang/batch', 'batch', { inputs: [1, 2] }],
    ['/v1/chat/completions', 'chat_completions', { model: 'hang', messages: [{ role: 'user', content: 'hi' }] }],
  ])('%s counts as a 499, and as no error answer', async (path, endpoint, body) => {
    await leave(path, body);
    const metrics = await metricsShowing(new RegExp(`^runnel_requests_total\\{chain="/hang",endpoint="${endpoint}",status="499"\\} 1$`, 'm'));
    expect(metrics).not.toMatch(/^runnel_errors_total\{/m);
    // Once more, a round trip later: the request's error handler, had it counted the error, has run by then.
    expect(await (await fetch(`${url}/metrics`)).text()).not.toMatch(/^runnel_errors_total\{/m);
  });
});
