/**
 * The icon (issue 14): `/favicon.ico` and `/favicon.svg` answer, without an
 * API key, and the index page and every playground page link an icon that
 * loads — no 404 and no console error in the browser.
 */
import type { FastifyInstance } from 'fastify';
import LZString from 'lz-string';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createChains } from '../../chains/index.js';
import { buildApp, defineChain, lambda } from '../../src/index.js';
import { eventually, serveToBrowser, openWatched, recordAnswers, temporaryServices } from './browser.js';

const KEY = 'k_favicon_0123456789abcdef';

describe('the icon over HTTP', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    const echo = defineChain({ path: '/echo', runnable: lambda((input: { text: string }) => input.text, { input: z.object({ text: z.string() }) }) });
    app = await buildApp({ chains: [echo], config: { apiKeys: [{ name: 'tester', key: KEY }] } });
  });
  afterAll(async () => app?.close());

  it('serves /favicon.ico (an ICO holding a 32 × 32 PNG) and /favicon.svg without a key, cached, while the API still needs one', async () => {
    const ico = await app.inject('/favicon.ico');
    expect(ico.statusCode).toBe(200);
    expect(ico.headers['content-type']).toBe('image/x-icon');
    const body = ico.rawPayload;
    expect([...body.subarray(0, 6)]).toEqual([0, 0, 1, 0, 1, 0]);
    expect([body[6], body[7]]).toEqual([32, 32]);
    expect(body.readUInt32LE(14)).toBe(body.length - 22);
    expect(body.subarray(22, 30).toString('latin1')).toBe('\x89PNG\r\n\x1a\n');

    const svg = await app.inject('/favicon.svg');
    expect(svg.statusCode).toBe(200);
    expect(svg.headers['content-type']).toMatch(/^image\/svg\+xml/);
    expect(svg.body).toMatch(/^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);

    for (const [url, res] of [['/favicon.ico', ico], ['/favicon.svg', svg]] as const) {
      expect(res.headers['cache-control']).toMatch(/public, max-age=\d+/);
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      const again = await app.inject({ url, headers: { 'if-none-match': String(res.headers.etag) } });
      expect(again.statusCode).toBe(304);
      expect((await app.inject({ method: 'HEAD', url })).statusCode).toBe(200);
    }
    expect((await app.inject('/echo/input_schema')).statusCode).toBe(401);
    expect((await app.inject({ url: '/echo/input_schema', headers: { 'x-api-key': KEY } })).statusCode).toBe(200);
  });
});

describe('the icon in Chromium', () => {
  let app: FastifyInstance;
  let browser: Browser;
  let dispose: () => Promise<void>;
  let base = '';
  let answers: ReturnType<typeof recordAnswers>;

  beforeAll(async () => {
    const temporary = await temporaryServices();
    dispose = temporary.dispose;
    app = await buildApp({ chains: createChains({ services: temporary.services, env: {} }).chains, services: temporary.services });
    answers = recordAnswers(app);
    ({ base, browser } = await serveToBrowser(app));
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await dispose?.();
  });

  const shared = `/joke/c/${LZString.compressToEncodedURIComponent(JSON.stringify({ configurable: {} }))}/playground/`;
  for (const path of ['/', '/joke/playground/', '/chat/playground/', shared]) {
    it(`${path === shared ? 'a shared playground' : path}: the icon loads, and nothing fails or logs an error`, async () => {
      answers.length = 0;
      const { page, problems } = await openWatched(browser, `${base}${path}`);
      // The browser asks for the icon after the page has loaded, outside the page's own request events.
      const icon = await eventually(() => answers.find((a) => a.url.startsWith('/favicon')), `the browser to ask ${base} for an icon`);
      await page.waitForLoadState('networkidle');
      expect(icon).toEqual({ method: 'GET', url: '/favicon.svg', status: 200 });
      expect(answers.filter((a) => a.status >= 400)).toEqual([]);
      expect(problems).toEqual([]);
      await page.close();
    });
  }

  it('keeps its icon when the page rewrites its address (the share link, after an edit)', async () => {
    answers.length = 0;
    const { page, problems } = await openWatched(browser, `${base}/joke/playground/`);
    await eventually(() => answers.find((a) => a.url.startsWith('/favicon')), 'the first icon request');
    await page.locator('#f-topic').fill('icons');
    await page.waitForURL(/\/joke\/c\/[^/]+\/playground\/#input=/);
    // Chromium resolves the icon again against the new address; give it the time a person would.
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('.status', { hasText: 'Done' }).waitFor();
    await page.waitForLoadState('networkidle');
    expect(answers.filter((a) => a.url.includes('favicon'))).toEqual(answers.filter((a) => a.url === '/favicon.svg' && a.status === 200));
    expect(problems).toEqual([]);
    await page.close();
  });
});
