/**
 * The playground given output a model could write but no renderer expects:
 * block quotes nested thousands deep. The page renders what it can and says
 * how the run ended on the server, in a real browser against a listening
 * server.
 */
import type { FastifyInstance } from 'fastify';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { buildApp, defineChain, lambda } from '../../src/index.js';
import { openWatched, serveToBrowser, temporaryServices } from './browser.js';

let app: FastifyInstance;
let browser: Browser;
let dispose: () => Promise<void>;
let base = '';

const topic = z.object({ topic: z.string() });

beforeAll(async () => {
  const temporary = await temporaryServices();
  dispose = temporary.dispose;
  app = await buildApp({
    services: temporary.services,
    chains: [defineChain({ path: '/quotes', description: 'Answers with quotes nested 20,000 deep', runnable: lambda((_: { topic: string }) => `${'>'.repeat(20_000)} the innermost words`, { input: topic }) })],
  });
  ({ base, browser } = await serveToBrowser(app));
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await app?.close();
  await dispose?.();
});

describe('the playground given hostile output', () => {
  // A probe: the renderer recursed once per `>`, overflowed the stack, and the page said Failed for a run that
  // had finished on the server, showing nothing of its output.
  it('renders block quotes nested 20,000 deep, and says the run is done', async () => {
    const { page, problems } = await openWatched(browser, `${base}/quotes/playground/`);
    await page.locator('#f-topic').fill('x');
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('.status', { hasText: /Done|Failed/ }).waitFor();
    expect(await page.locator('.status').innerText()).toMatch(/^Done/);
    expect(await page.locator('.errors').innerText()).toBe('');
    expect(await page.locator('.output').innerText()).toContain('the innermost words');
    expect(await page.locator('.output blockquote').count()).toBeGreaterThan(1);
    expect(problems).toEqual([]);
    await page.close();
  });
});
