/**
 * The playground in a real browser (Debian's Chromium through
 * playwright-core) against a real listening server: the shipped chains plus
 * a few test chains (a slow one, a typed one, one whose model answers with
 * HTML). Screenshots go to test/artifacts/ for a person to look at.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import LZString from 'lz-string';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createChains } from '../../chains/index.js';
import { buildApp, ChatPromptTemplate, connectServices, defineChain, FakeListChatModel, lambda, RunnelError, StringOutputParser, type Services } from '../../src/index.js';
import { network } from './browser.js';

const ARTIFACTS = new URL('../artifacts/', import.meta.url).pathname;
const XSS = '<img src=x onerror="window.pwned = 1"> **bold** <script>window.pwned = 2</script> [link](javascript:alert(1))';

let app: FastifyInstance;
let services: Services;
// Its own embedded database: PGlite serves one process per directory, and another test run may hold ./.runnel.
const dataDir = mkdtempSync(join(tmpdir(), 'runnel-playground-'));
let browser: Browser;
let base = '';

const slowStory = Array.from({ length: 200 }, (_, i) => `word${i}`).join(' ');

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  services = await connectServices({ dataDir });
  const { chains } = createChains({ services, env: {} });
  const prompt = ChatPromptTemplate.fromMessages([['human', 'Tell a story about {topic}']]);
  const typed = defineChain({
    path: '/typed',
    description: 'Echoes a typed order',
    runnable: lambda((order: { name: string; count: number; size: 'S' | 'M' | 'L'; gift: boolean; tags: string[]; address: { city: string } }) => order, {
      input: z.object({
        name: z.string().min(1),
        count: z.number().int().min(1).max(5),
        size: z.enum(['S', 'M', 'L']),
        gift: z.boolean(),
        tags: z.array(z.string()),
        address: z.object({ city: z.string() }),
      }),
    }),
  });
  app = await buildApp({
    chains: [
      ...chains,
      defineChain({ path: '/slow', description: 'Streams slowly', runnable: prompt.pipe(new FakeListChatModel({ responses: [slowStory], sleepMs: 40 })).pipe(new StringOutputParser()) }),
      defineChain({ path: '/html', description: 'Answers with HTML', runnable: prompt.pipe(new FakeListChatModel({ responses: [XSS] })).pipe(new StringOutputParser()) }),
      typed,
      defineChain({
        path: '/fails',
        description: 'Fails after it starts',
        runnable: lambda(
          (input: { text: string }) => {
            throw new RunnelError('RUNNEL_ERR_OUTPUT_PARSE', `Could not parse ${input.text.length} characters`);
          },
          { input: z.object({ text: z.string() }) },
        ),
      }),
    ],
    services,
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await app?.close();
  await services?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

/** The shipped chains behind an API key, and a page of theirs opened with the key given in its key panel. */
async function keyedServer(): Promise<{ app: FastifyInstance; openWithKey(path: string): Promise<Page> }> {
  const keyed = await buildApp({ chains: createChains({ services, env: {} }).chains, services, config: { apiKeys: [{ name: 'tester', key: 'k_playground_0123456789' }] } });
  await keyed.listen({ port: 0, host: '127.0.0.1' });
  return {
    app: keyed,
    openWithKey: async (path) => {
      const page = await browser.newPage();
      await page.goto(`http://127.0.0.1:${(keyed.server.address() as AddressInfo).port}${path}`);
      await page.getByLabel('API key').fill('k_playground_0123456789');
      await page.getByRole('button', { name: 'Use key' }).click();
      return page;
    },
  };
}

/** Runs /slow on `topic` in `page` and waits until its first words are shown. */
async function runSlow(page: Page, topic: string): Promise<void> {
  await page.locator('#f-topic').fill(topic);
  await page.getByRole('button', { name: 'Run' }).click();
  await page.locator('.output').getByText('word2', { exact: false }).waitFor();
}

