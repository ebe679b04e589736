/**
 * Background runs through the HTTP API, in one process: on the in-process
 * queue (no Redis) and on BullMQ with Redis. Submit, wait, stream with ids,
 * resume with Last-Event-ID, replay a finished run, list, cancel, scope by
 * caller, validate before anything is queued, and durable /stream.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frames } from '../support/sse-frames.js';
import { z } from 'zod';
import { buildApp, connectServices, defineChain, lambda, type ChainSpec, type Services } from '../../src/index.js';
import { runChains, STORY } from '../support/run-server.js';

const keys = { ada: 'ada-key-0123456789abcdef', bob: 'bob-key-0123456789abcdef' };
const as = (who: keyof typeof keys) => ({ authorization: `Bearer ${keys[who]}`, 'content-type': 'application/json' });


for (const backend of ['memory', 'redis'] as const) {
  describe(`background runs (${backend === 'memory' ? 'in-process queue' : 'BullMQ on Redis'})`, () => {
    let app: FastifyInstance;
    let services: Services | undefined;
    let url: string;

    beforeAll(async () => {
      const runNamespace = `runnel-test-${randomUUID()}`;
      services = backend === 'redis' ? await connectServices({ redisUrl: 'redis://127.0.0.1:6379', namespace: runNamespace }) : undefined;
      app = await buildApp({
        chains: runChains as ChainSpec<never, unknown>[],
        services,
        config: { apiKeys: Object.entries(keys).map(([name, key]) => ({ name, key })), runNamespace, workerConcurrency: 4 },
      });
      await app.listen({ port: 0, host: '127.0.0.1' });
      url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    });
    afterAll(async () => app.close());

    const submit = async (path: string, body: unknown, who: keyof typeof keys = 'ada') => fetch(`${url}${path}/runs`, { method: 'POST', headers: as(who), body: JSON.stringify(body) });

    it('runs in the background: 202 pending with Location; wait gives the output /invoke gives; the stream replays with ids', async () => {
      const res = await submit('/story', { input: { topic: 'a' } });
      expect(res.status).toBe(202);
      const run = (await res.json()) as { run_id: string; status: string };
      expect(run.status).toBe('pending');
      expect(res.headers.get('location')).toBe(`/story/runs/${run.run_id}`);
      const waited = await fetch(`${url}/story/runs/${run.run_id}/wait?timeout_s=60`, { headers: as('ada') });
      expect(waited.status).toBe(200);
      const record = (await waited.json()) as { status: string; output: unknown; usage?: unknown };
      const invoked = (await (await fetch(`${url}/story/invoke`, { method: 'POST', headers: as('ada'), body: JSON.stringify({ input: { topic: 'a' } }) })).json()) as { output: string };
      expect(record).toMatchObject({ status: 'success', output: invoked.output });
      expect(invoked.output).toBe(STORY);
      expect(record.usage).toMatchObject({ output_tokens: expect.any(Number) });

      const replay = frames(await (await fetch(`${url}/story/runs/${run.run_id}/stream`, { headers: as('ada') })).text());
      expect(replay[0]).toMatchObject({ event: 'metadata', data: { run_id: run.run_id } });
      expect(replay.at(-1)?.event).toBe('end');
      expect(replay.every((frame) => typeof frame.id === 'string')).toBe(true);
      expect(replay.filter((f) => f.event === 'data').map((f) => f.data).join('')).toBe(STORY);
      // Resume after the 4th frame: exactly the frames after it, none twice, none missing.
      const resumed = frames(await (await fetch(`${url}/story/runs/${run.run_id}/stream`, { headers: { ...as('ada'), 'last-event-id': replay[3]?.id as string } })).text());
      expect(resumed).toEqual(replay.slice(4));

      // A trial: any id of the right shape was taken — another run's replayed this whole run, one past the end
      // answered 204. Neither is a frame of this run: 400, naming the header.
      const other = (await (await submit('/story', { input: { topic: 'b' } })).json()) as { run_id: string };
      await fetch(`${url}/story/runs/${other.run_id}/wait?timeout_s=60`, { headers: as('ada') });
      const otherFrames = frames(await (await fetch(`${url}/story/runs/${other.run_id}/stream`, { headers: as('ada') })).text());
      const lastId = replay.at(-1)?.id as string;
      const past = lastId.includes('-') ? `${Number(lastId.split('-')[0]) + 1_000_000}-0` : String(Number(lastId) + 100_000);
      for (const foreign of [otherFrames[3]?.id as string, past]) {
        const res = await fetch(`${url}/story/runs/${run.run_id}/stream`, { headers: { ...as('ada'), 'last-event-id': foreign } });
        expect(res.status, foreign).toBe(400);
        expect(((await res.json()) as { detail: { loc: unknown[] }[] }).detail[0]?.loc).toEqual(['header', 'last-event-id']);
      }
      // The run's own last id still answers 204: nothing follows it.
      expect((await fetch(`${url}/story/runs/${run.run_id}/stream`, { headers: { ...as('ada'), 'last-event-id': lastId } })).status).toBe(204);
    });

    // A review: a client that rejoins after the `end` frame before the run's record has ended (the worker
    // writes the log's end, then the record) was sent an error frame saying the log had no end.
    it('closes a rejoin after the last frame quietly when the record ends after it came, then answers 204', async () => {
      const store = app.runnel.runQueue().store;
      const runId = randomUUID();
      const now = new Date().toISOString();
      await store.create({ run_id: runId, chain: '/story', kind: 'run', identity: 'ada', status: 'running', input: { topic: 'a' }, config: {}, created_at: now, updated_at: now });
      const ids = await store.append(runId, [{ event: 'data', data: 'x' }, { event: 'end' }]);
      const rejoined = await fetch(`${url}/story/runs/${runId}/stream`, { headers: { ...as('ada'), 'last-event-id': ids[1] as string } });
      expect(rejoined.status).toBe(200);
      await store.update(runId, { status: 'success', output: 'x' });
      expect(frames(await rejoined.text())).toEqual([]);
      expect((await fetch(`${url}/story/runs/${runId}/stream`, { headers: { ...as('ada'), 'last-event-id': ids[1] as string } })).status).toBe(204);
    });

    it('answers a bad submission with the same 4xx as /invoke, queueing nothing', async () => {
      const before = ((await (await fetch(`${url}/story/runs?limit=100`, { headers: as('ada') })).json()) as { runs: unknown[] }).runs.length;
      const res = await submit('/story', { input: { topic: 5 } });
      expect(res.status).toBe(422);
      expect(((await res.json()) as { code: string }).code).toBe('RUNNEL_ERR_INPUT_INVALID');
      const webhook = await submit('/story', { input: { topic: 'x' }, webhook: 'https://evil.example.com/' });
      expect(webhook.status).toBe(422);
      expect(((await webhook.json()) as { code: string }).code).toBe('RUNNEL_ERR_WEBHOOK_NOT_ALLOWED');
      const after = ((await (await fetch(`${url}/story/runs?limit=100`, { headers: as('ada') })).json()) as { runs: unknown[] }).runs.length;
      expect(after).toBe(before);
    });

    it('refuses a webhook where none would be called: /invoke, /batch, and streams that end with their request', async () => {
      // A probe: the field was ignored there, so a client waited for a call that never came.
      const webhook = 'https://hooks.example.com/done';
      const routes: [string, Record<string, unknown>][] = [
        ['invoke', { input: { topic: 'w' } }],
        ['batch', { inputs: [{ topic: 'w' }] }],
        ['stream', { input: { topic: 'w' } }],
        ['stream_events', { input: { topic: 'w' } }],
        ['stream_log', { input: { topic: 'w' } }],
      ];
      for (const [route, body] of routes) {
        const res = await fetch(`${url}/story/${route}`, { method: 'POST', headers: as('ada'), body: JSON.stringify({ ...body, webhook }) });
        expect(res.status, route).toBe(422);
        const answer = (await res.json()) as { code: string; message: string; detail: { loc: unknown[] }[] };
        expect(answer.code, route).toBe('RUNNEL_ERR_BODY_INVALID');
        expect(answer.detail[0]?.loc, route).toEqual(['webhook']);
        expect(answer.message, route).toContain('POST /story/runs');
        expect(answer.message.includes('on_disconnect'), route).toBe(route === 'stream' || route === 'stream_events');
      }
      // null is no webhook, as a submission reads it.
      expect((await fetch(`${url}/story/invoke`, { method: 'POST', headers: as('ada'), body: JSON.stringify({ input: { topic: 'w' }, webhook: null }) })).status).toBe(200);
    });

    it('cancels a run under way within a second; its stream ends with an error frame', async () => {
      const run = (await (await submit('/long', { input: { topic: 'c' } })).json()) as { run_id: string };
      // Wait until it runs and has streamed something.
      const stream = await fetch(`${url}/long/runs/${run.run_id}/stream`, { headers: as('ada') });
      const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
      let seen = '';
      while (!seen.includes('event: data')) seen += new TextDecoder().decode((await reader.read()).value);
      const started = performance.now();
      const cancelled = (await (await fetch(`${url}/long/runs/${run.run_id}/cancel`, { method: 'POST', headers: as('ada') })).json()) as { status: string; error?: { code: string } };
      expect(cancelled.status).toBe('cancelled');
      expect(cancelled.error?.code).toBe('RUNNEL_ERR_RUN_CANCELLED');
      expect(performance.now() - started).toBeLessThan(60_000); // a hang guard; the answer waits for the end (≤ 2 s)
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        seen += new TextDecoder().decode(value);
      }
      expect(frames(seen).at(-1)).toMatchObject({ event: 'error', data: { code: 'RUNNEL_ERR_RUN_CANCELLED' } });
    });

    it("another caller's run does not exist for them: 404 everywhere, and not listed", async () => {
      const run = (await (await submit('/noop', { input: { n: 1 } })).json()) as { run_id: string };
      for (const [method, path] of [
        ['GET', `/noop/runs/${run.run_id}`],
        ['GET', `/noop/runs/${run.run_id}/wait?timeout_s=0`],
        ['GET', `/noop/runs/${run.run_id}/stream`],
        ['POST', `/noop/runs/${run.run_id}/cancel`],
        ['GET', `/story/runs/${run.run_id}`],
      ] as const) {
        const res = await fetch(`${url}${path}`, { method, headers: as(path.startsWith('/story') ? 'ada' : 'bob') });
        expect(res.status, `${method} ${path}`).toBe(404);
      }
      const listed = (await (await fetch(`${url}/noop/runs`, { headers: as('bob') })).json()) as { runs: { run_id: string }[] };
      expect(listed.runs.map((r) => r.run_id)).not.toContain(run.run_id);
      const mine = (await (await fetch(`${url}/noop/runs?status=success&limit=5`, { headers: as('ada') })).json()) as { runs: { run_id: string; status: string }[] };
      await fetch(`${url}/noop/runs/${run.run_id}/wait`, { headers: as('ada') });
      const again = (await (await fetch(`${url}/noop/runs?limit=5`, { headers: as('ada') })).json()) as { runs: { run_id: string }[] };
      expect(again.runs[0]?.run_id).toBe(run.run_id);
      expect(mine.runs.every((r) => r.status === 'success')).toBe(true);
    });

    it("names every run itself: a client's config.run_id never lands on another caller's run", async () => {
      const chosen = randomUUID();
      const ada = (await (await submit('/noop', { input: { n: 1 }, config: { run_id: chosen } })).json()) as { run_id: string };
      await fetch(`${url}/noop/runs/${ada.run_id}/wait`, { headers: as('ada') });
      const bob = (await (await submit('/noop', { input: { n: 2 }, config: { run_id: chosen } }, 'bob')).json()) as { run_id: string };
      expect(new Set([ada.run_id, bob.run_id, chosen]).size).toBe(3);
      expect(((await (await fetch(`${url}/noop/runs/${ada.run_id}/wait`, { headers: as('ada') })).json()) as { output: number }).output).toBe(1);
      expect((await fetch(`${url}/noop/runs/${ada.run_id}`, { headers: as('bob') })).status).toBe(404);
      expect(((await (await fetch(`${url}/noop/runs/${bob.run_id}/wait`, { headers: as('bob') })).json()) as { output: number }).output).toBe(2);
    });

    it('refuses query values out of their range or shape: 400 naming the parameter', async () => {
      // A trial: 0x10, 1e1, +5, 5.0, 0b11 and an empty value were taken (Number() reads them all).
      for (const query of ['limit=0', 'limit=abc', 'limit=1.5', 'limit=101', 'limit=0x10', 'limit=1e1', 'limit=%2B5', 'limit=5.0', 'limit=0b11', 'limit=', 'limit=1&limit=2']) {
        const res = await fetch(`${url}/story/runs?${query}`, { headers: as('ada') });
        expect(res.status, query).toBe(400);
        expect(((await res.json()) as { detail: { loc: unknown[] }[] }).detail[0]?.loc, query).toEqual(['query', 'limit']);
      }
      expect((await fetch(`${url}/story/runs?limit=3`, { headers: as('ada') })).status).toBe(200);
      const run = (await (await submit('/story', { input: { topic: 'q' } })).json()) as { run_id: string };
      for (const query of ['timeout_s=0x10', 'timeout_s=1e1', 'timeout_s=', 'timeout_s=-1', `timeout_s=1.${'9'.repeat(40)}`]) {
        const res = await fetch(`${url}/story/runs/${run.run_id}/wait?${query}`, { headers: as('ada') });
        expect(res.status, query).toBe(400);
        await res.arrayBuffer();
      }
      // A number in range with many decimals is one (a probe: 1.9999999 was refused "from 0 to 300").
      const waited = await fetch(`${url}/story/runs/${run.run_id}/wait?timeout_s=59.9999999`, { headers: as('ada') });
      expect(waited.status).toBe(200);
      await waited.arrayBuffer();
    });

    // A probe: HEAD on a running run's stream sent nothing, headers included, until the run ended.
    it("answers HEAD on a running run's stream with its headers at once, and no body", async () => {
      const run = (await (await submit('/long', { input: { topic: 'h' } })).json()) as { run_id: string };
      try {
        const head = await fetch(`${url}/long/runs/${run.run_id}/stream`, { method: 'HEAD', headers: as('ada') });
        expect([head.status, head.headers.get('content-type'), head.headers.get('content-length')]).toEqual([200, 'text/event-stream; charset=utf-8', null]);
        expect(await head.text()).toBe('');
        expect((await fetch(`${url}/long/runs/${run.run_id}/stream`, { method: 'HEAD', headers: as('bob') })).status).toBe(404);
      } finally {
        await fetch(`${url}/long/runs/${run.run_id}/cancel`, { method: 'POST', headers: as('ada') });
      }
    });

    it('wait is bounded: 408 with the record as it is', async () => {
      const run = (await (await submit('/long', { input: { topic: 'w' } })).json()) as { run_id: string };
      const res = await fetch(`${url}/long/runs/${run.run_id}/wait?timeout_s=0`, { headers: as('ada') });
      expect(res.status).toBe(408);
      expect(((await res.json()) as { status: string }).status).toMatch(/pending|running/);
      await fetch(`${url}/long/runs/${run.run_id}/cancel`, { method: 'POST', headers: as('ada') });
    });

    it('/stream with on_disconnect "continue": framed as /stream with ids and the run id; a dropped client rejoins with Last-Event-ID', async () => {
      const res = await fetch(`${url}/story/stream`, { method: 'POST', headers: as('ada'), body: JSON.stringify({ input: { topic: 'd' }, on_disconnect: 'continue' }) });
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      let seen = '';
      while (frames(seen).filter((f) => f.event === 'data').length < 3) seen += new TextDecoder().decode((await reader.read()).value);
      await reader.cancel();
      const got = frames(seen).filter((f) => f.event === 'metadata' || f.event === 'data');
      const runId = (got[0]?.data as { run_id: string }).run_id;
      const last = got.at(-1)?.id as string;
      const rest = frames(await (await fetch(`${url}/story/runs/${runId}/stream`, { headers: { ...as('ada'), 'last-event-id': last } })).text());
      const text = [...got, ...rest].filter((f) => f.event === 'data').map((f) => f.data).join('');
      expect(text).toBe(STORY);
      expect(rest.at(-1)?.event).toBe('end');
      expect((await fetch(`${url}/story/stream_log`, { method: 'POST', headers: as('ada'), body: JSON.stringify({ input: { topic: 'd' }, on_disconnect: 'continue' }) })).status).toBe(422);
      // A durable /stream_events run records the chain's output too.
      const events = frames(await (await fetch(`${url}/story/stream_events`, { method: 'POST', headers: as('ada'), body: JSON.stringify({ input: { topic: 'e' }, on_disconnect: 'continue' }) })).text());
      const eventsRun = (events[0]?.data as { run_id: string }).run_id;
      expect(events.at(-1)?.event).toBe('end');
      expect(((await (await fetch(`${url}/story/runs/${eventsRun}`, { headers: as('ada') })).json()) as { output: unknown }).output).toBe(STORY);
    });

    // A probe: a filter that leaves out the root run's end event (the output /invoke gives) stored `output:
    // null` — in the record and in its webhook — though the run succeeded.
    it("a durable /stream_events with filters still records the chain's output; only the frames are filtered", async () => {
      const onlyModel = (event: { name: string }) => event.name === 'FakeListChatModel';
      const notRoot = (event: { name: string }) => event.name !== '/story';
      for (const [filters, kept] of [
        [{ include_types: ['chat_model'] }, onlyModel],
        [{ exclude_names: ['/story'] }, notRoot],
        [{ include_names: ['FakeListChatModel'] }, onlyModel],
      ] as const) {
        const events = frames(await (await fetch(`${url}/story/stream_events`, { method: 'POST', headers: as('ada'), body: JSON.stringify({ input: { topic: 'f' }, on_disconnect: 'continue', ...filters }) })).text());
        const runId = (events[0]?.data as { run_id: string }).run_id;
        const data = events.filter((frame) => frame.event === 'data').map((frame) => frame.data as { event: string; name: string });
        expect(data.length, JSON.stringify(filters)).toBeGreaterThan(0);
        expect(data.every(kept), JSON.stringify(filters)).toBe(true);
        const record = (await (await fetch(`${url}/story/runs/${runId}`, { headers: as('ada') })).json()) as { status: string; output: unknown };
        expect(record, JSON.stringify(filters)).toMatchObject({ status: 'success', output: STORY });
      }
    });

    // A probe: an id one past a finished run's last frame — the same execution's ids, `{base}-{n + 1}` —
    // answered 204 on Redis, as if it were the last frame; a client holding it never heard how the run ended.
    it('Last-Event-ID one past the last frame of a finished run is not one of its frames: 400', async () => {
      const run = (await (await submit('/story', { input: { topic: 'p' } })).json()) as { run_id: string };
      await fetch(`${url}/story/runs/${run.run_id}/wait?timeout_s=60`, { headers: as('ada') });
      const replay = frames(await (await fetch(`${url}/story/runs/${run.run_id}/stream`, { headers: as('ada') })).text());
      const lastId = replay.at(-1)?.id as string;
      const next = lastId.includes('-') ? lastId.replace(/\d+$/, (n) => String(Number(n) + 1)) : String(Number(lastId) + 1);
      const later = lastId.includes('-') ? lastId.replace(/\d+$/, (n) => String(Number(n) + 5_000)) : String(Number(lastId) + 5_000);
      for (const id of [next, later]) {
        const res = await fetch(`${url}/story/runs/${run.run_id}/stream`, { headers: { ...as('ada'), 'last-event-id': id } });
        expect(res.status, id).toBe(400);
      }
      // A durable stream's run (ids from 1) the same.
      const own = frames(await (await fetch(`${url}/story/stream`, { method: 'POST', headers: as('ada'), body: JSON.stringify({ input: { topic: 'q' }, on_disconnect: 'continue' }) })).text());
      const ownRun = (own[0]?.data as { run_id: string }).run_id;
      const ownLast = own.at(-1)?.id as string;
      const ownNext = ownLast.includes('-') ? ownLast.replace(/\d+$/, (n) => String(Number(n) + 1)) : String(Number(ownLast) + 1);
      expect((await fetch(`${url}/story/runs/${ownRun}/stream`, { headers: { ...as('ada'), 'last-event-id': ownNext } })).status).toBe(400);
      expect((await fetch(`${url}/story/runs/${ownRun}/stream`, { headers: { ...as('ada'), 'last-event-id': ownLast } })).status).toBe(204);
    });
  });
}

// A probe: a chain without the runs endpoint took on_disconnect "continue", gave a run id, and went on after its
// client left — a run nobody could rejoin (its /runs/{id}/stream is a 404), wait for or cancel.
describe('a durable stream needs the chain\'s runs endpoint', () => {
  let app: FastifyInstance;
  let url: string;
  const calls: string[] = [];

  beforeAll(async () => {
    const echo = lambda((input: { topic: string }) => {
      calls.push(input.topic);
      return input.topic;
    });
    app = await buildApp({
      chains: [
        defineChain({
          path: '/noruns',
          runnable: echo,
          inputSchema: z.object({ topic: z.string() }),
          messages: { toInput: ({ turns }) => ({ input: { topic: turns.at(-1)?.text ?? '' } }) },
          enabledEndpoints: ['invoke', 'stream', 'stream_events', 'ui_stream'],
        }),
      ] as ChainSpec<never, unknown>[],
      config: { apiKeys: [{ name: 'ada', key: keys.ada }] },
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => app.close());

  it('on_disconnect "continue" is a 422 naming it, before anything runs; "cancel" streams as before', async () => {
    const uiBody = { id: 'chat-1', messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'ui' }] }] };
    for (const [route, body] of [
      ['stream', { input: { topic: 'a' } }],
      ['stream_events', { input: { topic: 'b' } }],
      ['ui_stream', uiBody],
    ] as const) {
      const res = await fetch(`${url}/noruns/${route}`, { method: 'POST', headers: as('ada'), body: JSON.stringify({ ...body, on_disconnect: 'continue' }) });
      expect(res.status, route).toBe(422);
      const answer = (await res.json()) as { code: string; message: string; detail: { loc: unknown[] }[] };
      expect(answer.code, route).toBe('RUNNEL_ERR_BODY_INVALID');
      expect(answer.message, route).toContain('runs endpoint');
      expect(answer.detail[0]?.loc, route).toEqual(['on_disconnect']);
    }
    expect(calls).toEqual([]);
    const plain = frames(await (await fetch(`${url}/noruns/stream`, { method: 'POST', headers: as('ada'), body: JSON.stringify({ input: { topic: 'c' }, on_disconnect: 'cancel' }) })).text());
    expect(plain.filter((frame) => frame.event === 'data').map((frame) => frame.data)).toEqual(['c']);
    expect((await fetch(`${url}/noruns/runs`, { headers: as('ada') })).status).toBe(404);
  });
});

// A review of the listing: a hundred runs with outputs of a megabyte made one answer of a hundred megabytes,
// built whole in the server before its first byte went out — for each such request. A long listing is now
// written as its runs are read; a short one is answered whole, as before.
for (const backend of ['memory', 'redis'] as const) {
  describe(`a listing of runs with large outputs (${backend})`, () => {
    let app: FastifyInstance;
    let url: string;

    beforeAll(async () => {
      const runNamespace = `runnel-test-${randomUUID()}`;
      // Commands may wait 10 s, not a server's 500 ms: records of a megabyte on a loaded 2-core machine.
      const services = backend === 'redis' ? await connectServices({ redisUrl: 'redis://127.0.0.1:6379', namespace: runNamespace, redisCommandTimeoutMs: 10_000 }) : undefined;
      app = await buildApp({
        chains: [defineChain({ path: '/echo', runnable: lambda((input: { text: string }) => input.text), inputSchema: z.object({ text: z.string() }) })] as ChainSpec<never, unknown>[],
        services,
        config: { apiKeys: [{ name: 'ada', key: keys.ada }], runNamespace },
      });
      await app.listen({ port: 0, host: '127.0.0.1' });
      url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    });
    afterAll(async () => app.close());

    it('writes a long listing as it reads it, the same runs and fields a short one gives', async () => {
      const texts = ['a', 'b', 'c', 'd'].map((letter) => letter.repeat(400_000));
      const ids: string[] = [];
      for (const text of texts) {
        const run = (await (await fetch(`${url}/echo/runs`, { method: 'POST', headers: as('ada'), body: JSON.stringify({ input: { text } }) })).json()) as { run_id: string };
        // Read whole: an answer of 400 KB left unread holds its connection busy, and the app's close waits for it.
        const waited = await fetch(`${url}/echo/runs/${run.run_id}/wait?timeout_s=60`, { headers: as('ada') });
        expect(waited.status).toBe(200);
        await waited.text();
        ids.push(run.run_id);
      }
      const long = await fetch(`${url}/echo/runs?limit=10`, { headers: as('ada') });
      expect(long.status).toBe(200);
      expect(long.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(long.headers.get('transfer-encoding')).toBe('chunked');
      expect(long.headers.get('content-length')).toBeNull();
      const listed = ((await long.json()) as { runs: { run_id: string; output: string }[] }).runs;
      expect(listed.map((run) => run.run_id)).toEqual([...ids].reverse());
      expect(listed.map((run) => run.output)).toEqual([...texts].reverse());

      const short = await fetch(`${url}/echo/runs?limit=1`, { headers: as('ada') });
      expect(short.headers.get('content-length')).not.toBeNull();
      const [newest] = ((await short.json()) as { runs: Record<string, unknown>[] }).runs;
      const record = (await (await fetch(`${url}/echo/runs/${ids.at(-1) as string}`, { headers: as('ada') })).json()) as Record<string, unknown>;
      expect(newest).toEqual(record);
      expect(Object.keys(listed[0] as object).sort()).toEqual(Object.keys(record).sort());
    });
  });
}
