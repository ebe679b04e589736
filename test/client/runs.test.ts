/**
 * RemoteRunnable's background runs against a real server, on the in-process
 * queue and on BullMQ in Redis: submit and wait (the output /invoke gives),
 * getRun, join (a replay; a rejoin after a frame gives exactly the rest),
 * cancel, wait's 408 as a record, and the server's errors as RunnelErrors.
 */
import LZString from 'lz-string';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RemoteRunnable, type RunStream } from '../../src/index.js';
import { settleWithin, toArray } from '../helpers.js';
import { STORY } from '../support/run-server.js';
import { auth, startRunApp, type RunApp } from './run-app.js';

/** Reads `count` chunks of a stream and stops (closing its connection). */
async function take<T>(stream: RunStream<T>, count: number): Promise<T[]> {
  const out: T[] = [];
  for await (const chunk of stream) {
    out.push(chunk);
    if (out.length === count) break;
  }
  return out;
}

for (const backend of ['memory', 'redis'] as const) {
  describe(`RemoteRunnable and background runs (${backend === 'memory' ? 'in-process queue' : 'BullMQ on Redis'})`, () => {
    let app: RunApp;
    let story: RemoteRunnable<{ topic: string }, string>;
    let long: RemoteRunnable<{ topic: string }, string>;

    beforeAll(async () => {
      app = await startRunApp(backend);
      story = new RemoteRunnable({ url: `${app.url}/story`, headers: auth('ada') });
      long = new RemoteRunnable({ url: `${app.url}/long`, headers: auth('ada') });
    });
    afterAll(async () => app.close());

    it('submit answers the pending record; wait answers it ended, with the output /invoke gives', async () => {
      const run = await story.submit({ topic: 'a' }, { tags: ['t'] });
      expect(run).toMatchObject({ chain: '/story', status: 'pending', run_id: expect.any(String) });
      const ended = await story.wait(run.run_id, { timeoutS: 60 });
      expect(ended).toMatchObject({ run_id: run.run_id, status: 'success', usage: { output_tokens: expect.any(Number) } });
      expect(ended.output).toBe(await story.invoke({ topic: 'a' }));
      expect(ended.output).toBe(STORY);
      expect(await story.getRun(run.run_id)).toEqual(ended);
    });

    it('join replays a run chunk for chunk as stream gives it; joining after a frame gives exactly the rest', async () => {
      const streamed = await toArray(story.stream({ topic: 'b' }));
      const { run_id: runId } = await story.submit({ topic: 'b' });
      const all = story.join(runId);
      expect(all.runId).toBe(runId);
      expect(await toArray(all)).toEqual(streamed);
      const first = story.join(runId);
      const head = await take(first, 4);
      expect(first.lastEventId).toEqual(expect.any(String));
      const rest = await toArray(story.join(runId, { lastEventId: first.lastEventId }));
      expect([...head, ...rest]).toEqual(streamed);
      // After a whole stream the cursor is before its end frame: joining there ends at once, with nothing.
      expect(await toArray(story.join(runId, { lastEventId: all.lastEventId }))).toEqual([]);
    });

    it('rejoined after its last frame, an ended run answers 204 (SSE: stop reconnecting), and join ends as the run did', async () => {
      /** The id of a run's last frame, read from its log as a client reads it. */
      const lastFrameId = async (path: string, runId: string): Promise<string> => {
        const log = await (await fetch(`${app.url}${path}/runs/${runId}/stream`, { headers: auth('ada') })).text();
        return [...log.matchAll(/^id: (.+)$/gm)].at(-1)?.[1]?.trim() as string;
      };
      const { run_id: runId } = await story.submit({ topic: 'f' });
      await story.wait(runId, { timeoutS: 60 });
      const endId = await lastFrameId('/story', runId);
      const after = await fetch(`${app.url}/story/runs/${runId}/stream`, { headers: { ...auth('ada'), 'last-event-id': endId } });
      expect(after.status).toBe(204);
      expect(await after.text()).toBe('');
      // The client takes it as the end of a run that succeeded: nothing more, no rejoins.
      expect(await settleWithin(toArray(story.join(runId, { lastEventId: endId })), 5_000)).toEqual([]);
      // ... and as the error of one that did not.
      const { run_id: cancelledId } = await long.submit({ topic: 'g' });
      await long.cancel(cancelledId);
      const errorId = await lastFrameId('/long', cancelledId);
      await expect(settleWithin(toArray(long.join(cancelledId, { lastEventId: errorId })), 5_000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_RUN_CANCELLED' });
    });

    it("a durable stream names its run (onRunId): broken out of, it is cancelled by that id", async () => {
      const named: string[] = [];
      for await (const chunk of long.stream({ topic: 'h' }, { onDisconnect: 'continue', onRunId: (runId) => named.push(runId) })) {
        expect(chunk).toEqual(expect.any(String));
        break;
      }
      expect(named).toEqual([expect.any(String)]);
      const runId = named[0] as string;
      expect(await long.cancel(runId)).toMatchObject({ run_id: runId, status: 'cancelled' });
    });

    it('follows a run as it goes, and resumes it after a frame (most likely mid-run)', async () => {
      const { run_id: runId } = await story.submit({ topic: 'c' });
      const first = story.join(runId);
      const head = await take(first, 2);
      const rest = await toArray(story.join(runId, { lastEventId: first.lastEventId }));
      expect([...head, ...rest].join('')).toBe(STORY);
    });

    it('cancel ends a run under way: the record says cancelled, and its join throws RUNNEL_ERR_RUN_CANCELLED', async () => {
      const { run_id: runId } = await long.submit({ topic: 'd' });
      const joined = long.join(runId);
      await joined.next(); // it runs and has streamed something
      const cancelled = await long.cancel(runId);
      expect(cancelled).toMatchObject({ status: 'cancelled', error: { code: 'RUNNEL_ERR_RUN_CANCELLED' } });
      await expect(settleWithin(toArray(joined), 15_000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_RUN_CANCELLED' });
      expect((await long.wait(runId, { timeoutS: 0 })).status).toBe('cancelled');
    });

    it("wait's 408 is the record as it is, not an error", async () => {
      const { run_id: runId } = await long.submit({ topic: 'e' });
      const record = await long.wait(runId, { timeoutS: 0 });
      expect(record.run_id).toBe(runId);
      expect(record.status).toMatch(/^(pending|running)$/);
      await long.cancel(runId);
    });

    // A RemoteRunnable made on a `/c/{hash}` URL (LangServe's configured chain) called runs under it: 404.
    it('on a /c/{config_hash} URL: submits with that config, and waits for, joins and cancels its runs and durable streams', async () => {
      const hash = LZString.compressToEncodedURIComponent(JSON.stringify({ tags: ['from-url'] }));
      const hashed = new RemoteRunnable<{ topic: string }, string>({ url: `${app.url}/story/c/${hash}`, headers: auth('ada') });
      const run = await hashed.submit({ topic: 'i' });
      expect(run).toMatchObject({ chain: '/story', status: 'pending' });
      expect((await hashed.wait(run.run_id, { timeoutS: 60 })).output).toBe(STORY);
      expect(await toArray(hashed.join(run.run_id))).toEqual(await toArray(story.join(run.run_id)));
      expect((await hashed.getRun(run.run_id)).status).toBe('success');
      // A durable stream left after its first chunk goes on, and is joined there.
      const named: string[] = [];
      for await (const _chunk of hashed.stream({ topic: 'j' }, { onDisconnect: 'continue', onRunId: (runId) => named.push(runId) })) break;
      expect((await toArray(hashed.join(named[0] as string))).join('')).toBe(STORY);
      const longHashed = new RemoteRunnable<{ topic: string }, string>({ url: `${app.url}/long/c/${hash}`, headers: auth('ada') });
      const { run_id: longId } = await longHashed.submit({ topic: 'k' });
      expect(await longHashed.cancel(longId)).toMatchObject({ run_id: longId, status: 'cancelled' });
      // A hash that does not decode is a 400 there too, a cancel's as well (a review: it cancelled the run).
      await expect(new RemoteRunnable({ url: `${app.url}/story/c/%25%25`, headers: auth('ada') }).submit({ topic: 'l' })).rejects.toMatchObject({ statusCode: 400 });
      const { run_id: kept } = await long.submit({ topic: 'm' });
      await expect(new RemoteRunnable({ url: `${app.url}/long/c/%25%25`, headers: auth('ada') }).cancel(kept)).rejects.toMatchObject({ statusCode: 400 });
      expect((await long.getRun(kept)).status).not.toBe('cancelled');
      await long.cancel(kept);
    });

    it("raises the server's errors: bad input, no key, another caller's run, an unknown run", async () => {
      await expect(story.submit({ topic: 5 } as never)).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID', statusCode: 422, detail: [{ loc: ['topic'] }] });
      await expect(story.submit({ topic: 'x' }, { webhook: 'https://evil.example.com/' })).rejects.toMatchObject({ code: 'RUNNEL_ERR_WEBHOOK_NOT_ALLOWED' });
      await expect(new RemoteRunnable({ url: `${app.url}/story` }).submit({ topic: 'x' })).rejects.toMatchObject({ code: 'RUNNEL_ERR_UNAUTHORIZED' });
      const { run_id: runId } = await story.submit({ topic: 'f' });
      const bob = new RemoteRunnable<{ topic: string }, string>({ url: `${app.url}/story`, headers: auth('bob') });
      await expect(bob.getRun(runId)).rejects.toMatchObject({ code: 'RUNNEL_ERR_NOT_FOUND', statusCode: 404 });
      await expect(bob.wait(runId)).rejects.toMatchObject({ code: 'RUNNEL_ERR_NOT_FOUND' });
      await expect(toArray(bob.join(runId))).rejects.toMatchObject({ code: 'RUNNEL_ERR_NOT_FOUND' });
      await expect(bob.cancel(runId)).rejects.toMatchObject({ code: 'RUNNEL_ERR_NOT_FOUND' });
      await expect(story.getRun('no-such-run')).rejects.toMatchObject({ code: 'RUNNEL_ERR_NOT_FOUND' });
      await expect(story.join(runId, { lastEventId: 'not-an-id' }).next()).rejects.toMatchObject({ code: 'RUNNEL_ERR_BAD_REQUEST' });
    });
  });
}
