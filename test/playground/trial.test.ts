/**
 * The playground as a person trying chains uses it, in Chromium: what a
 * trial of it found, each checked from the page. A second Enter while an
 * answer streams sends nothing; a stopped turn says it is not kept; Run waits
 * for JSON being fixed; a message list the server would refuse is caught in
 * the browser and shown on its row; a narrow screen never scrolls sideways;
 * a share link that cannot be read says so; Stop while offline says
 * "Stopping…" until the cancel reaches the server; a step opened while the
 * run streams stays open; an object output reads as text by its fields.
 *
 * The chains wait at gates the test opens, so every step waits on an event,
 * never on the clock.
 */
import type { FastifyInstance } from 'fastify';
import LZString from 'lz-string';
import type { Browser, Page, Request } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { buildApp, defineChain, FakeListChatModel, lambda, MemoryHistoryStore, messagesSchema } from '../../src/index.js';
import { ARTIFACTS, chatChain, openWatched, serveToBrowser } from './browser.js';

/** A promise the test resolves. */
class Gate {
  open!: () => void;
  readonly opened = new Promise<void>((resolve) => (this.open = resolve));
}

/** `/held`'s run: five words, then it waits for `more` (or its cancel), then five more. */
let more = new Gate();
/** Opens when a `/held` run's signal aborts on the server. */
let aborted = new Gate();

async function* heldWords(signal: AbortSignal | undefined): AsyncGenerator<string> {
  for (let i = 0; i < 5; i++) yield `w${i} `;
  const cancelled = new Promise<'cancelled'>((resolve) => signal?.addEventListener('abort', () => resolve('cancelled'), { once: true }));
  if ((await Promise.race([more.opened, cancelled])) === 'cancelled') {
    aborted.open();
    return;
  }
  for (let i = 5; i < 10; i++) yield `w${i} `;
}

const histories = new MemoryHistoryStore();
const LONG = `${'unbroken'.repeat(40)} and a long line of an answer that goes on.`;

