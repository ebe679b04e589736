/**
 * `stream(input, { onDisconnect: 'continue' })` against a real server whose
 * connection really drops: a TCP proxy cuts the response in the middle of
 * its 5th data frame, once. The client rejoins the run with Last-Event-ID
 * and the consumer gets every chunk exactly once — on the in-process queue
 * and on BullMQ in Redis. With rejoins off, the drop surfaces with the run id
 * and the last frame's id, and `join` from there gives exactly the rest.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isRunnelError, lambda, RemoteRunnable, type StreamEvent } from '../../src/index.js';
import { settleWithin, toArray } from '../helpers.js';
import { STORY } from '../support/run-server.js';
import { cuttingProxy, type CuttingProxy } from './cutting-proxy.js';
import { auth, startRunApp, type RunApp } from './run-app.js';

const REJOIN = /GET \/story\/runs\/[\w-]+\/stream HTTP\/1\.1\r\n(?:[^\r\n]+\r\n)*last-event-id: \S+\r\n/i;

for (const backend of ['memory', 'redis'] as const) {
  describe(`a durable stream that loses its connection (${backend === 'memory' ? 'in-process queue' : 'BullMQ on Redis'})`, () => {
    let app: RunApp;
    let proxy: CuttingProxy | undefined;
    let expected: string[];

    beforeAll(async () => {
      app = await startRunApp(backend);
      // The chunks as a plain stream gives them, straight to the server.
      expected = await toArray(new RemoteRunnable<{ topic: string }, string>({ url: `${app.url}/story`, headers: auth('ada') }).stream({ topic: 'x' }));
      expect(expected.join('')).toBe(STORY);
    });
    afterEach(async () => {
      await proxy?.close();
      proxy = undefined;
    });
    afterAll(async () => app.close());

    const story = async (options: { resume?: { attempts: number } } = {}) => {
      proxy = await cuttingProxy(app.port, { marker: 'event: data', nth: 5 });
      return new RemoteRunnable<{ topic: string }, string>({ url: `${proxy.url}/story`, headers: auth('ada'), ...options });
    };

    it('rejoins after the drop: the consumer gets every chunk exactly once', async () => {
      const remote = await story();
      const chunks = await settleWithin(toArray(remote.stream({ topic: 'x' }, { onDisconnect: 'continue' })), 15_000);
      expect(proxy?.cuts).toBe(1);
      expect(proxy?.sent).toMatch(/"on_disconnect":"continue"/);
      expect(proxy?.sent).toMatch(REJOIN);
      expect(chunks).toEqual(expected);
    });

    it('with rejoins off, the drop is an error naming the run and the last frame; join from there gives exactly the rest', async () => {
      const remote = await story({ resume: { attempts: 0 } });
      const seen: string[] = [];
      const failure = await settleWithin(
        (async () => {
          for await (const chunk of remote.stream({ topic: 'x' }, { onDisconnect: 'continue' })) seen.push(chunk);
        })().then(
          () => undefined,
          (error: unknown) => error,
        ),
        30_000,
      );
      expect(proxy?.cuts).toBe(1);
      expect(proxy?.sent).not.toMatch(REJOIN);
      expect(failure).toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_UNAVAILABLE', detail: { run_id: expect.any(String), last_event_id: expect.any(String) } });
      // Cut in the middle of the 5th data frame: the first four arrived whole, the fifth not at all.
      expect(seen).toEqual(expected.slice(0, 4));
      const detail = (isRunnelError(failure) ? failure.detail : {}) as { run_id: string; last_event_id: string };
      const rest = await toArray(remote.join(detail.run_id, { lastEventId: detail.last_event_id }));
      expect([...seen, ...rest]).toEqual(expected);
    });

    it('an abort closes the connection without rejoining; the run goes on', async () => {
      proxy = await cuttingProxy(app.port, { marker: 'event: data', nth: Number.MAX_SAFE_INTEGER });
      const remote = new RemoteRunnable<{ topic: string }, string>({ url: `${proxy.url}/story`, headers: auth('ada') });
      const controller = new AbortController();
      const stream = remote.stream({ topic: 'x' }, { onDisconnect: 'continue', signal: controller.signal });
      await stream.next();
      controller.abort();
      await expect(stream.next()).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
      expect(proxy.sent).not.toMatch(REJOIN);
      const listed = (await (await fetch(`${app.url}/story/runs?limit=1`, { headers: auth('ada') })).json()) as { runs: { run_id: string }[] };
      expect(await remote.wait(listed.runs[0]?.run_id as string, { timeoutS: 60 })).toMatchObject({ status: 'success', output: STORY });
    });

    it('streamEvents rejoins too, with onDisconnect set on the client (and inside a chain)', async () => {
      proxy = await cuttingProxy(app.port, { marker: 'event: data', nth: 5 });
      const remote = new RemoteRunnable<{ topic: string }, string>({ url: `${proxy.url}/story`, headers: auth('ada'), onDisconnect: 'continue' });
      const events: StreamEvent[] = await settleWithin(toArray(remote.streamEvents({ topic: 'x' }, {}, { includeTypes: ['chat_model'] })), 15_000);
      expect(proxy.cuts).toBe(1);
      expect(proxy.sent).toMatch(REJOIN);
      const text = events.filter((e) => e.event === 'on_chat_model_stream').map((e) => (e.data as { chunk: { content: string } }).chunk.content);
      expect(text.join('')).toBe(STORY);
      expect(events.filter((e) => e.event === 'on_chat_model_end')).toHaveLength(1);

      await proxy.close();
      proxy = await cuttingProxy(app.port, { marker: 'event: data', nth: 5 });
      const viaProxy = new RemoteRunnable<{ topic: string }, string>({ url: `${proxy.url}/story`, headers: auth('ada'), onDisconnect: 'continue' });
      const chain = lambda((topic: string) => ({ topic })).pipe(viaProxy);
      expect(await settleWithin(toArray(chain.stream('x')), 15_000)).toEqual(expected);
      expect(proxy.cuts).toBe(1);
    });
  });
}
