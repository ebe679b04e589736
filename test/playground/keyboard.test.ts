/**
 * The playground's form without a mouse. Adding or removing a row, or leaving an object out, draws the form
 * anew; a probe found the keyboard's place gone with the old elements (on the page's body): the next Tab
 * started again from the first field, and Ctrl+Enter, heard only inside the input, ran nothing.
 */
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { buildApp, defineChain, lambda, messagesSchema } from '../../src/index.js';
import { openWatched, serveToBrowser } from './browser.js';

const chains = [
  defineChain({
    path: '/lists',
    description: 'Echoes its input',
    runnable: lambda((input: { topic: string }) => ({ topic: input.topic }), {
      input: z.object({ topic: z.string(), tags: z.array(z.string()).optional(), chat_history: messagesSchema.optional(), address: z.object({ city: z.string() }).optional() }),
    }),
  }),
];

let app: FastifyInstance;
let browser: Browser;
let base = '';

beforeAll(async () => {
  app = await buildApp({ chains: chains as never });
  ({ base, browser } = await serveToBrowser(app));
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await app?.close();
});

/** What has the keyboard: its tag and its label, id or text. */
const focused = (page: Page) => page.locator(':focus').evaluate((el) => [el.tagName.toLowerCase(), el.getAttribute('aria-label') ?? el.id, el.tagName === 'BUTTON' ? el.textContent : ''].filter(Boolean).join(' '), undefined, { timeout: 1_000 }).catch(() => 'nothing in the page');

describe('the form from the keyboard', () => {
  it('Add, Remove and Leave out keep the keyboard in the form, and Ctrl+Enter then runs', async () => {
    const { page, problems } = await openWatched(browser, `${base}/lists/playground/`);
    await page.locator('#f-topic').fill('keys');

    await page.getByRole('button', { name: 'Add message' }).focus();
    await page.keyboard.press('Enter');
    // On the new message's first control, to type it.
    expect(await focused(page)).toBe('select Role');
    await page.keyboard.press('Tab');
    await page.keyboard.type('typed');
    await page.keyboard.press('Tab');
    expect(await focused(page)).toBe('button Remove');
    await page.keyboard.press('Enter');
    // No message left: on Add message, where the list is.
    expect(await focused(page)).toBe('button Add message');

    await page.getByRole('button', { name: 'Add item' }).focus();
    await page.keyboard.press('Space');
    expect(await focused(page)).toBe('textarea f-tags_0');
    await page.keyboard.type('one');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    expect(await focused(page)).toBe('button Add item');

    await page.locator('#f-address_city').fill('Oslo');
    await page.getByRole('button', { name: 'Leave out address' }).focus();
    await page.keyboard.press('Enter');
    expect(await focused(page)).toBe('textarea f-address_city');

    await page.keyboard.press('Control+Enter');
    await page.locator('.status', { hasText: 'Done' }).waitFor();
    expect(problems).toEqual([]);
    await page.close();
  });
});
