/**
 * Issue 16: `useChat` from `@ai-sdk/react`, in Chromium, against Runnel's
 * `/ui_stream` — the frontend most chat apps are written with. The page
 * (test/frontends/use-chat-page/) is built with Vite's `build()` once per run
 * and served from an origin of its own, as a Next or Vite app would be: the
 * app lists that origin in `corsOrigins` (RUNNEL_CORS_ORIGINS) and asks for
 * an API key, so every chat request is a CORS request with a preflight and a
 * bearer token.
 *
 * The shipped `/chat` chain answers with the offline model, which quotes the
 * conversation's first message: the second answer proves the server kept the
 * conversation under the chat's id. Every wait is on a page state or a gate
 * the chain opens, never on the clock.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Browser, Page, Request } from 'playwright-core';
import { build } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { chatChain } from '../../chains/chat.js';
import { lastUserText } from '../../chains/model.js';
import { buildApp, defineChain, lambda, type ChainSpec } from '../../src/index.js';
import { openWatched, recordAnswers, serveToBrowser, temporaryServices } from '../playground/browser.js';

const KEY = 'k_use_chat_0123456789abcdef';
const PAGE_SOURCE = fileURLToPath(new URL('./use-chat-page/', import.meta.url));

/** A promise the test resolves. */
class Gate {
  open!: () => void;
  readonly opened = new Promise<void>((resolve) => (this.open = resolve));
}

/** Opens when the `/endless` run's signal aborts on the server. */
let aborted = new Gate();

async function* fiveWordsThenWait(signal: AbortSignal | undefined): AsyncGenerator<string> {
  for (let i = 0; i < 5; i++) yield `w${i} `;
  await new Promise<void>((resolve) => {
    if (signal?.aborted) resolve();
    signal?.addEventListener('abort', () => resolve(), { once: true });
  });
  aborted.open();
}

/** Opened by the test once the page's reconnect is answered: `/halves` then streams its second half. */
let secondHalf = new Gate();

async function* fiveWordsWaitFiveMore(): AsyncGenerator<string> {
  for (let i = 0; i < 5; i++) yield `w${i} `;
  await secondHalf.opened;
  for (let i = 5; i < 10; i++) yield `w${i} `;
}

/** Streams five words, then five more once the test opens its gate. */
const halves = defineChain({
  path: '/halves',
  description: 'Streams 5 words, waits, streams 5 more',
  runnable: lambda((_input: { topic: string }) => fiveWordsWaitFiveMore(), { input: z.object({ topic: z.string() }) }),
  messages: { toInput: ({ turns }) => ({ input: { topic: lastUserText(turns) } }) },
});

