/**
 * One API key could hold every stream slot (RUNNEL_MAX_STREAMS), and every
 * other key's streams were then refused 503 (a security review). With
 * RUNNEL_MAX_STREAMS_PER_KEY, a key past its share is refused 429 while
 * the others still stream.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadServerConfig } from '../../src/server/config.js';
import { settleWithin } from '../helpers.js';
import { startServer, type TestServer } from '../support/server.js';

const keys = { ada: 'ada-key-0123456789abcdef', bob: 'bob-key-0123456789abcdef' };

describe('RUNNEL_MAX_STREAMS_PER_KEY', () => {
  let server: TestServer;
  const open: AbortController[] = [];
  beforeAll(async () => {
    server = await startServer({ apiKeys: Object.entries(keys).map(([name, key]) => ({ name, key })), maxStreams: 10, maxStreamsPerKey: 2 });
  });
  afterAll(async () => {
    for (const controller of open) controller.abort();
    await server?.close();
  });

  /** Opens a never-ending /slow stream for `who` and reads its first frame; returns its status. */
  async function stream(who: keyof typeof keys): Promise<Response> {
    const controller = new AbortController();
    open.push(controller);
    return fetch(`${server.url}/slow/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${keys[who]}` },
      body: JSON.stringify({ input: {} }),
      signal: controller.signal,
    });
  }

  it('refuses a key past its share with 429, while another key still streams', async () => {
    expect((await stream('ada')).status).toBe(200);
    expect((await stream('ada')).status).toBe(200);
    await settleWithin(
      (async () => {
        while (server.app.runnel.streams.size < 2) await new Promise((resolve) => setTimeout(resolve, 10));
      })(),
      10_000,
    );
    const third = await stream('ada');
    // Like every 429 and 503, it says when to try again (a trial found none).
    expect([third.status, third.headers.get('retry-after')]).toEqual([429, '1']);
    expect(await third.json()).toMatchObject({ code: 'RUNNEL_ERR_TOO_MANY_STREAMS', message: 'This caller has 2 streams open, its most (RUNNEL_MAX_STREAMS_PER_KEY); close one first' });
    expect((await stream('bob')).status).toBe(200);
  });

  // 0 was refused ("≥ 1") though README says the default is none, and the rate limit takes 0 for none.
  it('is off by default and at 0, and refuses values below 0', () => {
    expect(loadServerConfig({}).maxStreamsPerKey).toBe(0);
    expect(loadServerConfig({ RUNNEL_MAX_STREAMS_PER_KEY: '0' }).maxStreamsPerKey).toBe(0);
    expect(loadServerConfig({ RUNNEL_MAX_RUNS_PER_KEY: '0' }).maxRunsPerKey).toBe(0);
    expect(loadServerConfig({ RUNNEL_MAX_STREAMS_PER_KEY: '50' }).maxStreamsPerKey).toBe(50);
    expect(() => loadServerConfig({ RUNNEL_MAX_STREAMS_PER_KEY: '-1' })).toThrow(/RUNNEL_MAX_STREAMS_PER_KEY must be a whole number ≥ 0/);
  });
});
