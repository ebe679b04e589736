/**
 * A page on any site may POST a form or `text/plain` to any address without
 * asking CORS (a "simple" request: no preflight; the page cannot read the
 * answer, but the request is made). Runnel reads every body as JSON, so on a
 * server without API keys such a post ran the chain for that site: spent
 * tokens, wrote into a history. Checked from Chromium on another origin: a
 * browser's body not declared JSON is refused before any chain runs, while
 * the page's JSON requests (preflighted, allowed by RUNNEL_CORS_ORIGINS) and
 * curl-style clients without an Origin (`curl -d` sends a form type) work.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../playground/browser.js';
import { observed, startServer, text, type TestServer } from '../support/server.js';

/** Serves one blank page: the other site. */
async function otherSite(): Promise<{ server: Server; origin: string }> {
  const server = createServer((_request, response) => response.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>elsewhere</title>'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  // `localhost`: another origin than the API's 127.0.0.1, whatever the ports.
  return { server, origin: `http://localhost:${(server.address() as AddressInfo).port}` };
}

describe('a page on another site posts to a server without keys', () => {
  let api: TestServer;
  let site: { server: Server; origin: string };
  let browser: Browser;
  let allowedSite: { server: Server; origin: string };

  beforeAll(async () => {
    site = await otherSite();
    allowedSite = await otherSite();
    api = await startServer({ corsOrigins: [allowedSite.origin] });
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await api?.close();
    site?.server.close();
    allowedSite?.server.close();
  });

  /** Runs `script` in a page of `origin` and returns what it returned. */
  async function inPage<T>(origin: string, script: (url: string) => Promise<T>): Promise<T> {
    const page = await browser.newPage();
    try {
      await page.goto(`${origin}/`);
      return await page.evaluate(script, api.url);
    } finally {
      await page.close();
    }
  }

  it('a form, a text/plain post and an untyped blob run nothing; the page’s JSON still needs CORS’s consent', async () => {
    const before = observed.configs.length;
    const body = JSON.stringify({ input: { name: 'from elsewhere' } });
    const kinds = await inPage(site.origin, async (url) => {
      const payload = JSON.stringify({ input: { name: 'from elsewhere' } });
      const sent = [
        { headers: { 'content-type': 'text/plain' }, body: payload },
        { headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: payload },
        { headers: {}, body: new Blob([payload]) },
      ];
      const outcomes: string[] = [];
      for (const init of sent) {
        // `no-cors`: the page gets an opaque answer, but the request is made — what a hostile page relies on.
        const res = await fetch(`${url}/echo/invoke`, { method: 'POST', mode: 'no-cors', ...init });
        outcomes.push(res.type);
      }
      // JSON is preflighted; this site is not allowed, so the browser never sends the POST.
      outcomes.push(await fetch(`${url}/echo/invoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: payload }).then((res) => res.type, () => 'refused by CORS'));
      return outcomes;
    });
    expect(kinds).toEqual(['opaque', 'opaque', 'opaque', 'refused by CORS']);
    expect(observed.configs.length).toBe(before);

    // What the server answered them (the page cannot read it): 415, with the code.
    const res = await fetch(`${api.url}/echo/invoke`, { method: 'POST', headers: { origin: site.origin, 'content-type': 'text/plain' }, body });
    expect(res.status).toBe(415);
    expect(await res.json()).toMatchObject({ code: 'RUNNEL_ERR_UNSUPPORTED_MEDIA_TYPE' });
    expect(observed.configs.length).toBe(before);
  });

  // A probe: a POST that acts without a body (a run's cancel) never reached the body's check, so another site's
  // page cancelled a run it knew the id of.
  it('another site’s page cannot cancel a run with a bodiless post; the run’s own page, an allowed site and curl can', async () => {
    const submit = async (): Promise<string> => {
      const res = await fetch(`${api.url}/slow/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: {} }) });
      return ((await res.json()) as { run_id: string }).run_id;
    };
    const status = async (runId: string): Promise<string> => ((await (await fetch(`${api.url}/slow/runs/${runId}`)).json()) as { status: string }).status;
    const runId = await submit();
    const page = await browser.newPage();
    try {
      await page.goto(`${site.origin}/`);
      const sent = await page.evaluate(
        async ([url, id]) => {
          const types: string[] = [];
          for (const headers of [{}, { 'content-type': 'text/plain' }, { 'content-type': 'application/x-www-form-urlencoded' }]) {
            types.push((await fetch(`${url}/slow/runs/${id}/cancel`, { method: 'POST', mode: 'no-cors', headers })).type);
          }
          return types;
        },
        [api.url, runId] as const,
      );
      expect(sent).toEqual(['opaque', 'opaque', 'opaque']);
    } finally {
      await page.close();
    }
    // The requests were made, and refused: the run goes on (or waits its turn).
    expect(['pending', 'running']).toContain(await status(runId));
    const refused = await fetch(`${api.url}/slow/runs/${runId}/cancel`, { method: 'POST', headers: { origin: site.origin } });
    expect([refused.status, ((await refused.json()) as { code: string }).code]).toEqual([415, 'RUNNEL_ERR_UNSUPPORTED_MEDIA_TYPE']);
    expect(['pending', 'running']).toContain(await status(runId));
    // A site CORS lists may: it could send JSON as well.
    const allowedAnswer = await fetch(`${api.url}/slow/runs/${runId}/cancel`, { method: 'POST', headers: { origin: allowedSite.origin } });
    expect([allowedAnswer.status, ((await allowedAnswer.json()) as { status: string }).status]).toEqual([200, 'cancelled']);
    // The server's own page (its Origin is the server's), and curl (no Origin), cancel without a body too.
    for (const headers of [{ origin: api.url }, {}]) {
      const id = await submit();
      const res = await fetch(`${api.url}/slow/runs/${id}/cancel`, { method: 'POST', headers });
      expect([res.status, ((await res.json()) as { status: string }).status], JSON.stringify(headers)).toEqual([200, 'cancelled']);
    }
  });

  it('an allowed site’s JSON runs; clients without an Origin may send any type, as curl -d does', async () => {
    const answer = await inPage(allowedSite.origin, async (url) => {
      const res = await fetch(`${url}/echo/invoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { name: 'ada' } }) });
      return [res.status, await res.json()] as const;
    });
    expect(answer).toEqual([200, expect.objectContaining({ output: 'hello ada' })]);
    for (const type of ['application/x-www-form-urlencoded', 'text/plain']) {
      const res = await fetch(`${api.url}/echo/invoke`, { method: 'POST', headers: { 'content-type': type }, body: JSON.stringify({ input: { name: 'curl' } }) });
      expect(res.status, type).toBe(200);
      expect(JSON.parse(await text(res))).toMatchObject({ output: 'hello curl' });
    }
  });

  // Node's parser refuses headers over 16 KB before any route or CORS hook: the refusal carried no grant, so a
  // page whose token had grown that large saw a failed fetch, not why.
  it('an allowed site’s page reads the 431 its too large headers got; another site’s page does not', async () => {
    const send = async (url: string) => {
      // The preflight names the header, small; the request carries it, 20 KB.
      const res = await fetch(`${url}/echo/invoke`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${'k'.repeat(20_000)}` }, body: '{"input": {"name": "ada"}}' }).catch(() => undefined);
      return res === undefined ? 'refused by CORS' : [res.status, ((await res.json()) as { code: string }).code];
    };
    expect(await inPage(allowedSite.origin, send)).toEqual([431, 'RUNNEL_ERR_HEADERS_TOO_LARGE']);
    expect(await inPage(site.origin, send)).toBe('refused by CORS');
  });
});
