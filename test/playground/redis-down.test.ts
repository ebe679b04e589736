/**
 * The playground while Redis is down. Its runs ask to outlive their
 * connection (`on_disconnect: "continue"`), which needs Redis: a trial found
 * that with Redis down every Run failed with 503 RUNNEL_ERR_REDIS_UNAVAILABLE
 * while `/stream` itself still served. The page now runs the chain as a
 * plain stream, says the run is tied to its connection, and Stop still
 * stops it (closing the connection cancels a plain run).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { buildApp, connectServices, defineChain, lambda, type Services } from '../../src/index.js';
import { freePort } from '../helpers.js';
import { openWatched, serveToBrowser } from './browser.js';

/** Opens when the `/endless` run's signal aborts on the server. */
let aborted: () => void = () => {};
const abortedOnServer = new Promise<void>((resolve) => (aborted = resolve));

async function* words(topic: string): AsyncGenerator<string> {
  for (const word of ['plain', 'streams', 'about', topic]) yield `${word} `;
}

async function* endless(signal: AbortSignal | undefined): AsyncGenerator<string> {
  yield 'started ';
  await new Promise<void>((resolve) => signal?.addEventListener('abort', () => resolve(), { once: true }));
  aborted();
}

const topic = z.object({ topic: z.string() });
const chains = [
  defineChain({ path: '/words', description: 'Streams four words', runnable: lambda((input: { topic: string }) => words(input.topic), { input: topic }) }),
  defineChain({ path: '/endless', description: 'Streams a word, then waits to be cancelled', runnable: lambda((_input: { topic: string }, config) => endless(config.signal), { input: topic }) }),
];

let app: FastifyInstance;
let browser: Browser;
let base = '';
let services: Services;
const dataDir = mkdtempSync(join(tmpdir(), 'runnel-redis-down-'));

beforeAll(async () => {
  // Redis configured on a port nobody listens on: the server starts, and what needs Redis answers 503.
  services = await connectServices({ redisUrl: `redis://127.0.0.1:${await freePort()}`, dataDir });
  app = await buildApp({ chains: chains as never, services });
  ({ base, browser } = await serveToBrowser(app));
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await app?.close();
  await services?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('the playground with Redis down', () => {
  it('runs the chain as a plain stream and says so; Stop cancels it on the server', async () => {
    // The premise: a durable stream is refused, a plain one served.
    const durable = await fetch(`${base}/words/stream`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { topic: 'x' }, on_disconnect: 'continue' }) });
    expect([durable.status, ((await durable.json()) as { code: string }).code]).toEqual([503, 'RUNNEL_ERR_REDIS_UNAVAILABLE']);

    const { page, problems } = await openWatched(browser, `${base}/words/playground/`);
    await page.locator('#f-topic').fill('otters');
    await page.getByLabel('Render output as').selectOption('text');
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('.status', { hasText: 'Done' }).waitFor();
    expect(await page.locator('.status').innerText()).toMatch(/as a plain stream: Redis is unavailable/);
    expect((await page.locator('.output').innerText()).trim()).toBe('plain streams about otters');
    // The refused durable request is the only thing that went wrong on the page (Chromium logs its 503 too).
    expect(problems.sort()).toEqual([`503: ${base}/words/stream_events`, 'console: Failed to load resource: the server responded with a status of 503 (Service Unavailable)']);

    const endlessPage = (await openWatched(browser, `${base}/endless/playground/`)).page;
    await endlessPage.locator('#f-topic').fill('waiting');
    await endlessPage.getByRole('button', { name: 'Run' }).click();
    await endlessPage.locator('.status', { hasText: 'Redis is unavailable: this run ends if the connection drops' }).waitFor();
    await endlessPage.getByRole('button', { name: 'Stop' }).click();
    await abortedOnServer;
    await endlessPage.locator('.status', { hasText: /stopped/i }).waitFor();
  }, 60_000);
});
