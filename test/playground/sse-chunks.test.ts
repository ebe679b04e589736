/**
 * The playground reads its streams as they come off the network, in whatever pieces: a proxy, a slow link or
 * a large frame splits them anywhere, also between the `\r` and the `\n` of a frame's `\r\n\r\n`. A probe: the
 * page turned `\r\n` into `\n` piece by piece, so such a split hid the frame's end, the next frame's data was
 * joined to its own, and the run failed on a JSON syntax error.
 */
import type { FastifyInstance } from 'fastify';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { buildApp, defineChain, lambda } from '../../src/index.js';
import { openWatched, proxyTo, serveToBrowser } from './browser.js';

const WORDS = ['one', 'two', 'three', 'four', 'five'];

async function* words(): AsyncGenerator<string> {
  for (const [i, word] of WORDS.entries()) yield i === 0 ? word : ` ${word}`;
}

const chains = [defineChain({ path: '/words', description: 'Streams five words', runnable: lambda((_input: { topic: string }) => words(), { input: z.object({ topic: z.string() }) }) })];

let app: FastifyInstance;
let browser: Browser;
let base = '';
let proxy: Awaited<ReturnType<typeof proxyTo>> | undefined;
let proxied = '';

beforeAll(async () => {
  app = await buildApp({ chains: chains as never });
  ({ base, browser } = await serveToBrowser(app));
  // A proxy that passes every stream on in pieces cut between each `\r` and the `\n` after it, one piece at a time.
  proxy = await proxyTo(base, (_req, res, answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    if (!String(answer.headers['content-type']).startsWith('text/event-stream')) {
      answer.pipe(res);
      return;
    }
    let sending = Promise.resolve();
    answer.on('data', (chunk: Buffer) => {
      const pieces = chunk.toString('latin1').split(/(?<=\r)(?=\n)/);
      sending = sending.then(async () => {
        for (const piece of pieces) {
          res.write(Buffer.from(piece, 'latin1'));
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      });
    });
    answer.on('end', () => void sending.then(() => res.end()));
  });
  proxied = proxy.url;
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await proxy?.close();
  await app?.close();
});

describe('a stream split between \\r and \\n', () => {
  it('runs to its end, every word once', async () => {
    const { page, problems } = await openWatched(browser, `${proxied}/words/playground/`);
    await page.locator('#f-topic').fill('pieces');
    await page.getByLabel('Render output as').selectOption('text');
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('.status', { hasText: /Done|Failed/ }).waitFor({ timeout: 20_000 });
    expect(await page.locator('.errors').innerText()).toBe('');
    expect(await page.locator('.status').innerText()).toMatch(/^Done/);
    expect(await page.locator('.output').innerText()).toBe(WORDS.join(' '));
    expect(problems).toEqual([]);
    await page.close();
  });
});
