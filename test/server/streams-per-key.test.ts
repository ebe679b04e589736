/**
 * One API key could hold every stream slot (RUNNEL_MAX_STREAMS), and every
 * other key's streams were then refused 503 (a security review). With
 * RUNNEL_MAX_STREAMS_PER_KEY, a key past its share is refused 429 while
 * the others still stream.
 */
import http from 'node:http';
import { once } from 'node:events';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineChain, generator, type ChainSpec } from '../../src/index.js';
import { loadServerConfig } from '../../src/server/config.js';
import { settleWithin } from '../helpers.js';
import { allChains, startServer, type TestServer } from '../support/server.js';

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

/**
 * A probe cut a stream and opened another at once, and met the 429: a stream whose client had gone still counted
 * as its key's until its run had unwound (taking back what it saved is a Redis round trip). And a client that lost
 * its durable stream was refused its rejoin at a limit of one: the run it rejoins held the key's one place.
 */
describe('RUNNEL_MAX_STREAMS_PER_KEY, when a client goes', () => {
  let server: TestServer;
  // The take-backs under way, let go by `release()`.
  const held: (() => void)[] = [];
  const release = (): void => held.splice(0).forEach((resolve) => resolve());
  const streamsEnded = (): Promise<void> =>
    settleWithin(
      (async () => {
        while (server.app.runnel.streams.size > 0) await new Promise((resolve) => setTimeout(resolve, 10));
      })(),
      10_000,
    );
  // A step that saved something, as a chat history does, whose take-back takes its time.
  const saving = defineChain({
    path: '/saving',
    runnable: generator(async function* (inputs: AsyncIterable<unknown>, config) {
      for await (const _ of inputs);
      config.onSave?.(() => new Promise<void>((resolve) => held.push(resolve)));
      yield 'first ';
      await new Promise(() => undefined);
    }).withTypes({ input: z.object({}), output: z.string() }),
  });
  beforeAll(async () => {
    server = await startServer({ apiKeys: [{ name: 'ada', key: keys.ada }], maxStreams: 10, maxStreamsPerKey: 1 }, [...allChains, saving] as ChainSpec<never, unknown>[]);
  });
  afterAll(async () => {
    release();
    await server?.close();
  });

  const authorization = `Bearer ${keys.ada}`;
  const post = (path: string, body: unknown): Promise<Response> =>
    fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization }, body: JSON.stringify(body) });

  /**
   * Opens a stream on a connection of its own (node:http, no agent) and reads it until its body holds `text`;
   * `cut()` closes the connection and settles once the server has seen it close.
   */
  async function streamUntil(path: string, body: unknown, text: string, headers: Record<string, string> = {}): Promise<{ status: number; seen: string; cut: () => Promise<void> }> {
    const serverSide = once(server.app.server, 'connection') as Promise<[Socket]>;
    const request = http.request(`${server.url}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { 'content-type': 'application/json', authorization, ...headers },
      agent: false,
    });
    request.end(body === undefined ? undefined : JSON.stringify(body));
    const [response] = (await once(request, 'response')) as [http.IncomingMessage];
    const [socket] = await serverSide;
    let seen = '';
    response.setEncoding('utf8');
    // Read on its own: leaving the loop leaves the connection open, until `cut()`.
    for await (const chunk of response.iterator({ destroyOnReturn: false })) {
      seen += chunk as string;
      if (seen.includes(text)) break;
    }
    const cut = async (): Promise<void> => {
      const closed = socket.destroyed ? Promise.resolve() : once(socket, 'close').then(() => undefined);
      request.destroy();
      await settleWithin(closed, 10_000);
    };
    return { status: response.statusCode ?? 0, seen, cut };
  }

  it('frees a live stream\'s place when its client goes, before its run has unwound', async () => {
    const first = await streamUntil('/saving/stream', { input: {} }, 'first');
    expect(first.status).toBe(200);
    await first.cut();
    // Its run is still taking back its save.
    expect(server.app.runnel.streams.size).toBe(1);
    const next = await post('/slow/stream', { input: { count: 1 } });
    expect([next.status, await next.text()]).toEqual([200, expect.stringContaining('event: end')]);
    // Let go up to the key's share, no more: cut in a loop, streams still stopping would pile up past it (a review).
    const second = await streamUntil('/saving/stream', { input: {} }, 'first');
    expect(second.status).toBe(200);
    await second.cut();
    expect(server.app.runnel.streams.size).toBe(2);
    const third = await post('/slow/stream', { input: { count: 1 } });
    expect([third.status, (await third.json()) as unknown]).toEqual([429, expect.objectContaining({ code: 'RUNNEL_ERR_TOO_MANY_STREAMS' })]);
    release();
    await streamsEnded();
  });

  it('lets a client rejoin the durable run it lost, in the place the run holds', async () => {
    const stream = await streamUntil('/slow/stream', { input: {}, on_disconnect: 'continue' }, 't1 ');
    expect(stream.status).toBe(200);
    const runId = /"run_id":"([^"]+)"/.exec(stream.seen)?.[1];
    const lastId = [...stream.seen.matchAll(/^id: (.+)$/gm)].at(-1)?.[1] ?? '';
    await stream.cut();
    // The run goes on without its client and keeps the key's place: another stream is refused.
    const other = await post('/slow/stream', { input: { count: 1 } });
    expect([other.status, (await other.json()) as unknown]).toEqual([429, expect.objectContaining({ code: 'RUNNEL_ERR_TOO_MANY_STREAMS' })]);
    const rejoined = await streamUntil(`/slow/runs/${runId}/stream`, undefined, 't2 ', { 'last-event-id': lastId });
    expect([rejoined.status, rejoined.seen]).toEqual([200, expect.stringContaining('t2 ')]);
    // A second reader of the run while the first is there is a stream of its own (a review: every rejoin was let
    // in, and one key took every slot of the server through one run).
    const second = await fetch(`${server.url}/slow/runs/${runId}/stream`, { headers: { authorization } });
    expect([second.status, (await second.json()) as unknown]).toEqual([429, expect.objectContaining({ code: 'RUNNEL_ERR_TOO_MANY_STREAMS' })]);
    // The reader gone in turn (a page reloaded again), the next one takes the run's place.
    await rejoined.cut();
    const again = await streamUntil(`/slow/runs/${runId}/stream`, undefined, 't3 ', { 'last-event-id': lastId });
    expect([again.status, again.seen]).toEqual([200, expect.stringContaining('t3 ')]);
    await again.cut();
    expect((await post(`/slow/runs/${runId}/cancel`, {})).status).toBe(200);
    await streamsEnded();
  });

  // A review: a stream still stopping, a durable run and its reader took three slots of the server on a share
  // of one. The slots a key holds, its client there or not, are at most twice its share.
  it('holds a key to twice its share of slots, whatever its clients do', async () => {
    const stopping = await streamUntil('/saving/stream', { input: {} }, 'first');
    await stopping.cut();
    const stream = await streamUntil('/slow/stream', { input: {}, on_disconnect: 'continue' }, 't1 ');
    expect(stream.status).toBe(200);
    const runId = /"run_id":"([^"]+)"/.exec(stream.seen)?.[1];
    await stream.cut();
    expect(server.app.runnel.streams.size).toBe(2);
    const rejoin = await fetch(`${server.url}/slow/runs/${runId}/stream`, { headers: { authorization } });
    expect([rejoin.status, (await rejoin.json()) as unknown]).toEqual([429, expect.objectContaining({ code: 'RUNNEL_ERR_TOO_MANY_STREAMS' })]);
    // The stopped stream gone, the run's place is the rejoin's.
    release();
    while (server.app.runnel.streams.size > 1) await new Promise((resolve) => setTimeout(resolve, 10));
    const rejoined = await streamUntil(`/slow/runs/${runId}/stream`, undefined, 'event: data');
    expect(rejoined.status).toBe(200);
    await rejoined.cut();
    expect((await post(`/slow/runs/${runId}/cancel`, {})).status).toBe(200);
  });
});
