/**
 * Right-to-left text in the playground: a Hebrew or Arabic answer, message or
 * input reads in its own direction. A probe: every block was laid out left to
 * right, so "שלום, מה שלומך?" showed its question mark at the sentence's
 * start (the right end, for its reader), and an Arabic answer sat flush
 * left. Each block now takes its direction from its own text (`dir="auto"`);
 * a left-to-right one stays as it was. Checked where the browser puts the
 * characters, in Chromium.
 */
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { buildApp, defineChain, lambda, MemoryHistoryStore } from '../../src/index.js';
import { chatChain, openWatched, serveToBrowser } from './browser.js';

let app: FastifyInstance;
let browser: Browser;
let base = '';

const HEBREW = 'שלום, מה שלומך?';
const ARABIC = 'مرحبا، كيف حالك؟';
const ENGLISH = 'Hello, how are you?';
const histories = new MemoryHistoryStore();

beforeAll(async () => {
  app = await buildApp({
    chains: [
      defineChain({
        path: '/say',
        description: 'Answers its text as Markdown: a paragraph, a list item, a heading',
        runnable: lambda((input: { text: string }) => `${input.text}\n\n- ${ARABIC}\n\n## ${HEBREW}\n\n${ENGLISH}`, { input: z.object({ text: z.string() }) }),
      }),
      chatChain({ path: '/talk', description: 'Answers a message with the Arabic greeting and a line of code', answer: lambda(() => `${ARABIC}\n\n\`\`\`\n// ${ARABIC}\nconsole.log(1);\n\`\`\``), histories }),
    ],
  });
  ({ base, browser } = await serveToBrowser(app));
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await app?.close();
});

/**
 * Where the browser drew `text`'s last character, against its first: `left` of it in a right-to-left line
 * ("?" at the sentence's end, on the reader's left), `right` in a left-to-right one. The text is looked for
 * in the elements `selector` matches (a string script: no DOM types here).
 */
function lastCharacterSide(page: Page, selector: string, text: string): Promise<'left' | 'right'> {
  return page.evaluate(`(() => {
    const [selector, sentence] = ${JSON.stringify([selector, text])};
    for (const root of document.querySelectorAll(selector)) {
      const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node !== null; node = walker.nextNode()) {
        const at = node.textContent.indexOf(sentence);
        if (at === -1) continue;
        const box = (from) => {
          const range = document.createRange();
          range.setStart(node, from);
          range.setEnd(node, from + 1);
          return range.getBoundingClientRect();
        };
        return box(at + sentence.length - 1).left < box(at).left ? 'left' : 'right';
      }
    }
    throw new Error('no text node holds ' + sentence);
  })()`);
}

/** Whether the browser lays out the element `selector` names right to left. */
function isRightToLeft(page: Page, selector: string): Promise<boolean> {
  return page.evaluate(`document.querySelector(${JSON.stringify(selector)}).matches(':dir(rtl)')`);
}

describe('the playground with right-to-left text', () => {
  it('lays out each block of the output, and the input field, in its text’s own direction', async () => {
    const { page, problems } = await openWatched(browser, `${base}/say/playground/`);
    const field = page.locator('#f-text');
    await field.fill(HEBREW);
    expect(await isRightToLeft(page, '#f-text')).toBe(true);
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('.status', { hasText: /Done|Failed/ }).waitFor();
    expect(await page.locator('.status').innerText()).toMatch(/^Done/);
    expect(await lastCharacterSide(page, '.output p', HEBREW)).toBe('left');
    expect(await lastCharacterSide(page, '.output li', ARABIC)).toBe('left');
    expect(await lastCharacterSide(page, '.output h4', HEBREW)).toBe('left');
    expect(await lastCharacterSide(page, '.output p', ENGLISH)).toBe('right');
    // As text, not Markdown: the same.
    await page.locator('select').first().selectOption('text');
    expect(await lastCharacterSide(page, '.output pre', HEBREW)).toBe('left');
    expect(problems).toEqual([]);
    await page.close();
  });

  it('lays out chat messages, the composer and the answers in their own direction', async () => {
    const { page, problems } = await openWatched(browser, `${base}/talk/playground/`);
    const box = page.getByLabel('Message');
    await box.fill(HEBREW);
    expect(await isRightToLeft(page, 'textarea[aria-label="Message"]')).toBe(true);
    await box.press('Enter');
    const answer = page.locator('.bubble.ai', { hasText: ARABIC });
    await answer.waitFor();
    await page.locator('.bubble.streaming').waitFor({ state: 'detached' });
    expect(await lastCharacterSide(page, '.bubble.human', HEBREW)).toBe('left');
    expect(await lastCharacterSide(page, '.bubble.ai', ARABIC)).toBe('left');
    // Reloaded, the conversation from the server's history reads the same.
    await page.reload();
    await page.locator('.bubble.ai', { hasText: ARABIC }).waitFor();
    expect(await lastCharacterSide(page, '.bubble.human', HEBREW)).toBe('left');
    expect(await lastCharacterSide(page, '.bubble.ai', ARABIC)).toBe('left');
    // A review: code whose first words are Arabic (a comment) was laid out right to left; code reads left to right.
    expect(await isRightToLeft(page, '.bubble.ai pre')).toBe(false);
    expect(problems).toEqual([]);
    await page.close();
  });
});
