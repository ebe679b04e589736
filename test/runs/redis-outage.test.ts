/**
 * Redis stops answering under a background run (SIGSTOP, then SIGCONT): the
 * process does not crash (no unhandled rejection), and the run does not stay
 * `running` — it ends once Redis answers again.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, connectServices, type ChainSpec } from '../../src/index.js';
import { gatedChain } from '../support/gated-essay.js';
import { RedisServer } from '../support/redis-server.js';
import { runChains } from '../support/run-server.js';
import { rest } from '../support/sse-frames.js';
import { settleWithin } from '../helpers.js';

let redis: RedisServer;
let app: FastifyInstance;
let url: string;
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown): void => void unhandled.push(reason);

/** `/gated`, held under way until the test opens it. */
const { chain: gated, open: openGate } = gatedChain();

beforeAll(async () => {
  process.on('unhandledRejection', onUnhandled);
  redis = await RedisServer.scratch();
  const services = await connectServices({ redisUrl: redis.url, redisCommandTimeoutMs: 300, namespace: `runnel-test-outage-${randomUUID()}` });
  app = await buildApp({ chains: [...runChains, gated] as ChainSpec<never, unknown>[], services, config: { runNamespace: services.namespace as string, workerConcurrency: 2, runLockMs: 60_000 } });
  await app.listen({ port: 0, host: '127.0.0.1' });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  process.off('unhandledRejection', onUnhandled);
  redis.signal('SIGCONT');
  await app.close();
  await redis.kill();
});

/** A durable stream of `path`, read up to its first data frame: its reader, what it read, and its run id. */
async function openDurable(path: string, topic: string): Promise<{ reader: ReadableStreamDefaultReader<Uint8Array>; text: string; runId: string }> {
  const res = await fetch(`${url}${path}/stream`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { topic }, on_disconnect: 'continue' }) });
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  let text = '';
  while (!text.includes('event: data')) text += new TextDecoder().decode((await reader.read()).value);
  return { reader, text, runId: /"run_id":"([\w-]+)"/.exec(text)?.[1] as string };
}

/** The run's record once it has ended (each wait a second, up to 600). */
async function endedRecord(path: string, runId: string): Promise<{ status: string; error?: { code: string } }> {
  let record: { status: string; error?: { code: string } } = { status: 'running' };
  for (let i = 0; i < 600 && !['success', 'error', 'cancelled'].includes(record.status); i++) {
    const got = await fetch(`${url}${path}/runs/${runId}/wait?timeout_s=1`);
    if (got.status === 200 || got.status === 408) record = (await got.json()) as typeof record;
  }
  return record;
}

