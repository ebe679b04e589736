/**
 * The playground across a network drop (issue 15): its runs are durable
 * (`on_disconnect: "continue"`), so when the browser loses the network
 * mid-run the page says it is reconnecting, rejoins the run with
 * `Last-Event-ID` once the network is back, and ends with exactly the
 * chain's answer — no token lost, none twice. Stop cancels the run on the
 * server, since closing the connection no longer does.
 *
 * The chains are held at gates the test opens, so every step waits on an
 * event (a page state, a chain reaching a point), never on the clock. The
 * server asks for an API key, and the run starts from a shared
 * `/c/{config}/playground/` link: the rejoin and the cancel carry the key and
 * resolve against the chain, not the page's address.
 */
import { createServer, request as forward } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import LZString from 'lz-string';
import type { Browser, Page, Request } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { buildApp, defineChain, lambda } from '../../src/index.js';
import { network, serveToBrowser, openWatched } from './browser.js';

const KEY = 'k_reconnect_0123456789abcdef';
const WORDS = Array.from({ length: 60 }, (_, i) => `w${i}`);
const ANSWER = WORDS.join(' ');

/** A promise the test resolves. */
class Gate {
  open!: () => void;
  readonly opened = new Promise<void>((resolve) => (this.open = resolve));
}

/** The gates of the current `/gated` run: words 10… wait for `more`, the end for `end`; `atEnd` opens when the chain waits there. */
let gates = { more: new Gate(), end: new Gate(), atEnd: new Gate() };
/** The `/endless` run: opens when the run's signal aborts on the server. */
let aborted = new Gate();

async function* gatedWords(): AsyncGenerator<string> {
  for (const [i, word] of WORDS.entries()) {
    if (i === 10) await gates.more.opened;
    yield i === 0 ? word : ` ${word}`;
  }
  gates.atEnd.open();
  await gates.end.opened;
}

async function* endlessWords(signal: AbortSignal | undefined): AsyncGenerator<string> {
  for (const word of WORDS.slice(0, 5)) yield `${word} `;
  await new Promise<void>((resolve) => signal?.addEventListener('abort', () => resolve(), { once: true }));
  aborted.open();
}

const topic = z.object({ topic: z.string() });
const chains = [
  defineChain({ path: '/gated', description: 'Streams 60 words, held at gates the test opens', runnable: lambda((_input: { topic: string }) => gatedWords(), { input: topic }) }),
  defineChain({ path: '/endless', description: 'Streams 5 words, then waits to be cancelled', runnable: lambda((_input: { topic: string }, config) => endlessWords(config.signal), { input: topic }) }),
];

let app: FastifyInstance;
let browser: Browser;
let base = '';

beforeAll(async () => {
  // No services: the runs go to the in-process queue.
  app = await buildApp({ chains: chains as never, config: { apiKeys: [{ name: 'tester', key: KEY }] } });
  ({ base, browser } = await serveToBrowser(app));
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await app?.close();
});

/** The page at `path`, with the API key in its session storage as the key panel leaves it. */
async function openKeyed(path: string, origin = base): Promise<{ page: Page; problems: string[]; requests: Request[] }> {
  const { page, problems } = await openWatched(browser, 'about:blank');
  await page.addInitScript((key) => sessionStorage.setItem('runnel:api-key', key), KEY);
  const requests: Request[] = [];
  page.on('request', (request) => void requests.push(request));
  await page.goto(`${origin}${path}`);
  return { page, problems, requests };
}

const asText = (page: Page) => page.getByLabel('Render output as').selectOption('text');
const output = (page: Page) => page.locator('.output').innerText();

