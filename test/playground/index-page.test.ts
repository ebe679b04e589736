/**
 * The index page `/` in Chromium (issue 14): styled like the playground
 * (its fonts and colours, not the browser's serif defaults), with the icon,
 * every chain with its description and working links — playground, API
 * docs, schemas — under a strict CSP, and no console error.
 */
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChains } from '../../chains/index.js';
import { buildApp, type ChainSpec } from '../../src/index.js';
import { ARTIFACTS, serveToBrowser, openWatched, temporaryServices } from './browser.js';

let app: FastifyInstance;
let browser: Browser;
let dispose: () => Promise<void>;
let chains: readonly ChainSpec<never, unknown>[];
let base = '';

beforeAll(async () => {
  const temporary = await temporaryServices();
  dispose = temporary.dispose;
  chains = createChains({ services: temporary.services, env: {} }).chains;
  app = await buildApp({ chains, services: temporary.services });
  ({ base, browser } = await serveToBrowser(app));
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await app?.close();
  await dispose?.();
});

/** The computed look of a page: what a person sees first (a string script: this project's types have no DOM). */
const look = (page: Page): Promise<{ font: string; color: string; background: string; link: string }> =>
  page.evaluate(`(() => {
    const link = document.querySelector('header nav a');
    return {
      font: getComputedStyle(document.body).fontFamily,
      color: getComputedStyle(document.body).color,
      background: getComputedStyle(document.documentElement).backgroundColor,
      link: link === null ? '' : getComputedStyle(link).color,
    };
  })()`);

/** The absolute URLs of the links under `locator`. */
const hrefsOf = async (page: Page, selector: string): Promise<URL[]> =>
  (await page.locator(selector).evaluateAll((links) => links.map((a) => a.getAttribute('href') ?? ''))).map((href) => new URL(href, page.url()));

describe('the index page', () => {
  it('looks like the playground: its fonts and colours, not the browser defaults', async () => {
    const { page: playground } = await openWatched(browser, `${base}/joke/playground/`);
    await playground.locator('header h1').waitFor();
    const expected = await look(playground);
    await playground.close();

    const { page, problems } = await openWatched(browser, `${base}/`);
    const seen = await look(page);
    expect(seen.font).not.toMatch(/^(Times|serif|"Times New Roman")/);
    expect(seen).toEqual(expected);
    await page.screenshot({ path: `${ARTIFACTS}index-page.png`, fullPage: true });
    expect(problems).toEqual([]);
    await page.close();
  });

  it('lists every chain with its description, links that all answer, and the icon, under a strict CSP', async () => {
    const { page, problems } = await openWatched(browser, `${base}/`);
    const response = await page.request.get(`${base}/`, { headers: { accept: 'text/html' } });
    const csp = response.headers()['content-security-policy'] ?? '';
    expect(csp).toMatch(/default-src 'none'/);
    expect(csp).not.toMatch(/script-src|unsafe-eval/);
    expect(await page.locator('script').count()).toBe(0);

    expect((await hrefsOf(page, 'link[rel="icon"]')).map((url) => url.pathname)).toEqual(['/favicon.svg']);
    for (const chain of chains) {
      const item = page.locator(`[data-chain="${chain.path}"]`);
      expect(await item.innerText()).toContain(chain.description);
      const urls = await hrefsOf(page, `[data-chain="${chain.path}"] a`);
      expect(urls.map((url) => url.pathname + url.hash)).toEqual(
        expect.arrayContaining([`${chain.path}/playground/`, `/docs#/${encodeURIComponent(chain.path)}`, `${chain.path}/input_schema`, `${chain.path}/output_schema`, `${chain.path}/config_schema`]),
      );
      for (const url of new Set(urls.map((u) => u.origin + u.pathname))) expect((await page.request.get(url)).status(), url).toBe(200);
    }
    for (const url of await hrefsOf(page, 'header a')) expect((await page.request.get(url.href)).status(), url.href).toBe(200);
    // The playground link goes to a working playground.
    await page.locator('[data-chain="/joke"] a', { hasText: 'playground' }).click();
    await page.waitForURL(/\/joke\/playground\/$/);
    await page.locator('#f-topic').waitFor();
    expect(problems).toEqual([]);
    await page.close();
  });
});
