/**
 * What the Chromium tests of the playground share: Debian's Chromium
 * (never a downloaded one), pages that record everything that went wrong on
 * them, a record of what the server answered, and services in a data
 * directory of their own (PGlite allows one process per directory, and
 * another test run may hold ./.runnel).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request as forward, type IncomingMessage, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { chromium, type Browser, type Page } from 'playwright-core';
import { z } from 'zod';
import { connectServices, defineChain, withMessageHistory, type MemoryHistoryStore, type Runnable, type Services } from '../../src/index.js';

export const ARTIFACTS = new URL('../artifacts/', import.meta.url).pathname;

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

/** A page and what went wrong on it: script errors, console errors, failed requests and 4xx/5xx answers. */
export interface WatchedPage {
  page: Page;
  problems: string[];
}

export async function openWatched(browser: Browser, url: string): Promise<WatchedPage> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
  page.on('requestfailed', (request) => problems.push(`failed: ${request.url()} ${request.failure()?.errorText ?? ''}`));
  page.on('response', (response) => {
    if (response.status() >= 400) problems.push(`${response.status()}: ${response.url()}`);
  });
  await page.goto(url);
  return { page, problems };
}

/** Every answer the server gives (some requests, such as the favicon's, never show in the page's own events). */
export function recordAnswers(app: FastifyInstance): { method: string; url: string; status: number }[] {
  const answers: { method: string; url: string; status: number }[] = [];
  app.addHook('onResponse', async (request, reply) => void answers.push({ method: request.method, url: request.url, status: reply.statusCode }));
  return answers;
}

/** Waits until `found` returns something (polling; the browser fetches icons on its own schedule), or fails after `ms`. */
export async function eventually<T>(found: () => T | undefined, what: string, ms = 5_000): Promise<T> {
  for (let waited = 0; waited < ms; waited += 50) {
    const value = found();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`Timed out after ${ms} ms waiting for ${what}`);
}

/** Services over a fresh temporary data directory; `dispose` closes them and removes it. */
export async function temporaryServices(): Promise<{ services: Services; dispose(): Promise<void> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'runnel-playground-'));
  const services = await connectServices({ dataDir });
  return {
    services,
    async dispose() {
      await services.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Listens on 127.0.0.1 and launches Chromium: what a browser test starts from. */
export async function serveToBrowser(app: FastifyInstance): Promise<{ base: string; browser: Browser }> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  return { base, browser: await launchChromium() };
}

/**
 * A proxy on 127.0.0.1 in front of `base`, whose answers `pass` sends on as the test wants them (held, cut in
 * pieces); its address, and how to close it.
 */
export async function proxyTo(
  base: string,
  pass: (request: IncomingMessage, response: ServerResponse, answer: IncomingMessage, upstream: { destroy(): void }) => void,
): Promise<{ url: string; close(): Promise<void> }> {
  const proxy = createServer((req, res) => {
    const upstream = forward(`${base}${req.url ?? '/'}`, { method: req.method, headers: req.headers }, (answer) => pass(req, res, answer, upstream));
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
    close: () => {
      proxy.closeAllConnections();
      return new Promise<void>((resolve) => proxy.close(() => resolve()));
    },
  };
}

/** Cuts and restores the page's network through the DevTools protocol (one session: each session emulates its own conditions). */
export async function network(page: Page): Promise<(offline: boolean) => Promise<void>> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  return async (offline) => void (await cdp.send('Network.emulateNetworkConditions', { offline, latency: 0, downloadThroughput: -1, uploadThroughput: -1 }));
}

/**
 * A chain the playground shows as a chat: `answer` (a runnable taking `{message}`) answers each message, and
 * the turns are kept in `histories`, which the page reads back on load.
 */
export function chatChain(options: { path: string; description: string; answer: Runnable<never, unknown>; histories: MemoryHistoryStore }) {
  const { histories } = options;
  return defineChain({
    path: options.path,
    description: options.description,
    runnable: withMessageHistory<{ message: string }, string>(options.answer as never, {
      getHistory: (sessionId: string) => histories.history(sessionId),
      inputMessagesKey: 'message',
      historyMessagesKey: 'history',
    }),
    inputSchema: z.object({ message: z.string().min(1) }),
    playground: 'chat',
    history: (sessionId: string) => histories.history(sessionId),
  });
}