describe('the playground across a network drop', () => {
  it('shows "reconnecting…" while offline, rejoins with Last-Event-ID, and ends with exactly the answer', async () => {
    gates = { more: new Gate(), end: new Gate(), atEnd: new Gate() };
    const config = LZString.compressToEncodedURIComponent(JSON.stringify({ configurable: {} }));
    const input = LZString.compressToEncodedURIComponent(JSON.stringify({ topic: 'tunnels' }));
    const { page, problems, requests } = await openKeyed(`/gated/c/${config}/playground/#input=${input}`);
    expect(await page.locator('#f-topic').inputValue()).toBe('tunnels');
    await asText(page);
    await page.getByRole('button', { name: 'Run' }).click();
    // The chain holds at word 10: ten words are on the page.
    await page.locator('.output').getByText('w9', { exact: false }).waitFor();
    expect(await output(page)).toBe(WORDS.slice(0, 10).join(' '));

    // Chromium's offline emulation fails new requests but leaves a response that is already streaming alone;
    // the page cuts its stream itself when the browser says it went offline (a dead socket may never fail).
    const setOffline = await network(page);
    await setOffline(true);
    await page.locator('.status', { hasText: /reconnecting…/i }).waitFor();
    // The rest of the answer is produced while the browser is offline: it waits in the run's log.
    gates.more.open();
    await gates.atEnd.opened;
    expect(await output(page)).toBe(WORDS.slice(0, 10).join(' '));

    await setOffline(false);
    await page.locator('.status', { hasText: 'Running…' }).waitFor();
    // Every token streamed, none twice, before the chain's final output replaces them.
    await page.locator('.output').getByText('w59', { exact: false }).waitFor();
    expect(await output(page)).toBe(ANSWER);
    expect(await page.getByRole('button', { name: 'Stop' }).isEnabled()).toBe(true);
    gates.end.open();
    await page.locator('.status', { hasText: 'Done' }).waitFor();
    expect(await output(page)).toBe(ANSWER);
    await expect(page.locator('li[data-run-name="/gated"]').count()).resolves.toBe(1);
    // Its duration here would count the outage (events carry no times): a trial read one as the chain's. None shown.
    expect(await page.locator('li[data-run-name="/gated"] .run-time').first().innerText()).toBe('time unknown (reconnected)');

    // One run (never submitted twice), rejoined by its id after the last frame seen, with the key, at the chain's URL.
    const posts = requests.filter((r) => r.method() === 'POST');
    expect(posts.map((r) => new URL(r.url()).pathname)).toEqual(['/gated/stream_events']);
    expect(JSON.parse(posts[0]?.postData() ?? '{}')).toMatchObject({ input: { topic: 'tunnels' }, on_disconnect: 'continue' });
    const rejoins = requests.filter((r) => /^\/gated\/runs\/[^/]+\/stream$/.test(new URL(r.url()).pathname));
    expect(rejoins.length).toBeGreaterThan(0);
    for (const rejoin of rejoins) {
      const headers = await rejoin.allHeaders();
      expect(headers['last-event-id']).toMatch(/\S/);
      expect(headers['x-api-key']).toBe(KEY);
    }
    const runId = /\/runs\/([^/]+)\/stream$/.exec(rejoins[0]?.url() ?? '')?.[1];
    const record = (await (await fetch(`${base}/gated/runs/${runId}/wait?timeout_s=10`, { headers: { 'x-api-key': KEY } })).json()) as { status: string };
    expect(record.status).toBe('success');
    // Nothing went wrong but the requests of the outage: the stream the page cut when the browser went offline, and rejoins that found no network.
    const outage = /^failed: .*\/gated\/(stream_events net::ERR_ABORTED|stream_events net::ERR_INTERNET_DISCONNECTED|runs\/[^/]+(\/stream)? net::ERR_INTERNET_DISCONNECTED)$/;
    expect(problems.filter((p) => !outage.test(p))).toEqual([]);
    await page.close();
  });

  it('a stream that ends without its end frame (a gateway closing it) is rejoined too, under a prefix', async () => {
    gates = { more: new Gate(), end: new Gate(), atEnd: new Gate() };
    // A gateway serving the app under /team/runnel/ that the test can cut: open responses end cleanly mid-stream
    // (the body just ends), and new connections are dropped until it heals.
    let down = false;
    const open = new Set<() => void>();
    const proxy = createServer((req, res) => {
      if (down || !req.url?.startsWith('/team/runnel/')) {
        req.socket.destroy();
        return;
      }
      const upstream = forward(`${base}${req.url.slice('/team/runnel'.length)}`, { method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
        const cut = (): void => {
          answer.unpipe(res);
          upstream.destroy();
          res.end();
        };
        open.add(cut);
        res.on('close', () => open.delete(cut));
      });
      upstream.on('error', () => res.destroy());
      req.pipe(upstream);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    try {
      const { page, problems, requests } = await openKeyed(`/team/runnel/gated/playground/`, `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`);
      await page.locator('#f-topic').fill('gateways');
      await asText(page);
      await page.getByRole('button', { name: 'Run' }).click();
      await page.locator('.output').getByText('w9', { exact: false }).waitFor();

      down = true;
      for (const cut of open) cut();
      await page.locator('.status', { hasText: /reconnecting…/i }).waitFor();
      gates.more.open();
      await gates.atEnd.opened;
      down = false;
      await page.locator('.output').getByText('w59', { exact: false }).waitFor();
      expect(await output(page)).toBe(ANSWER);
      gates.end.open();
      await page.locator('.status', { hasText: 'Done' }).waitFor();
      expect(await output(page)).toBe(ANSWER);
      expect(requests.filter((r) => r.method() === 'POST').map((r) => new URL(r.url()).pathname)).toEqual(['/team/runnel/gated/stream_events']);
      expect(requests.every((r) => new URL(r.url()).pathname.startsWith('/team/runnel/'))).toBe(true);
      // The only failures: rejoins while the gateway was down.
      expect(problems.filter((p) => !/^failed: .*\/gated\/runs\/[^/]+\/stream net::ERR_(EMPTY_RESPONSE|CONNECTION_(RESET|CLOSED))$/.test(p))).toEqual([]);
      await page.close();
    } finally {
      proxy.closeAllConnections();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    }
  });

  it('Stop cancels the run on the server', async () => {
    aborted = new Gate();
    const { page, problems } = await openKeyed('/endless/playground/');
    await page.locator('#f-topic').fill('waiting');
    await asText(page);
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('.output').getByText('w4', { exact: false }).waitFor();
    const cancel = page.waitForRequest((r) => r.method() === 'POST' && /\/endless\/runs\/[^/]+\/cancel$/.test(r.url()));
    await page.getByRole('button', { name: 'Stop' }).click();
    const request = await cancel;
    expect(await request.headerValue('x-api-key')).toBe(KEY);
    await page.locator('.status', { hasText: 'Stopped' }).waitFor();
    // The chain saw its signal abort, and the run's record says why.
    await aborted.opened;
    const runId = /\/runs\/([^/]+)\/cancel$/.exec(request.url())?.[1];
    const record = (await (await fetch(`${base}/endless/runs/${runId}/wait?timeout_s=10`, { headers: { 'x-api-key': KEY } })).json()) as { status: string; error?: { code: string } };
    expect(record).toMatchObject({ status: 'cancelled', error: { code: 'RUNNEL_ERR_RUN_CANCELLED' } });
    expect(await page.locator('.errors').innerText()).toBe('');
    expect(await page.getByRole('button', { name: 'Run' }).isEnabled()).toBe(true);
    // The stream the page closed on purpose is the only failed request.
    expect(problems.filter((p) => !/^failed: .*\/endless\/stream_events net::ERR_ABORTED/.test(p))).toEqual([]);
    await page.close();
  });
});