/** A TCP relay to `port` whose connections `cut()` resets: a network that drops mid-answer, as a phone's does. */
async function relay(port: number): Promise<{ origin: string; cut: () => void; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = createConnection(port, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => undefined).on('close', () => sockets.delete(socket));
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    cut: () => sockets.forEach((socket) => socket.resetAndDestroy()),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Streams five words, then waits until its request is aborted. */
const endless = defineChain({
  path: '/endless',
  description: 'Streams 5 words, then waits to be stopped',
  runnable: lambda((_input: { topic: string }, config) => fiveWordsThenWait(config.signal), { input: z.object({ topic: z.string() }) }),
  messages: { toInput: ({ turns }) => ({ input: { topic: lastUserText(turns) } }) },
});

let outDir = '';
let pageServer: FastifyInstance | undefined;
let pageOrigin = '';
let app: FastifyInstance | undefined;
let browser: Browser | undefined;
let base = '';
let answered: ReturnType<typeof recordAnswers> = [];
let dispose: (() => Promise<void>) | undefined;

beforeAll(async () => {
  outDir = mkdtempSync(join(tmpdir(), 'runnel-use-chat-'));
  await build({
    root: PAGE_SOURCE,
    base: './',
    configFile: false,
    envDir: false,
    logLevel: 'warn',
    mode: 'production',
    build: {
      outDir,
      emptyOutDir: true,
      sourcemap: false,
      modulePreload: { polyfill: false },
      // One ~500 kB bundle is what a test page should be; swr's "use client" means nothing outside React Server Components.
      chunkSizeWarningLimit: 2_000,
      rolldownOptions: { onwarn: (warning, warn) => void (warning.code === 'MODULE_LEVEL_DIRECTIVE' ? undefined : warn(warning)) },
    },
  });

  // The page's own origin: a static server of the built files.
  pageServer = Fastify();
  await pageServer.register(fastifyStatic, { root: outDir });
  await pageServer.listen({ port: 0, host: '127.0.0.1' });
  pageOrigin = `http://127.0.0.1:${(pageServer.server.address() as AddressInfo).port}`;

  const temporary = await temporaryServices();
  dispose = temporary.dispose;
  const context = { services: temporary.services, env: {}, offlineDelayMs: 0 };
  const chains = [chatChain(context), endless, halves] as ChainSpec<never, unknown>[];
  app = await buildApp({ chains, config: { apiKeys: [{ name: 'tester', key: KEY }], corsOrigins: [pageOrigin] } });
  answered = recordAnswers(app);
  ({ base, browser } = await serveToBrowser(app));
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await app?.close();
  await pageServer?.close();
  await dispose?.();
  if (outDir !== '') rmSync(outDir, { recursive: true, force: true });
});

/** The page talking to `chain`'s `/ui_stream` as chat `chatId`, and every request it makes. */
async function openChat(chain: string, chatId: string, options: { api?: string; body?: object } = {}): Promise<{ page: Page; problems: string[]; requests: Request[] }> {
  const { page, problems } = await openWatched(browser as Browser, 'about:blank');
  const requests: Request[] = [];
  page.on('request', (request) => void requests.push(request));
  const hash = new URLSearchParams({ api: `${options.api ?? base}${chain}/ui_stream`, key: KEY, chat: chatId });
  if (options.body !== undefined) hash.set('body', JSON.stringify(options.body));
  await page.goto(`${pageOrigin}/index.html#${hash.toString()}`);
  await page.locator('#status', { hasText: 'ready' }).waitFor();
  return { page, problems, requests };
}

/** Sends `text` and waits until the chat is ready again with `turns` assistant messages, or has failed (then says why). */
async function say(page: Page, text: string, turns: number): Promise<void> {
  await page.getByLabel('Message').fill(text);
  await page.getByRole('button', { name: 'Send' }).click();
  await page.locator(`main[data-status=error], main[data-status=ready][data-assistant-messages="${turns}"]`).waitFor();
  expect(await page.locator('#error').innerText()).toBe('');
}

const texts = (page: Page, role: string) => page.locator(`li[data-role=${role}]`).allInnerTexts();

describe('useChat (@ai-sdk/react) against /ui_stream, in Chromium', () => {
  it('keeps the conversation under the chat id: the second answer quotes the first message, as the history says', async () => {
    const chatId = `ada-${randomUUID()}`;
    const { page, problems, requests } = await openChat('/chat', chatId);

    await say(page, 'My name is Ada', 1);
    await say(page, 'What did I say first?', 2);

    expect(await texts(page, 'user')).toEqual(['My name is Ada', 'What did I say first?']);
    const answers = await texts(page, 'assistant');
    expect(answers).toHaveLength(2);
    expect(answers[0]).toContain('“My name is Ada”');
    // The chain gets only the new message (useChat sends them all): the first can only come from the history kept under the chat id.
    expect(answers[1]).toContain('“What did I say first?”');
    expect(answers[1]).toContain('“My name is Ada”');
    expect(await page.locator('#error').innerText()).toBe('');

    // The server's record of the session is what the page shows.
    const res = await fetch(`${base}/chat/history/${encodeURIComponent(chatId)}`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(res.status).toBe(200);
    const history = (await res.json()) as { session_id: string; messages: { type: string; content: unknown }[] };
    expect(history.session_id).toBe(chatId);
    expect(history.messages.map((m) => [m.type, m.content])).toEqual([
      ['human', 'My name is Ada'],
      ['ai', answers[0]],
      ['human', 'What did I say first?'],
      ['ai', answers[1]],
    ]);

    // Two cross-origin POSTs with the key, named by the chat's id; the browser asked CORS first (the preflight carries no key).
    const posts = requests.filter((r) => r.url() === `${base}/chat/ui_stream`);
    expect(posts.map((r) => r.method())).toEqual(['POST', 'POST']);
    for (const request of posts) {
      expect(await request.headerValue('authorization')).toBe(`Bearer ${KEY}`);
      expect((request.postDataJSON() as { id: string }).id).toBe(chatId);
    }
    const atServer = answered.filter((a) => a.url === '/chat/ui_stream');
    expect(atServer[0]).toEqual({ method: 'OPTIONS', url: '/chat/ui_stream', status: 204 });
    expect(atServer.filter((a) => a.method === 'POST').map((a) => a.status)).toEqual([200, 200]);
    expect(problems).toEqual([]);
    await page.close();
  });

  it('stop() mid-stream aborts the request: the chain sees its signal fire, the page keeps the words so far', async () => {
    aborted = new Gate();
    const { page, problems } = await openChat('/endless', `stop-${randomUUID()}`);
    await page.getByLabel('Message').fill('go on');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.locator('main[data-status=error]').or(page.locator('li[data-role=assistant]', { hasText: 'w4' })).waitFor();
    expect(await page.locator('#error').innerText()).toBe('');
    expect(await page.locator('#status').innerText()).toBe('streaming');

    await page.getByRole('button', { name: 'Stop' }).click();
    await aborted.opened;
    await page.locator('#status', { hasText: 'ready' }).waitFor();
    expect(await texts(page, 'assistant')).toEqual(['w0 w1 w2 w3 w4']);
    expect(await page.locator('#error').innerText()).toBe('');
    // The stream the page aborted on purpose is the only failed request.
    expect(problems.filter((p) => !/^failed: .*\/endless\/ui_stream net::ERR_ABORTED/.test(p))).toEqual([]);
    await page.close();
  });

  // The page makes its `Chat` and gives it to `useChat`, as docs/frontends.md says: with `useChat({ transport })`
  // this showed 'w0 w1 w2 w3 w4 w0 w1 … w9' and stayed `streaming` (the wrapper useChat puts round the transport
  // drops its `resumeStreamIsReplay`, so the replay was added to the part already shown).
  it('a dropped connection mid-answer of a durable run: resumeStream() shows the answer once, whole', async () => {
    secondHalf = new Gate();
    const network = await relay(Number(new URL(base).port));
    try {
      const chatId = `drop-${randomUUID()}`;
      const { page, problems } = await openChat('/halves', chatId, { api: network.origin, body: { on_disconnect: 'continue' } });
      await page.getByLabel('Message').fill('go on');
      await page.getByRole('button', { name: 'Send' }).click();
      await page.locator('main[data-status=error]').or(page.locator('li[data-role=assistant]', { hasText: 'w4' })).waitFor();
      expect(await page.locator('#error').innerText()).toBe('');

      // The connection drops: the browser says it as a network error, and the run goes on on the server.
      network.cut();
      await page.locator('main[data-status=error]').waitFor();
      expect(await texts(page, 'assistant')).toEqual(['w0 w1 w2 w3 w4']);

      // The reconnect replays the message from its start; the rest streams once the replay has begun.
      const reconnected = page.waitForResponse((response) => response.url() === `${network.origin}/halves/ui_stream/${chatId}/stream`);
      await page.getByRole('button', { name: 'Resume' }).click();
      expect((await reconnected).status()).toBe(200);
      secondHalf.open();
      await page.locator('main[data-status=ready]').waitFor();
      expect(await page.locator('#error').innerText()).toBe('');
      expect(await texts(page, 'assistant')).toEqual(['w0 w1 w2 w3 w4 w5 w6 w7 w8 w9']);
      // The cut stream is the only failed request (the browser also logs it on the console).
      expect(problems.filter((p) => p !== `failed: ${network.origin}/halves/ui_stream net::ERR_CONNECTION_RESET` && p !== 'console: Failed to load resource: net::ERR_CONNECTION_RESET')).toEqual([]);
      await page.close();
    } finally {
      secondHalf.open();
      await network.close();
    }
  });
});