const chains = [
  defineChain({ path: '/held', description: 'Streams five words, then waits', runnable: lambda((_input: { topic: string }, config) => heldWords(config.signal), { input: z.object({ topic: z.string() }) }) }),
  chatChain({ path: '/held-chat', description: 'A chat whose answers wait', answer: lambda((_input: { message: string }, config) => heldWords(config.signal)), histories }),
  defineChain({
    path: '/echo',
    description: 'Echoes its input',
    runnable: lambda((input: { topic: string; chat_history?: unknown[] }) => ({ topic: input.topic }), { input: z.object({ topic: z.string(), chat_history: messagesSchema.optional() }) }),
  }),
  defineChain({
    path: '/tuned',
    description: 'A model with a setting',
    runnable: lambda((input: { topic: string }) => input.topic, { input: z.object({ topic: z.string() }) }).pipe(
      new FakeListChatModel({ responses: ['tuned answer'] }).configurableFields({ temperature: { id: 'temperature', name: 'Temperature', schema: z.number().min(0).max(2) } }),
    ),
  }),
  defineChain({
    path: '/nohash',
    description: 'Echoes its input, without config hashes',
    enabledEndpoints: ['invoke', 'stream', 'stream_events', 'input_schema', 'output_schema', 'config_schema', 'playground', 'runs'],
    runnable: lambda((input: { topic: string }) => ({ topic: input.topic }), { input: z.object({ topic: z.string() }) }),
  }),
  defineChain({
    path: '/address',
    description: 'Takes a name and, maybe, an address',
    runnable: lambda((input: { name: string; address?: { street: string; city: string } }) => input, {
      input: z.object({ name: z.string(), address: z.object({ street: z.string(), city: z.string() }).optional() }),
    }),
  }),
  defineChain({
    path: '/answer',
    description: 'Answers with an object: a long text and its sources',
    runnable: lambda((_input: { question: string }) => ({ answer: `# Found\n\n${LONG}`, sources: [{ source: `docs/${'nested/'.repeat(12)}file.md`, lines: '1-20' }] }), {
      input: z.object({ question: z.string() }),
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

async function open(path: string, viewport?: { width: number; height: number }): Promise<{ page: Page; problems: string[]; requests: Request[] }> {
  const { page, problems } = await openWatched(browser, 'about:blank');
  if (viewport !== undefined) await page.setViewportSize(viewport);
  const requests: Request[] = [];
  page.on('request', (request) => void requests.push(request));
  await page.goto(`${base}${path}`);
  return { page, problems, requests };
}

/** Cuts and restores the page's network through the DevTools protocol. */
async function network(page: Page): Promise<(offline: boolean) => Promise<void>> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  return async (offline) => void (await cdp.send('Network.emulateNetworkConditions', { offline, latency: 0, downloadThroughput: -1, uploadThroughput: -1 }));
}

/** A `/held` run on its page, started and waiting at its gate with five words shown. */
async function heldRun(): Promise<Page> {
  more = new Gate();
  aborted = new Gate();
  const { page } = await open('/held/playground/');
  await page.locator('#f-topic').fill('x');
  await page.getByRole('button', { name: 'Run' }).click();
  await page.locator('.output').getByText('w4', { exact: false }).waitFor();
  return page;
}

const posts = (requests: Request[], path: string): Request[] => requests.filter((r) => r.method() === 'POST' && new URL(r.url()).pathname === path);

describe('the playground, as a trial found it', () => {
  it('chat: a second Enter while an answer streams sends nothing; a stopped turn says it is not kept, and its message comes back', async () => {
    more = new Gate();
    aborted = new Gate();
    const { page, requests } = await open('/held-chat/playground/');
    const message = page.getByLabel('Message');
    await message.fill('first question');
    await message.press('Enter');
    await page.locator('.bubble.ai').getByText('w4', { exact: false }).waitFor();
    // Sending again while the answer streams: nothing is sent, and the text stays in the composer.
    await message.fill('second question');
    await message.press('Enter');
    expect(await page.locator('.bubble.human').allInnerTexts()).toEqual(['first question']);
    expect(await message.inputValue()).toBe('second question');
    // Nor does a new session start under it.
    expect(await page.getByRole('button', { name: 'New session' }).isDisabled()).toBe(true);

    await message.fill('');
    await page.getByRole('button', { name: 'Stop' }).click();
    await aborted.opened;
    await page.locator('.status', { hasText: 'Stopped' }).waitFor();
    expect(await page.locator('.turn-note').innerText()).toBe('Stopped: this turn is not kept in the conversation.');
    expect(await page.locator('.bubble.not-kept').count()).toBe(2);
    // The message is back, ready to send again.
    expect(await message.inputValue()).toBe('first question');
    // And the server kept nothing of it: the session's history is empty.
    const session = await page.locator('.session-id').innerText();
    const history = (await (await fetch(`${base}/held-chat/history/${session}`)).json()) as { messages: unknown[] };
    expect(history.messages).toEqual([]);
    expect(posts(requests, '/held-chat/stream_events')).toHaveLength(1);
    await page.close();
  });

  it('chat: a reload while an answer streams follows that answer again, then shows the conversation as the server keeps it', async () => {
    more = new Gate();
    aborted = new Gate();
    const { page, requests } = await open('/held-chat/playground/');
    await page.getByRole('button', { name: 'New session' }).click();
    await page.getByLabel('Message').fill('tell me');
    await page.getByLabel('Message').press('Enter');
    await page.locator('.bubble.ai').getByText('w4', { exact: false }).waitFor();
    await page.reload();
    // The turn is back, its answer so far replayed from the run's log, still streaming.
    await page.locator('.bubble.ai.streaming').getByText('w4', { exact: false }).waitFor();
    expect(await page.locator('.bubble.human').allInnerTexts()).toEqual(['tell me']);
    more.open();
    await page.locator('.bubble.streaming').waitFor({ state: 'detached' });
    await page.locator('.bubble.ai').getByText('w9', { exact: false }).waitFor();
    expect((await page.locator('.bubble').allInnerTexts()).map((text) => text.trim())).toEqual(['tell me', 'w0 w1 w2 w3 w4 w5 w6 w7 w8 w9']);
    // One run, followed again by its id: never sent twice.
    expect(posts(requests, '/held-chat/stream_events')).toHaveLength(1);
    expect(requests.some((r) => /^\/held-chat\/runs\/[^/]+\/stream$/.test(new URL(r.url()).pathname))).toBe(true);
    // A reload after it ended shows the conversation once, from the history.
    await page.reload();
    await page.locator('.bubble').nth(1).waitFor();
    expect((await page.locator('.bubble').allInnerTexts()).map((text) => text.trim())).toEqual(['tell me', 'w0 w1 w2 w3 w4 w5 w6 w7 w8 w9']);
    await page.close();
  });

  it('waits for JSON being fixed before it runs, and keeps that text across the tabs', async () => {
    const { page, requests } = await open('/echo/playground/');
    await page.locator('#f-topic').fill('dogs');
    await page.getByRole('button', { name: 'JSON' }).click();
    const json = page.getByLabel('Input as JSON');
    await json.fill('{"topic": "penguins"');
    await page.getByRole('button', { name: 'Run' }).click();
    expect(await page.locator('.status').innerText()).toContain('not valid JSON');
    // The text being fixed survives a look at the form.
    await page.getByRole('button', { name: 'Form' }).click();
    await page.getByRole('button', { name: 'JSON' }).click();
    expect(await json.inputValue()).toBe('{"topic": "penguins"');
    // A value of the wrong type shows on the form as it is, not as an empty field.
    await json.fill('{"topic": 5}');
    await page.getByRole('button', { name: 'Form' }).click();
    expect(await page.locator('#f-topic').inputValue()).toBe('5');
    await page.getByRole('button', { name: 'JSON' }).click();
    await json.fill('{"topic": "penguins"}');
    // Fixed: the status no longer says it is broken, before any Run.
    expect(await page.locator('.status').innerText()).toBe('');
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('.status', { hasText: 'Done' }).waitFor();
    // One run, with the fixed input (the click on the broken JSON sent nothing).
    const sent = posts(requests, '/echo/stream_events');
    expect(sent).toHaveLength(1);
    expect(JSON.parse(sent[0]?.postData() ?? '{}')).toMatchObject({ input: { topic: 'penguins' } });
    await page.close();
  });

  it('catches a message the server would refuse in the browser, and shows it on its row without breaking the row', async () => {
    const { page, requests } = await open('/echo/playground/');
    await page.getByRole('button', { name: 'JSON' }).click();
    await page.getByLabel('Input as JSON').fill('{"topic": "t", "chat_history": [["robot", "beep"]]}');
    await page.getByRole('button', { name: 'Form' }).click();
    // The row shows the message as it is: its role, its text.
    const row = page.locator('.message-row').first();
    expect(await row.getByLabel('Role').inputValue()).toBe('robot');
    expect(await row.getByLabel('Content').inputValue()).toBe('beep');
    await page.getByRole('button', { name: 'Run' }).click();
    expect(await page.locator('.status').innerText()).toBe('Fix the highlighted fields');
    const errors = await row.locator('.field-error').allInnerTexts();
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.length).toBeLessThanOrEqual(4);
    expect(new Set(errors).size).toBe(errors.length);
    // It names what is wrong: the role, not "must be object" (the closest alternative is the one of the value's type).
    expect(errors.join(' ')).toContain('chat_history.0.0: must be one of "human"');
    // The errors go under the role and text, which keep their width.
    const content = await row.getByLabel('Content').boundingBox();
    expect(content?.width ?? 0).toBeGreaterThan(100);
    await page.screenshot({ path: `${ARTIFACTS}playground-message-row-error.png` });
    // Fixing the role clears the row's errors and runs.
    await row.getByLabel('Role').selectOption('human');
    expect(await row.locator('.field-error').count()).toBe(0);
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('.status', { hasText: 'Done' }).waitFor();
    expect(posts(requests, '/echo/stream_events')).toHaveLength(1);
    expect(JSON.parse(posts(requests, '/echo/stream_events')[0]?.postData() ?? '{}')).toMatchObject({ input: { chat_history: [['human', 'beep']] } });
    // In OpenAI's form, too, it names the bad role — not a `type` the message was never meant to have.
    await page.getByRole('button', { name: 'JSON' }).click();
    await page.getByLabel('Input as JSON').fill('{"topic": "t", "chat_history": [{"role": "robot", "content": "beep"}]}');
    await page.getByRole('button', { name: 'Form' }).click();
    await page.getByRole('button', { name: 'Run' }).click();
    const roleErrors = (await page.locator('.message-row').first().locator('.field-error').allInnerTexts()).join(' ');
    expect(roleErrors).toContain('chat_history.0.role: must be one of "user"');
    expect(roleErrors).not.toContain('type');
    // A type none of the forms takes: every type they take is named (a probe: only the first form's two were).
    await page.getByRole('button', { name: 'JSON' }).click();
    await page.getByLabel('Input as JSON').fill('{"topic": "t", "chat_history": [{"type": "alien", "content": "x"}]}');
    await page.getByRole('button', { name: 'Form' }).click();
    await page.getByRole('button', { name: 'Run' }).click();
    const typeErrors = (await page.locator('.message-row').first().locator('.field-error').allInnerTexts()).join(' ');
    for (const type of ['"human"', '"ai"', '"system"']) expect(typeErrors).toContain(type);
    await page.close();
  });

  it('edits a message in its own form: a tuple stays a tuple, and fields the row does not show are kept', async () => {
    const { page } = await open('/echo/playground/');
    await page.getByRole('button', { name: 'JSON' }).click();
    const image = { type: 'image_url', image_url: 'https://example.com/cat.png' };
    const history = [{ type: 'ai', content: 'x', name: 'bot', id: 'm1' }, ['user', 'hi'], 'plain', { role: 'user', content: null }, { type: 'human', content: [{ type: 'text', text: 'part one' }, image] }];
    await page.getByLabel('Input as JSON').fill(JSON.stringify({ topic: 't', chat_history: history }));
    await page.getByRole('button', { name: 'Form' }).click();
    const rows = page.locator('.message-row');
    // OpenAI's role names show as the rows' own.
    expect(await rows.nth(1).getByLabel('Role').inputValue()).toBe('human');
    await rows.nth(0).getByLabel('Content').fill('y');
    await rows.nth(1).getByLabel('Content').fill('hey');
    await rows.nth(2).getByLabel('Role').selectOption('system');
    // No content shows empty, and a list of parts shows its text; an edit keeps the parts that are not text
    // (a probe: null showed as "", and one keystroke made the list a string, the image gone).
    expect(await rows.nth(3).getByLabel('Content').inputValue()).toBe('');
    expect(await rows.nth(4).getByLabel('Content').inputValue()).toBe('part one');
    await rows.nth(3).getByLabel('Content').fill('hi');
    await rows.nth(4).getByLabel('Content').fill('part one, edited');
    await page.getByRole('button', { name: 'JSON' }).click();
    expect(JSON.parse(await page.getByLabel('Input as JSON').inputValue())).toEqual({
      topic: 't',
      chat_history: [
        { type: 'ai', content: 'y', name: 'bot', id: 'm1' },
        ['user', 'hey'],
        { type: 'system', content: 'plain' },
        { role: 'user', content: 'hi' },
        { type: 'human', content: [{ type: 'text', text: 'part one, edited' }, image] },
      ],
    });
    await page.close();
  });

  it('adding or removing a row keeps what was typed in the others', async () => {
    const { page } = await open('/echo/playground/');
    await page.locator('#f-topic').fill('t');
    await page.getByRole('button', { name: 'Add message' }).click();
    await page.locator('.message-row').nth(0).getByLabel('Content').fill('first');
    await page.getByRole('button', { name: 'Add message' }).click();
    await page.locator('.message-row').nth(1).getByLabel('Content').fill('second');
    expect(await page.locator('.message-row').nth(0).getByLabel('Content').inputValue()).toBe('first');
    await page.locator('.message-row').nth(0).getByRole('button', { name: 'Remove' }).click();
    await page.getByRole('button', { name: 'JSON' }).click();
    expect(JSON.parse(await page.getByLabel('Input as JSON').inputValue())).toEqual({ topic: 't', chat_history: [{ type: 'human', content: 'second' }] });
    await page.close();
  });

  it('an optional object, once filled in, can be left out again', async () => {
    const { page } = await open('/address/playground/');
    await page.locator('#f-name').fill('Ada');
    await page.locator('#f-address_street').fill('x');
    await page.getByRole('button', { name: 'Leave out address' }).click();
    await page.getByRole('button', { name: 'JSON' }).click();
    expect(JSON.parse(await page.getByLabel('Input as JSON').inputValue())).toEqual({ name: 'Ada' });
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('.status', { hasText: 'Done' }).waitFor();
    await page.close();
  });

  it('a notice about an unreadable link goes when a good link replaces it', async () => {
    const { page } = await open('/echo/playground/#input=AAAA');
    await page.locator('.notice').waitFor();
    const good = await page.evaluate(`(async () => { location.hash = 'input=' + ${JSON.stringify(LZString.compressToEncodedURIComponent(JSON.stringify({ topic: 'from the link' })))}; })()`);
    expect(good).toBeUndefined();
    await page.locator('.notice').waitFor({ state: 'detached' });
    expect(await page.locator('#f-topic').inputValue()).toBe('from the link');
    await page.close();
  });

  it('on a 375-pixel screen, never scrolls sideways after a run; text and markdown show an object by its fields', async () => {
    const { page } = await open('/answer/playground/', { width: 375, height: 740 });
    await page.locator('#f-question').fill('where?');
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('.status', { hasText: 'Done' }).waitFor();
    await page.locator('li[data-run-name="/answer"] summary').first().click();
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(375);
    await page.screenshot({ path: `${ARTIFACTS}playground-narrow.png`, fullPage: true });
    // Markdown: the answer rendered (a heading), under its name; the sources as JSON under theirs.
    await page.getByLabel('Render output as').selectOption('markdown');
    expect(await page.locator('.output .io-label').allTextContents()).toEqual(['answer', 'sources']);
    expect(await page.locator('.output h3').innerText()).toBe('Found');
    expect(await page.locator('.output').innerText()).not.toContain('\\n');
    await page.close();
  });

  it('says when a share link cannot be read, instead of showing the defaults as if they were the link', async () => {
    const { page } = await open('/echo/c/garbage!!/playground/#input=AAAA');
    await page.locator('.notice').waitFor();
    expect(await page.locator('.notice').innerText()).toContain('configuration and input could not be read');
    // The unreadable link stays in the address, to be looked at.
    expect(page.url()).toContain('/echo/c/garbage!!/playground/');
    await page.close();
    // A page opened without a link holds its setup in the address from the start, not only after an edit.
    const { page: plain } = await open('/echo/playground/');
    await plain.locator('#f-topic').waitFor();
    expect(new URL(plain.url()).pathname).toMatch(/^\/echo\/c\/[^/]+\/playground\/$/);
    expect(new URL(plain.url()).hash).toMatch(/^#input=/);
    await plain.close();
    // A chain without config hashes has no /c/…/playground/: its address keeps the input only, and reloads.
    const { page: nohash } = await open('/nohash/playground/');
    await nohash.locator('#f-topic').fill('kept');
    expect(new URL(nohash.url()).pathname).toBe('/nohash/playground/');
    const reloaded = await nohash.reload();
    expect(reloaded?.status()).toBe(200);
    expect(await nohash.locator('#f-topic').inputValue()).toBe('kept');
    await nohash.close();
  });

  // A trial: a link whose configuration named a setting the chain does not have was refused at every Run, and
  // the page had no field to clear it with.
  it('leaves out, and names, settings of a link that the chain does not have; the run then goes through', async () => {
    const config = LZString.compressToEncodedURIComponent(JSON.stringify({ configurable: { temperature: 1, temprature: 0.2 } }));
    const input = LZString.compressToEncodedURIComponent(JSON.stringify({ topic: 'typos' }));
    const { page, problems } = await open(`/tuned/c/${config}/playground/#input=${input}`);
    await page.locator('.notice').waitFor();
    expect(await page.locator('.notice').innerText()).toContain('has settings this chain does not have (temprature): they were left out');
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('.status', { hasText: 'Done' }).waitFor();
    expect(await page.locator('.output').innerText()).toContain('tuned answer');
    // The setting the chain has was kept, and is in the address with the input.
    const kept = JSON.parse(LZString.decompressFromEncodedURIComponent(/\/c\/([^/]+)\/playground/.exec(page.url())?.[1] ?? '') ?? '{}') as unknown;
    expect(kept).toEqual({ configurable: { temperature: 1 } });
    expect(problems).toEqual([]);
    await page.close();
  });

  it('Stop while offline says "Stopping…" until the cancel reaches the server, then "Stopped"', async () => {
    const page = await heldRun();
    const setOffline = await network(page);
    await setOffline(true);
    await page.getByRole('button', { name: 'Stop' }).click();
    await page.locator('.status', { hasText: 'waiting for the connection' }).waitFor();
    expect(await page.locator('.status').innerText()).not.toBe('Stopped');
    await setOffline(false);
    await aborted.opened;
    await page.locator('.status', { hasText: /^Stopped$/ }).waitFor();
    await page.close();
  });

  it('keeps a step the person opened open, the same element, while the run streams on', async () => {
    const page = await heldRun();
    const step = page.locator('li[data-run-name="/held"] > details').first();
    await step.locator('summary').click();
    const opened = await step.elementHandle();
    more.open();
    await page.locator('.status', { hasText: 'Done' }).waitFor();
    expect(await opened?.evaluate((el) => el.isConnected && (el as unknown as { open: boolean }).open)).toBe(true);
    expect(await step.locator('pre').nth(1).innerText()).toContain('w9');
    await page.close();
  });
});
