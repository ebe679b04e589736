/**
 * Stop before the run's id has arrived. A durable run goes on when its connection goes, so the page has to
 * learn the id (the stream's first frame) to cancel it. A probe (with Redis, whose runs take a moment to be
 * stored before the stream opens): Stop cut the connection still waiting for its answer, the id never came,
 * nothing was cancelled, and the page said "Stopped" while the run went on to its end on the server.
 */
import type { FastifyInstance } from 'fastify';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { buildApp, defineChain, lambda } from '../../src/index.js';
import { openWatched, proxyTo, serveToBrowser } from './browser.js';

/** Says `w0`, then waits until the run is cancelled. */
async function* oneWordThenWait(signal: AbortSignal | undefined): AsyncGenerator<string> {
  yield 'w0';
  await new Promise<void>((resolve) => signal?.addEventListener('abort', () => resolve(), { once: true }));
}

const chains = [
  defineChain({ path: '/waits', description: 'Says one word, then waits to be cancelled', runnable: lambda((_input: { topic: string }, config) => oneWordThenWait(config.signal), { input: z.object({ topic: z.string() }) }) }),
];

let app: FastifyInstance;
let browser: Browser;
let base = '';
let proxy: Awaited<ReturnType<typeof proxyTo>> | undefined;
let proxied = '';
/** Sends on the held answer of the run's stream. */
let release: (() => void) | undefined;
let held: Promise<void> = Promise.resolve();

beforeAll(async () => {
  app = await buildApp({ chains: chains as never });
  ({ base, browser } = await serveToBrowser(app));
  // A proxy that holds the answer of a run's stream (the run has started on the server) until the test lets it go.
  proxy = await proxyTo(base, (req, res, answer, upstream) => {
    const send = (): void => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    };
    if (req.method === 'POST' && req.url?.endsWith('/stream_events')) {
      held = new Promise<void>((resolve) => (release = () => (send(), resolve())));
      res.on('close', () => upstream.destroy());
    } else send();
  });
  proxied = proxy.url;
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await proxy?.close();
  await app?.close();
});

describe('Stop before the run id has arrived', () => {
  it('cancels the run once its id arrives', async () => {
    const { page } = await openWatched(browser, `${proxied}/waits/playground/`);
    await page.locator('#f-topic').fill('early');
    const posted = page.waitForRequest((r) => r.method() === 'POST' && r.url().endsWith('/waits/stream_events'));
    await page.getByRole('button', { name: 'Run' }).click();
    await posted;
    // The run is under way on the server; its stream's answer has not reached the page.
    let runs: { run_id: string; status: string }[] = [];
    for (let i = 0; i < 100 && runs.length === 0; i++) {
      runs = (JSON.parse((await app.inject({ method: 'GET', url: '/waits/runs?status=running' })).body) as { runs: typeof runs }).runs;
      if (runs.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const runId = runs[0]?.run_id ?? '';
    expect(runId).not.toBe('');
    // The proxy holds the stream's answer (a review: the run is stored running before its first frame is sent,
    // so the answer could still be on its way to the proxy, with nothing yet to let go).
    for (let i = 0; i < 250 && release === undefined; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(release).toBeDefined();

    const cancel = page.waitForRequest((r) => r.method() === 'POST' && r.url().endsWith(`/waits/runs/${runId}/cancel`), { timeout: 5_000 }).catch(() => undefined);
    await page.getByRole('button', { name: 'Stop' }).click();
    release?.();
    await held;
    expect(await cancel).toBeDefined();
    const record = JSON.parse((await app.inject({ method: 'GET', url: `/waits/runs/${runId}/wait?timeout_s=5` })).body) as { status: string };
    expect(record.status).toBe('cancelled');
    await app.inject({ method: 'POST', url: `/waits/runs/${runId}/cancel`, headers: { 'content-type': 'application/json' } });
    await page.close();
  });
});
