/**
 * The `/rag` playground (issue 14) with the real chain over a seeded docs
 * collection: the output follows the output schema's order, so the answer
 * shows above its sources — not in the order the stream happened to send
 * them (sources first, as retrieval finishes before the model starts).
 */
import type { FastifyInstance } from 'fastify';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChains } from '../../chains/index.js';
import { buildApp } from '../../src/index.js';
import { ARTIFACTS, serveToBrowser, openWatched, temporaryServices } from './browser.js';

let app: FastifyInstance;
let browser: Browser;
let dispose: () => Promise<void>;
let base = '';

beforeAll(async () => {
  const temporary = await temporaryServices();
  dispose = temporary.dispose;
  const { chains, docs } = createChains({ services: temporary.services, env: {} });
  await docs.seed();
  app = await buildApp({ chains, services: temporary.services });
  ({ base, browser } = await serveToBrowser(app));
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await app?.close();
  await dispose?.();
});

describe('the /rag playground', () => {
  it('shows the answer above the sources, while it streams and at the end', async () => {
    const { page, problems } = await openWatched(browser, `${base}/rag/playground/`);
    await page.locator('#f-question').fill('How is chat history stored?');
    // Every state the output shows, as the stream fills it in (a string script: this project's types have no DOM).
    await page.evaluate(`(() => {
      window.outputs = [];
      const output = document.querySelector('.output');
      new MutationObserver(() => window.outputs.push(output.innerText)).observe(output, { childList: true, subtree: true, characterData: true });
    })()`);
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('.status', { hasText: 'Done' }).waitFor();
    const output = JSON.parse(await page.locator('.output').innerText()) as { answer: string; sources: { id: string }[] };
    expect(Object.keys(output)).toEqual(['answer', 'sources']);
    expect(output.answer).toMatch(/Offline model/);
    expect(output.sources.length).toBeGreaterThan(0);
    // On the screen: the line of "answer" is above the line of "sources".
    const top = (needle: string): Promise<number> =>
      page.evaluate(`(() => {
        const walker = document.createTreeWalker(document.querySelector('.output'), NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node !== null; node = walker.nextNode()) {
          const at = node.textContent.indexOf(${JSON.stringify(needle)});
          if (at < 0) continue;
          const range = document.createRange();
          range.setStart(node, at);
          range.setEnd(node, at + ${needle.length});
          return range.getBoundingClientRect().top;
        }
        return NaN;
      })()`);
    expect(await top('"answer"')).toBeLessThan(await top('"sources"'));
    // While it streamed too: whenever both showed, the answer came first.
    const states = (await page.evaluate('window.outputs')) as string[];
    const both = states.filter((text) => text.includes('"answer"') && text.includes('"sources"'));
    expect(both.length).toBeGreaterThan(1);
    for (const text of both) expect(text.indexOf('"answer"')).toBeLessThan(text.indexOf('"sources"'));
    await page.screenshot({ path: `${ARTIFACTS}rag-playground.png`, fullPage: true });
    expect(problems).toEqual([]);
    await page.close();
  });
});
