/**
 * The playground given output a model could write but no renderer expects:
 * block quotes nested thousands deep, an answer of thousands of tokens
 * streamed at once, runs of backticks and brackets that open and never close. The page renders what it can, keeps up, and says how
 * the run ended on the server, in a real browser against a listening
 * server.
 */
import type { FastifyInstance } from 'fastify';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { buildApp, ChatPromptTemplate, defineChain, FakeListChatModel, lambda, StringOutputParser } from '../../src/index.js';
import { openWatched, serveToBrowser, temporaryServices } from './browser.js';

let app: FastifyInstance;
let browser: Browser;
let dispose: () => Promise<void>;
let base = '';

const topic = z.object({ topic: z.string() });
const TOKENS = 5_000;
/** 200,000 characters each of what opens a code span, a link and an image and never closes them. */
const UNCLOSED = ['x ' + '`'.repeat(200_000), '['.repeat(200_000), '[a]('.repeat(50_000), '!['.repeat(100_000)].join('\n\n');
const long = Array.from({ length: TOKENS }, (_, i) => `word${i}`).join(' ');

beforeAll(async () => {
  const temporary = await temporaryServices();
  dispose = temporary.dispose;
  app = await buildApp({
    services: temporary.services,
    chains: [
      defineChain({ path: '/quotes', description: 'Answers with quotes nested 20,000 deep', runnable: lambda((_: { topic: string }) => `${'>'.repeat(20_000)} the innermost words`, { input: topic }) }),
      defineChain({ path: '/unclosed', description: 'Opens code spans and links it never closes', runnable: lambda((_: { topic: string }) => UNCLOSED, { input: topic }) }),
      defineChain({
        path: '/long',
        description: 'Streams 5,000 tokens as fast as it can',
        runnable: ChatPromptTemplate.fromMessages([['human', 'Tell a story about {topic}']])
          .pipe(new FakeListChatModel({ responses: [long] }))
          .pipe(new StringOutputParser()),
      }),
    ],
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

  // A probe: the whole output was rendered again for each chunk, so an answer streamed faster than the page could
  // render it (a fast model; a rejoin replays a run's frames at once) cost time in its length times its chunks:
  // 47 s for 30,000 tokens the server sent in 1 s. Counted, not timed: how often the output is rebuilt.
  it('renders a burst of 5,000 streamed tokens a frame at a time, not once per token, and shows all of them', async () => {
    const { page, problems } = await openWatched(browser, `${base}/long/playground/`);
    await page.locator('#f-topic').fill('x');
    // Every change to the output's own children: each render replaces them (a string script: no DOM types here).
    await page.evaluate(`(() => {
      window.rebuilds = 0;
      new MutationObserver((records) => (window.rebuilds += records.length)).observe(document.querySelector('.output'), { childList: true });
    })()`);
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('.status', { hasText: /Done|Failed/ }).waitFor();
    expect(await page.locator('.status').innerText()).toMatch(/^Done/);
    expect(await page.locator('.output').innerText()).toBe(long);
    expect(await page.evaluate('window.rebuilds')).toBeLessThan(TOKENS / 5);
    expect(problems).toEqual([]);
    await page.close();
  });

  // A probe: each backtick of a run, and each `[` of `[[[…`, was a start the inline pattern read on from to the
  // end of the text: 50,000 backticks froze the page for 8 s, and the time grows with the square of the run
  // (these 200,000 took minutes). Read once, they take milliseconds.
  it('renders runs of 200,000 backticks and brackets that never close as text', async () => {
    const { page, problems } = await openWatched(browser, `${base}/unclosed/playground/`);
    await page.locator('#f-topic').fill('x');
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('.status', { hasText: /Done|Failed/ }).waitFor();
    expect(await page.locator('.status').innerText()).toMatch(/^Done/);
    expect((await page.locator('.output').innerText()).replace(/\s+/g, '')).toBe(UNCLOSED.replace(/\s+/g, ''));
    expect(await page.locator('.output code, .output a').count()).toBe(0);
    expect(problems).toEqual([]);
    await page.close();
  });
});
