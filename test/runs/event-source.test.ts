/**
 * A run's stream read by the client the docs promise it to: Chromium's own
 * `EventSource`. It hears every frame once, `end` included (an event without
 * data is never dispatched by an EventSource, so `end` carries `data: null`),
 * and after a dropped connection it reconnects by itself with
 * `Last-Event-ID` and hears the rest: none twice, none missing.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cuttingProxy, type CuttingProxy } from '../client/cutting-proxy.js';
import { launchChromium } from '../playground/browser.js';
import { startServer, type TestServer } from '../support/server.js';

/** What a page heard on an EventSource until `end` (then it closes it), or until 20 s passed. */
interface Heard {
  events: { type: string; data: string; id: string }[];
  /** Connection errors (readyState CONNECTING: the EventSource reconnects). */
  drops: number;
}

describe("a run's stream in Chromium's EventSource", () => {
  let server: TestServer;
  let browser: Browser;
  let proxy: CuttingProxy | undefined;

  beforeAll(async () => {
    server = await startServer();
    browser = await launchChromium();
  });
  afterAll(async () => {
    await proxy?.close();
    await browser?.close();
    await server?.close();
  });

  /** A finished run of /slow with `count` tokens, and its text as the record has it. */
  async function finishedRun(count: number): Promise<{ runId: string; output: string }> {
    const submitted = (await (await fetch(`${server.url}/slow/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { count } }) })).json()) as { run_id: string };
    const record = (await (await fetch(`${server.url}/slow/runs/${submitted.run_id}/wait`)).json()) as { status: string; output: string };
    expect(record.status).toBe('success');
    return { runId: submitted.run_id, output: record.output };
  }

  /**
   * Opens a page on `origin` and listens to the run's stream there until `end`; `whenHeard` runs once the page
   * has heard that many data frames (the listening goes on meanwhile).
   */
  async function listen(origin: string, runId: string, whenHeard?: { data: number; then: () => void }): Promise<Heard> {
    const page = await browser.newPage();
    try {
      await page.goto(`${origin}/healthz`);
      const listening = page.evaluate(
        (path) =>
          new Promise<Heard>((resolve) => {
            const heard: Heard = { events: [], drops: 0 };
            (globalThis as unknown as { heard: Heard }).heard = heard;
            const source = new EventSource(path);
            const done = (): void => {
              source.close();
              resolve(heard);
            };
            for (const type of ['metadata', 'data', 'end']) {
              source.addEventListener(type, (event) => {
                const message = event as MessageEvent;
                heard.events.push({ type, data: String(message.data), id: message.lastEventId });
                if (type === 'end') done();
              });
            }
            source.addEventListener('error', () => {
              if (source.readyState === EventSource.CONNECTING) heard.drops += 1;
              else done();
            });
            setTimeout(done, 20_000);
          }),
        `/slow/runs/${runId}/stream`,
      );
      if (whenHeard !== undefined) {
        // Until the page has heard them, or has stopped listening (then the test's expectations say what it heard).
        let stopped = false;
        void listening.finally(() => (stopped = true));
        const count = () => page.evaluate(() => (globalThis as unknown as { heard?: Heard }).heard?.events.filter((event) => event.type === 'data').length ?? 0);
        while (!stopped && (await count()) < whenHeard.data) await new Promise((resolve) => setTimeout(resolve, 20));
        whenHeard.then();
      }
      return await listening;
    } finally {
      await page.close();
    }
  }

  it('hears metadata, every token and end, then closes on end', async () => {
    const { runId, output } = await finishedRun(6);
    const heard = await listen(server.url, runId);
    expect(heard.events.map((event) => event.type)).toEqual(['metadata', ...Array.from({ length: 6 }, () => 'data'), 'end']);
    expect(heard.events.filter((event) => event.type === 'data').map((event) => JSON.parse(event.data) as string).join('')).toBe(output);
    expect(heard.events.at(-1)?.data).toBe('null');
    expect(heard.drops).toBe(0);
  });

  it('reconnects by itself after a dropped connection, with Last-Event-ID: every token once, then end', async () => {
    const { runId, output } = await finishedRun(8);
    // The cut comes once the page has heard the three frames before it (they carry the id it resumes after).
    const cutting = await cuttingProxy(Number(new URL(server.url).port), { marker: 'event: data', nth: 4, hold: true });
    proxy = cutting;
    const heard = await listen(cutting.url, runId, { data: 3, then: () => cutting.release() });
    expect(proxy.cuts).toBe(1);
    expect(heard.drops).toBe(1);
    expect(proxy.sent.toLowerCase()).toContain('last-event-id:');
    const data = heard.events.filter((event) => event.type === 'data');
    expect(data.map((event) => JSON.parse(event.data) as string).join('')).toBe(output);
    expect(new Set(data.map((event) => event.id)).size).toBe(data.length);
    expect(heard.events.at(-1)?.type).toBe('end');
  });
});
