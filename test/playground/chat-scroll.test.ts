/**
 * The chat log while an answer streams: it follows the answer down only when
 * the reader is at the bottom. A probe: every frame of a streaming answer set
 * the log's scroll to its end, so a reader who scrolled up — to an earlier
 * turn, or the start of a long answer — was pulled back down many times a
 * second until the answer ended. The chain waits at a gate the test opens.
 */
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, lambda, MemoryHistoryStore } from '../../src/index.js';
import { chatChain, openWatched, serveToBrowser } from './browser.js';

/** A promise the test resolves. */
class Gate {
  open!: () => void;
  readonly opened = new Promise<void>((resolve) => (this.open = resolve));
}

let gate = new Gate();
const histories = new MemoryHistoryStore();
/** A paragraph long enough that one answer overflows the log. */
const LINES = Array.from({ length: 40 }, (_, i) => `line ${i} of a long answer`);

/** Forty lines, then waits for the gate, then forty more. */
async function* longAnswer(): AsyncGenerator<string> {
  for (const line of LINES) yield `${line}\n\n`;
  await gate.opened;
  for (const line of LINES) yield `more ${line}\n\n`;
}

let app: FastifyInstance;
let browser: Browser;
let base = '';

beforeAll(async () => {
  app = await buildApp({
    chains: [
      chatChain({ path: '/long-chat', description: 'A chat whose answers are long and wait halfway', answer: lambda(() => longAnswer()), histories }),
    ] as never,
  });
  ({ base, browser } = await serveToBrowser(app));
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await app?.close();
});

/** The log's scroll: how far down, and how far from its end. */
function logScroll(page: Page): Promise<{ top: number; fromEnd: number }> {
  return page.evaluate(`(() => {
    const log = document.querySelector('.chat-log');
    return { top: log.scrollTop, fromEnd: log.scrollHeight - log.scrollTop - log.clientHeight };
  })()`);
}

/** Sends `message`, and waits until the first half of its answer is on the page (the chain then waits). */
async function sendAndWaitHalfway(page: Page, message: string): Promise<void> {
  gate = new Gate();
  await page.getByLabel('Message').fill(message);
  await page.getByLabel('Message').press('Enter');
  await page.locator('.bubble.streaming', { hasText: 'line 39 of a long answer' }).waitFor();
}

/** Opens the gate and waits until the answer has ended and its last line is shown. */
async function finish(page: Page): Promise<void> {
  gate.open();
  await page.locator('.bubble.streaming').waitFor({ state: 'detached' });
  expect(await page.locator('.bubble.ai').last().innerText()).toContain('more line 39 of a long answer');
}

describe('the chat log while an answer streams', () => {
  it('stays where a reader scrolled up to, and follows the answer when they are at the bottom', async () => {
    const { page, problems } = await openWatched(browser, `${base}/long-chat/playground/`);
    await sendAndWaitHalfway(page, 'first');
    // At the bottom while it streams: the log follows the answer to its end.
    expect((await logScroll(page)).fromEnd).toBeLessThan(2);
    await finish(page);
    expect((await logScroll(page)).fromEnd).toBeLessThan(2);

    await sendAndWaitHalfway(page, 'second');
    // The reader scrolls up to the first answer while the second streams on.
    await page.evaluate(`document.querySelector('.chat-log').scrollTop = 0`);
    await finish(page);
    expect((await logScroll(page)).top).toBe(0);
    expect(problems).toEqual([]);
    await page.close();
  });
});