describe('Redis stops answering under a run', () => {
  it('no crash, and the run ends once Redis is back', async () => {
    const res = await fetch(`${url}/long/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { topic: 'outage' } }) });
    const run = (await res.json()) as { run_id: string };
    // It runs: a frame is in its log.
    const stream = await fetch(`${url}/long/runs/${run.run_id}/stream`);
    const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
    let seen = '';
    while (!seen.includes('event: data')) seen += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    redis.signal('SIGSTOP');
    // Frames fail to be written now; the executor fails the run and retries ending it.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    redis.signal('SIGCONT');
    expect(await endedRecord('/long', run.run_id)).toMatchObject({ status: 'error', error: { code: 'RUNNEL_ERR_REDIS_UNAVAILABLE' } });
    expect(unhandled).toEqual([]);
  }, 90_000);

  // A probe: a reader's own Redis failure was an `error` frame, which its client (EventSource, RemoteRunnable.join)
  // took for the run's end — and the run, which wrote nothing while Redis was stopped, then succeeded.
  it("a reader whose reads fail (the run's writes do not): closed without an end, so its client rejoins and hears the rest", async () => {
    const res = await fetch(`${url}/gated/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: {} }) });
    const { run_id: runId } = (await res.json()) as { run_id: string };
    const stream = await fetch(`${url}/gated/runs/${runId}/stream`);
    const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
    let text = '';
    while (!text.includes('"before "')) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the stream ended before its first chunk: ${text}`);
      text += new TextDecoder().decode(value);
    }
    redis.signal('SIGSTOP');
    try {
      // The reader polls its log; its read fails, and its stream ends with no end and no error frame.
      text += await rest(reader);
    } finally {
      redis.signal('SIGCONT');
    }
    expect(text.match(/^event: \w+/gm)).toEqual(['event: metadata', 'event: data']);
    // The run goes on: its client rejoins after the last frame it saw and hears the rest, once.
    openGate();
    const lastSeen = [...text.matchAll(/^id: (\S+)/gm)].at(-1)?.[1] as string;
    const again = await fetch(`${url}/gated/runs/${runId}/stream`, { headers: { 'last-event-id': lastSeen } });
    const replay = await again.text();
    expect(replay.match(/^event: \w+/gm)).toEqual(['event: data', 'event: end']);
    expect(replay).toContain('data: "after"');
    expect(await endedRecord('/gated', runId)).toMatchObject({ status: 'success', output: 'before after' });
    expect(unhandled).toEqual([]);
  }, 90_000);

  it('a durable stream whose log stops taking writes mid-run: its client gets the error frame at once, the run ends once Redis is back, and rejoining after the last frame it saw replays that end', async () => {
    const { reader, text: head, runId } = await openDurable('/long', 'mid-run');
    redis.signal('SIGSTOP');
    let text = head;
    try {
      // The stream ends while Redis is still stopped: its last frame says why (before, the client heard only
      // pings until the run could be ended in Redis, and then no error frame at all).
      text = head + (await rest(reader));
      expect(text).toMatch(/event: error\r\ndata: \{[^\n]*"code":"RUNNEL_ERR_REDIS_UNAVAILABLE"[^\n]*\}\r\n\r\n$/);
      expect(text.match(/event: (end|error)/g)).toEqual(['event: error']);
    } finally {
      redis.signal('SIGCONT');
    }
    expect(await endedRecord('/long', runId)).toMatchObject({ status: 'error', error: { code: 'RUNNEL_ERR_REDIS_UNAVAILABLE' } });
    expect(unhandled).toEqual([]);
    // Its client saw frames that were sent before their write failed; rejoining after the last of them (as
    // EventSource does on its own), it hears how the run ended, once — not 400 for an id the log never got.
    const lastSeen = [...text.matchAll(/^id: (\S+)/gm)].at(-1)?.[1] as string;
    const again = await fetch(`${url}/long/runs/${runId}/stream`, { headers: { 'last-event-id': lastSeen } });
    expect(again.status).toBe(200);
    const replay = await again.text();
    expect(replay.match(/^event: \w+/gm)).toEqual(['event: error']);
    expect(replay).toContain('"code":"RUNNEL_ERR_REDIS_UNAVAILABLE"');
  }, 90_000);

  it('a durable stream of a token a tick whose log stops taking writes: no write is made after the first that failed, so its client hears why after one timeout', async () => {
    const store = app.runnel.runQueue().store;
    const append = store.append.bind(store);
    let runId: string | undefined;
    let failed = false;
    let afterFailure = 0;
    store.append = async (...args: Parameters<typeof append>) => {
      if (args[0] === runId && failed) afterFailure += 1;
      try {
        return await append(...args);
      } catch (error) {
        if (args[0] === runId) failed = true;
        throw error;
      }
    };
    try {
      // The run's id is known once its first frame is read; its writes are counted from then on.
      const opened = await openDurable('/story', 'ticks');
      const reader = opened.reader;
      runId = opened.runId;
      redis.signal('SIGSTOP');
      try {
        const text = await rest(reader);
        expect(text).toMatch(/"code":"RUNNEL_ERR_REDIS_UNAVAILABLE"[^\n]*\}\r\n\r\n$/);
        // Before, each batch the chain had made meanwhile waited out its own timeout, one after another.
        expect(failed).toBe(true);
        expect(afterFailure).toBe(0);
      } finally {
        redis.signal('SIGCONT');
      }
      expect(await endedRecord('/story', runId)).toMatchObject({ status: 'error', error: { code: 'RUNNEL_ERR_REDIS_UNAVAILABLE' } });
    } finally {
      store.append = append;
    }
    expect(unhandled).toEqual([]);
  }, 90_000);

  it('a durable stream whose first write times out: 503 before any frame, as any refused request; the run, stored late, does not stay running', async () => {
    // An app of its own (its runs alone in its namespace), sweeping lost runs within a few seconds.
    const services = await connectServices({ redisUrl: redis.url, redisCommandTimeoutMs: 300, namespace: `runnel-test-outage-${randomUUID()}` });
    const quick = await buildApp({ chains: runChains as ChainSpec<never, unknown>[], services, config: { runNamespace: services.namespace as string, workerConcurrency: 1, runLockMs: 1_500 } });
    await quick.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(quick.server.address() as AddressInfo).port}`;
    try {
      redis.signal('SIGSTOP');
      try {
        const res = await fetch(`${base}/story/stream`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { topic: 'down' }, on_disconnect: 'continue' }) });
        // Nothing of the run was sent: an HTTP error a client can tell from a stream (the playground then runs a
        // plain stream; a stream that opened with 200 and an error frame left it nothing to act on).
        expect([res.status, res.headers.get('content-type'), res.headers.get('retry-after')]).toEqual([503, 'application/json; charset=utf-8', '1']);
        expect(await res.json()).toMatchObject({ code: 'RUNNEL_ERR_REDIS_UNAVAILABLE', message: expect.stringMatching(/Redis is unavailable/) });
      } finally {
        redis.signal('SIGCONT');
      }
      // The write that timed out was still on its way: Redis carries it out now, and the run is stored running.
      // Nothing runs it: the replica that refused it ends it as refused as soon as Redis answers (calling no
      // webhook: test/runs/refused-submit.test.ts).
      let runs: { status: string; error?: { code: string } }[] = [];
      for (let i = 0; i < 200; i++) {
        runs = ((await (await fetch(`${base}/story/runs`)).json()) as { runs?: typeof runs }).runs ?? (runs as never);
        if (runs.length > 0 && runs.every((run) => run.status !== 'running')) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(runs).toEqual([expect.objectContaining({ status: 'error', error: { code: 'RUNNEL_ERR_REDIS_UNAVAILABLE', message: 'The run could not be stored in time: its client was told it was refused' } })]);
      // Redis back: the next durable stream goes through.
      const again = await (await fetch(`${base}/story/stream`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { topic: 'up' }, on_disconnect: 'continue' }) })).text();
      expect(again).toMatch(/^id: 1-0\r\nevent: metadata/m);
      expect(again).toContain('event: end');
      expect(unhandled).toEqual([]);
    } finally {
      await quick.close();
    }
  }, 60_000);
});