async function open(path: string): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(error.message));
  page.on('console', (message) => {
    // A CSP violation shows as a console error: the page must cause none.
    if (message.type() === 'error' && /Content Security Policy/.test(message.text())) problems.push(message.text());
  });
  (page as Page & { problems: string[] }).problems = problems;
  await page.goto(`${base}${path}`);
  return page;
}

describe('the playground', () => {
  it('the index lists the chains with links to their playgrounds', async () => {
    const page = await open('/');
    for (const path of ['/joke', '/chat', '/rag', '/agent', '/extract']) await expect(page.locator(`a[href="${path.slice(1)}/playground/"]`).count()).resolves.toBe(2);
    await page.screenshot({ path: `${ARTIFACTS}index.png`, fullPage: true });
    await page.locator('a[href="joke/playground/"]').first().click();
    await page.waitForURL(/\/joke\/playground\/$/);
    await page.close();
  });

  it('/joke: a form from the schema, a run whose tokens show before it ends, and the steps in the tree', async () => {
    const page = await open('/slow/playground/');
    const topic = page.locator('#f-topic');
    await topic.fill('lighthouses');
    await page.getByRole('button', { name: 'Run' }).click();
    // Tokens are on the page while the run is still going (Stop is enabled until it ends).
    await page.locator('.output').getByText('word3', { exact: false }).waitFor();
    expect(await page.getByRole('button', { name: 'Stop' }).isEnabled()).toBe(true);
    expect(await page.locator('.output').innerText()).not.toContain('word199');
    await page.getByRole('button', { name: 'Stop' }).click();
    await page.close();

    const joke = await open('/joke/playground/');
    await joke.locator('#f-topic').fill('penguins');
    await joke.getByRole('button', { name: 'Run' }).click();
    await joke.locator('.status', { hasText: 'Done' }).waitFor();
    expect(await joke.locator('.output').innerText()).toMatch(/Offline model.*penguins/);
    for (const [name, type] of [
      ['/joke', 'chain'],
      ['ChatPromptTemplate', 'prompt'],
      ['ScriptedChatModel', 'chat_model'],
      ['StrOutputParser', 'parser'],
    ]) {
      await expect(joke.locator(`li[data-run-name="${name}"][data-run-type="${type}"]`).count()).resolves.toBe(1);
    }
    // Input and output on demand.
    await joke.locator('li[data-run-name="ChatPromptTemplate"] > details > summary').click();
    expect(await joke.locator('li[data-run-name="ChatPromptTemplate"] .run-io').innerText()).toContain('penguins');
    await joke.screenshot({ path: `${ARTIFACTS}joke-playground.png`, fullPage: true });
    expect((joke as Page & { problems: string[] }).problems).toEqual([]);
    await joke.close();
  });

  it('shows a schema error on its field and sends no request', async () => {
    const page = await open('/typed/playground/');
    let runs = 0;
    page.on('request', (request) => {
      if (request.method() === 'POST') runs++;
    });
    await page.locator('#f-name').fill('Ada');
    await page.locator('#f-count').fill('9');
    await page.getByRole('button', { name: 'Add item' }).click();
    await page.getByRole('button', { name: 'Run' }).click();
    const error = page.locator('[data-path="count"] .field-error');
    await error.waitFor();
    expect(await error.innerText()).toContain('at most 5');
    expect(runs).toBe(0);
    await page.screenshot({ path: `${ARTIFACTS}typed-playground-error.png`, fullPage: true });
    // Fixed, it runs, and the JSON tab shows the same input.
    await page.locator('#f-count').fill('2');
    await page.locator('select#f-size').selectOption({ label: 'M' });
    await page.locator('#f-address_city').fill('Paris');
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('.status', { hasText: 'Done' }).waitFor();
    const output = JSON.parse(await page.locator('.output pre').innerText()) as Record<string, unknown>;
    expect(output).toEqual({ name: 'Ada', count: 2, size: 'M', gift: false, tags: [''], address: { city: 'Paris' } });
    expect(runs).toBe(1);
    await page.getByRole('button', { name: 'JSON' }).click();
    expect(JSON.parse(await page.locator('textarea.json').first().inputValue())).toEqual(output);
    // The share link reproduces the input.
    const shared = await open(new URL(page.url()).pathname + new URL(page.url()).hash);
    expect(await shared.locator('#f-address_city').inputValue()).toBe('Paris');
    await shared.close();
    await page.close();
  });

  it('edits message lists as role + content rows, and shows a run error with its code', async () => {
    const page = await open('/agent/playground/');
    await page.locator('#f-input').fill('What is 6 * 7?');
    await page.getByRole('button', { name: 'Add message' }).click();
    await page.getByLabel('Role').selectOption('system');
    await page.getByLabel('Content').fill('Answer in French.');
    await page.getByRole('button', { name: 'JSON' }).click();
    expect(JSON.parse(await page.locator('textarea.json').first().inputValue())).toEqual({ input: 'What is 6 * 7?', chat_history: [{ type: 'system', content: 'Answer in French.' }] });
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('.status', { hasText: 'Done' }).waitFor();
    expect(await page.locator('.output').innerText()).toContain('42');
    await expect(page.locator('li[data-run-name="calculator"][data-run-type="tool"]').count()).resolves.toBe(1);
    await page.close();

    const failing = await open('/fails/playground/');
    await failing.locator('#f-text').fill('abc');
    await failing.getByRole('button', { name: 'Run' }).click();
    await failing.locator('.error').waitFor();
    expect(await failing.locator('.error').innerText()).toMatch(/RUNNEL_ERR_OUTPUT_PARSE \(\d+\) Could not parse 3 characters/);
    await failing.close();
  });

  it('Stop during a slow stream cancels the run on the server', async () => {
    const page = await open('/slow/playground/');
    await runSlow(page, 'rivers');
    // The run is durable (closing the connection leaves it running): Stop cancels it by its id.
    const cancel = page.waitForRequest((r) => r.method() === 'POST' && /\/slow\/runs\/[^/]+\/cancel$/.test(r.url()));
    await page.getByRole('button', { name: 'Stop' }).click();
    const runId = /\/runs\/([^/]+)\/cancel$/.exec((await cancel).url())?.[1];
    await page.locator('.status', { hasText: 'Stopped' }).waitFor();
    const record = (await (await fetch(`${base}/slow/runs/${runId}/wait?timeout_s=10`)).json()) as { status: string; error?: { code: string } };
    expect(record).toMatchObject({ status: 'cancelled', error: { code: 'RUNNEL_ERR_RUN_CANCELLED' } });
    expect(await page.locator('.output').innerText()).not.toContain('word199');
    await page.close();
  });

  // A probe: a reload mid-run lost the output, and the run went on on the server, unseen and unstoppable.
  it('a reload mid-run follows the run again from its start, its input back in the form', async () => {
    const page = await open('/slow/playground/');
    const submitted: string[] = [];
    page.on('request', (request) => {
      if (request.method() === 'POST') submitted.push(new URL(request.url()).pathname);
    });
    await runSlow(page, 'lakes');
    await page.reload();
    await page.locator('.status', { hasText: 'Done' }).waitFor();
    expect(await page.locator('#f-topic').inputValue()).toBe('lakes');
    expect((await page.locator('.output').innerText()).replace(/\s+/g, ' ').trim()).toBe(slowStory);
    // One run, never submitted again.
    expect(submitted).toEqual(['/slow/stream_events']);
    // Once done, a later reload has nothing to follow.
    await page.reload();
    await page.locator('#f-topic').waitFor();
    expect(await page.locator('.status').innerText()).toBe('');
    await page.close();
  });

  it('chat mode: two turns, the second sees the first, and a reload keeps the conversation', async () => {
    const page = await open('/chat/playground/');
    // Without a link, the settings start from the schema's defaults (the cache on).
    await expect(page.getByLabel('Use the response cache').isChecked()).resolves.toBe(true);
    const send = async (text: string, turn: number) => {
      await page.getByLabel('Message').fill(text);
      await page.getByRole('button', { name: 'Send' }).click();
      await page.locator('.bubble.ai:not(.streaming)').nth(turn).waitFor();
      await page.locator('.bubble.streaming').waitFor({ state: 'detached' });
    };
    await send('My name is Grace.', 0);
    await send('What is my name?', 1);
    expect(await page.locator('.bubble.ai').nth(1).innerText()).toContain('My name is Grace.');
    await page.screenshot({ path: `${ARTIFACTS}chat-playground.png`, fullPage: true });
    await page.reload();
    await page.locator('.bubble').nth(3).waitFor();
    expect(await page.locator('.bubble').allInnerTexts()).toHaveLength(4);
    await page.getByRole('button', { name: 'New session' }).click();
    expect(await page.locator('.bubble').count()).toBe(0);
    await page.close();
  });

  it("chat mode: a shared /c/ link opens its session with its settings, and the address follows the page's session", async () => {
    const hash = (configurable: Record<string, unknown>): string => LZString.compressToEncodedURIComponent(JSON.stringify({ configurable }));
    // The README's kind of link: a session of its own, the response cache off, and a setting /chat does not have.
    const page = await open(`/chat/c/${hash({ session_id: 'shared-link', cache: false, temprature: 2 })}/playground/`);
    const sent: unknown[] = [];
    page.on('request', (req) => {
      if (req.method() === 'POST') sent.push({ url: new URL(req.url()).pathname, body: req.postDataJSON() as unknown });
    });
    await expect(page.locator('.session-id').innerText()).resolves.toBe('shared-link');
    await expect(page.getByLabel('Use the response cache').isChecked()).resolves.toBe(false);
    await expect(page.locator('.link-notice').innerText()).resolves.toContain('settings this chain does not have (temprature)');
    await page.getByLabel('Message').fill('from a shared link');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.locator('.bubble.ai:not(.streaming)').first().waitFor();
    await page.locator('.bubble.streaming').waitFor({ state: 'detached' });
    expect(sent).toEqual([{ url: '/chat/stream_events', body: expect.objectContaining({ config: { configurable: { cache: false, session_id: 'shared-link' } } }) }]);
    const history = (await (await fetch(`${base}/chat/history/shared-link`)).json()) as { messages: { content: unknown }[] };
    expect(history.messages.map((m) => m.content)).toEqual(['from a shared link', expect.any(String)]);
    // The address holds the page's setup (the unknown setting left out); a new session moves it on.
    expect(page.url()).toBe(`${base}/chat/c/${hash({ cache: false, session_id: 'shared-link' })}/playground/`);
    // The link's session is not kept as this tab's own: the plain page opens the visitor's, not the link's.
    expect(await page.evaluate("localStorage.getItem('runnel:session:/chat')")).not.toBe('shared-link');
    await page.getByRole('button', { name: 'New session' }).click();
    const fresh = await page.locator('.session-id').innerText();
    expect(fresh).not.toBe('shared-link');
    expect(page.url()).toBe(`${base}/chat/c/${hash({ cache: false, session_id: fresh })}/playground/`);
    expect((page as Page & { problems: string[] }).problems).toEqual([]);
    await page.close();

    // A session id the chain would refuse is said, and the tab's own session used.
    const bad = await open(`/chat/c/${hash({ session_id: 'no spaces allowed' })}/playground/`);
    await expect(bad.locator('.link-notice').innerText()).resolves.toContain("This link's session id is not one this chain takes");
    expect(await bad.locator('.session-id').innerText()).not.toBe('no spaces allowed');
    await bad.close();
  });

  it('chat mode: a shared setting the chain would refuse shows on its field, and nothing is sent until it is fixed', async () => {
    const hash = (configurable: Record<string, unknown>): string => LZString.compressToEncodedURIComponent(JSON.stringify({ configurable }));
    const page = await open(`/chat/c/${hash({ session_id: 'bad-setting', cache: 'yes' })}/playground/`);
    const sent: unknown[] = [];
    page.on('request', (req) => {
      if (req.method() === 'POST') sent.push(req.postDataJSON() as unknown);
    });
    // Flagged on its field as the page opens, the settings panel open to show it.
    const error = page.locator('.config .field-error');
    await expect(error.innerText()).resolves.toContain('cache: must be boolean');
    expect(await page.locator('details.config').getAttribute('open')).not.toBeNull();
    // Send refuses in the browser: the message stays, and nothing reaches the server.
    await page.getByLabel('Message').fill('kept for later');
    await page.getByRole('button', { name: 'Send' }).click();
    await expect(page.locator('.status').innerText()).resolves.toBe('Fix the highlighted settings');
    expect(await page.getByLabel('Message').inputValue()).toBe('kept for later');
    expect(sent).toEqual([]);
    // Fixed on its field, the turn goes with the setting as the box now says.
    await page.getByLabel('Use the response cache').check();
    await page.getByRole('button', { name: 'Send' }).click();
    await page.locator('.bubble.ai:not(.streaming)').first().waitFor();
    await page.locator('.bubble.streaming').waitFor({ state: 'detached' });
    expect(sent).toEqual([expect.objectContaining({ config: { configurable: { cache: true, session_id: 'bad-setting' } } })]);
    expect(await error.count()).toBe(0);
    expect((page as Page & { problems: string[] }).problems).toEqual([]);
    await page.close();
  });

  it('model output is never HTML: an <img onerror> answer changes nothing', async () => {
    const page = await open('/html/playground/');
    await page.locator('#f-topic').fill('x');
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('.status', { hasText: 'Done' }).waitFor();
    expect(await page.locator('.output').innerText()).toContain('<img src=x onerror=');
    expect(await page.locator('.output img, .output script').count()).toBe(0);
    expect(await page.locator('.output strong').innerText()).toBe('bold');
    expect(await page.locator('.output a').count()).toBe(0);
    expect(await page.evaluate('window.pwned')).toBeUndefined();
    await page.close();
  });

  it('with auth on, asks for a key, keeps it in session storage, and runs with it', async () => {
    const keyed = await keyedServer();
    try {
      const page = await keyed.openWithKey('/joke/playground/');
      await page.locator('#f-topic').fill('keys');
      await page.getByRole('button', { name: 'Run' }).click();
      await page.locator('.status', { hasText: 'Done' }).waitFor();
      expect(await page.evaluate("sessionStorage.getItem('runnel:api-key')")).toBe('k_playground_0123456789');
      expect(await page.evaluate('localStorage.length')).toBe(0);
      await page.close();
    } finally {
      await keyed.app.close();
    }
  });

  // A probe: after a 401 (the key removed from the server), /chat showed the error and no way to give a key.
  it('chat mode: a key the server no longer takes asks for one again; the message stays to send', async () => {
    const keyed = await keyedServer();
    try {
      const page = await keyed.openWithKey('/chat/playground/');
      await page.getByLabel('Message').waitFor();
      await page.evaluate("sessionStorage.setItem('runnel:api-key', 'k_not_a_key_0123456789')");
      await page.getByLabel('Message').fill('Hello again');
      await page.getByRole('button', { name: 'Send' }).click();
      await page.locator('.error', { hasText: 'RUNNEL_ERR_UNAUTHORIZED' }).waitFor();
      expect(await page.getByLabel('Message').inputValue()).toBe('Hello again');
      await page.getByLabel('API key').fill('k_playground_0123456789');
      await page.getByRole('button', { name: 'Use key' }).click();
      expect(await page.locator('.key-panel').count()).toBe(0);
      await page.getByRole('button', { name: 'Send' }).click();
      await page.locator('.bubble.ai:not(.streaming):not(.failed)').waitFor();
      expect(await page.locator('.bubble.ai:not(.failed)').innerText()).toContain('Hello again');
      await page.close();
    } finally {
      await keyed.app.close();
    }
  });

  // A probe: a message sent offline was said to be "Failed to fetch", maybe answered on the server, and was gone.
  it('chat mode: a message sent while the browser is offline is not sent, says so, and stays to send', async () => {
    const page = await open('/chat/playground/');
    await page.getByLabel('Message').waitFor();
    await (await network(page))(true);
    await page.getByLabel('Message').fill('Hello from a tunnel');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.locator('.error', { hasText: 'Not sent: this browser is offline' }).waitFor();
    expect(await page.getByLabel('Message').inputValue()).toBe('Hello from a tunnel');
    expect(await page.locator('.turn-note').innerText()).toBe('Not sent: this turn is not kept in the conversation.');
    // No empty answer above the note: the question, then what became of it.
    expect(await page.locator('.chat-log > *').evaluateAll((els) => els.map((el) => el.className))).toEqual(['bubble human not-kept', 'turn-note']);
    await page.close();
  });

  // A probe: a run lost by the server (restarted without Redis: its rejoin found no such run) marked its open
  // steps "stopped", as a Stop does.
  it('marks the steps a failed run left open as failed, not stopped', async () => {
    const page = await open('/slow/playground/');
    await runSlow(page, 'rivers');
    // The connection drops; the server, once it is back, knows the run no more.
    await page.route(/\/slow\/runs\/[^/]+\/stream$/, (route) =>
      route.fulfill({ status: 404, contentType: 'application/json', body: JSON.stringify({ code: 'RUNNEL_ERR_NOT_FOUND', message: 'No such run', detail: [] }) }),
    );
    const setOffline = await network(page);
    await setOffline(true);
    await page.locator('.status', { hasText: /reconnecting/i }).waitFor();
    await setOffline(false);
    await page.locator('.status', { hasText: 'Failed' }).waitFor();
    expect(await page.locator('details.status-stopped').count()).toBe(0);
    expect(await page.locator('details.status-error').count()).toBeGreaterThan(0);
    await page.close();
  });

  it('works under a path prefix behind a proxy (relative URLs only)', async () => {
    // A proxy that serves the app under /team/runnel/ and strips the prefix, as a gateway would.
    const proxy: Server = createServer((req, res) => {
      if (!req.url?.startsWith('/team/runnel/')) {
        res.writeHead(404).end();
        return;
      }
      const upstream = request(`${base}${req.url.slice('/team/runnel'.length)}`, { method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      req.pipe(upstream);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    try {
      const page = await browser.newPage();
      const outside: string[] = [];
      page.on('request', (r) => {
        if (!new URL(r.url()).pathname.startsWith('/team/runnel/')) outside.push(r.url());
      });
      await page.goto(`http://127.0.0.1:${(proxy.address() as AddressInfo).port}/team/runnel/`);
      await page.locator('a[href="joke/playground/"]').first().click();
      await page.locator('#f-topic').fill('gateways');
      await page.getByRole('button', { name: 'Run' }).click();
      await page.locator('.status', { hasText: 'Done' }).waitFor();
      expect(await page.locator('.output').innerText()).toContain('gateways');
      expect(outside).toEqual([]);
      await page.close();
    } finally {
      proxy.closeAllConnections();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    }
  });

  it('sends a Content-Security-Policy and serves nothing outside the bundle', async () => {
    const res = await fetch(`${base}/joke/playground/`);
    expect(res.headers.get('content-security-policy')).toMatch(/script-src 'self'/);
    for (const path of ['/joke/playground/assets/..%2f..%2f..%2fpackage.json', '/joke/playground/assets/%2e%2e%2fpackage.json', '/joke/playground/assets/..%5c..%5cpackage.json', '/joke/playground/assets/%252e%252e%252fpackage.json']) {
      const r = await fetch(`${base}${path}`);
      expect(await r.text()).not.toContain('"devDependencies"');
    }
  });
});