describe('Redis gone (killed) under the queue', () => {
  it("a scrape does not wait for it: the queue's counts are refused at once, and /metrics answers without the run gauges", async () => {
    const queue = (app as unknown as { runnel: { runQueue(): { counts(): Promise<unknown> } } }).runnel.runQueue();
    await expect(queue.counts()).resolves.toMatchObject({ waiting: expect.any(Number), active: expect.any(Number) });
    await redis.kill();
    // Its connection sees the socket close; until then a count may still be sent (and wait): each try is
    // bounded, and the first after the close must be refused, not queued until Redis returns.
    let refused: unknown;
    for (let i = 0; i < 5 && refused === undefined; i++) {
      refused = await settleWithin(queue.counts(), 5_000).then(
        () => undefined,
        (error: unknown) => error,
      );
      if (refused instanceof Error && refused.message.startsWith('did not settle')) refused = undefined;
    }
    expect(refused).toMatchObject({ code: 'RUNNEL_ERR_REDIS_UNAVAILABLE' });
    const metrics = await settleWithin(fetch(`${url}/metrics`), 5_000);
    expect(metrics.status).toBe(200);
    const text = await metrics.text();
    expect(text).toContain('runnel_open_streams');
    expect(text).not.toMatch(/^runnel_runs\{/m);
  }, 60_000);
});
