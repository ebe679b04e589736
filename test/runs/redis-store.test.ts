/**
 * The Redis run store on a Redis of its own: each write is one script run
 * by its SHA1, so these check what the scripts promise — a run id taken
 * once, frames in entries read back in order after any id, an ended record
 * never changed again, a refused frame reported — and that a Redis that has
 * forgotten the scripts (restart, SCRIPT FLUSH) still takes every write.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ChatPromptTemplate, FakeListChatModel, generator, lambda, RunnelError, StringOutputParser } from '../../src/index.js';
import { executeRun, MemoryRunStore, RedisRunStore, RunEnded, RunNotStored, type RunRecord, type RunStore } from '../../src/runs/index.js';
import { RedisServer } from '../support/redis-server.js';

let server: RedisServer;
let client: Redis;
let store: RedisRunStore;
const namespace = `test-${randomUUID()}`;

beforeAll(async () => {
  server = await RedisServer.scratch();
  // The server's own kind of client (commands of a turn coalesced into one write), as the scripts run in production.
  client = await server.client();
  store = new RedisRunStore({ client, namespace, maxListed: 3 });
});
afterAll(async () => {
  await store.close();
  client.disconnect();
  await server.kill();
});

function record(identity = 'ada'): RunRecord {
  const now = new Date().toISOString();
  return { run_id: randomUUID(), chain: '/story', kind: 'stream', identity, status: 'running', input: { topic: 't' }, config: {}, created_at: now, updated_at: now };
}

describe('RedisRunStore', () => {
  it('takes a run id once, and lists a caller its newest runs, at most maxListed', async () => {
    const first = record('lister');
    await store.create(first);
    await expect(store.create({ ...first, identity: 'mallory' })).rejects.toMatchObject({ code: 'RUNNEL_ERR_INVALID_ARGUMENT' });
    expect((await store.get(first.run_id))?.identity).toBe('lister');
    for (let i = 0; i < 4; i++) await store.create({ ...record('lister'), created_at: new Date(Date.now() + 1000 * (i + 1)).toISOString() });
    const listed = await store.list('lister', 10);
    expect(listed).toHaveLength(3);
    expect(listed.map((run) => run.run_id)).not.toContain(first.run_id);
  });

  it('with an open limit: refuses past it cheaply, a run leaves it as it ends, and a burst at the limit finds those places', async () => {
    const limit = 2000;
    const getranges = async (): Promise<number> => Number(/cmdstat_getrange:calls=(\d+)/.exec(await client.info('commandstats'))?.[1] ?? 0);
    const open: RunRecord[] = [];
    for (let i = 0; i < limit; i++) {
      const run = { ...record('limited'), status: 'pending' as const };
      await store.create(run, { openLimit: limit });
      open.push(run);
    }
    // A refused submission reads a bounded number of records, not every open one (the review: 2,000 reads,
    // 60 ms, per refusal at a limit of 2,000).
    const before = await getranges();
    for (let i = 0; i < 10; i++) await expect(store.create(record('limited'), { openLimit: limit })).rejects.toMatchObject({ code: 'RUNNEL_ERR_TOO_MANY_RUNS' });
    expect((await getranges()) - before).toBeLessThanOrEqual(10 * 50);
    // Runs that end leave the caller's open runs as they end: a burst at the limit reads nothing and is not
    // refused (the bench found one refused: each read the open runs after another had let them go).
    for (const run of open) await store.update(run.run_id, { status: 'success' });
    const after = await getranges();
    const burst = await Promise.allSettled(Array.from({ length: 50 }, () => store.create(record('limited'), { openLimit: limit })));
    expect(burst.filter((outcome) => outcome.status === 'rejected')).toEqual([]);
    expect((await getranges()) - after).toBe(0);
  });

  it('with an open limit: a run whose end did not take it out (ended by an earlier version) is let go at the limit', async () => {
    const limit = 3;
    const runs = Array.from({ length: limit }, () => ({ ...record('leaked'), status: 'pending' as const }));
    for (const run of runs) await store.create(run, { openLimit: limit });
    // Ended without the open runs' key, as a process of the version before wrote its ends.
    const stored = JSON.parse((await client.get(`${namespace}:run:${runs[0]?.run_id}`)) as string) as RunRecord;
    await client.set(`${namespace}:run:${stored.run_id}`, JSON.stringify({ ...stored, status: 'success' }), 'KEEPTTL');
    await store.create(record('leaked'), { openLimit: limit });
    await expect(store.create(record('leaked'), { openLimit: limit })).rejects.toMatchObject({ code: 'RUNNEL_ERR_TOO_MANY_RUNS' });
  });

  it('reads back an execution’s frames in order after any id, across entries, and ends the record in the same write', async () => {
    const run = record();
    await store.create(run, { local: true });
    const next = store.frameIds(Date.now());
    const frames = Array.from({ length: 1203 }, (_, i) => ({ id: next(), event: 'data' as const, data: `w${i}` }));
    // More than one entry holds them (500 frames an entry), written in two batches.
    expect(await store.append(run.run_id, frames.slice(0, 700))).toEqual(frames.slice(0, 700).map((frame) => frame.id));
    const ended = await store.end(run.run_id, [...frames.slice(700), { id: next(), event: 'end' }], { status: 'success', output: 'all' }, run, { local: true });
    expect(ended).toMatchObject({ status: 'success', output: 'all' });
    expect(await store.stale(-60_000)).not.toContain(run.run_id);
    const all = await readAll(run.run_id);
    expect(all.map((frame) => frame.data ?? frame.event)).toEqual([...frames.map((frame) => frame.data), 'end']);
    for (const after of [0, 499, 500, 501, 1202]) {
      const rest = await readAll(run.run_id, (frames[after] as { id: string }).id);
      expect(rest[0]?.data ?? rest[0]?.event).toBe(after === 1202 ? 'end' : `w${after + 1}`);
      expect(rest).toHaveLength(1203 - after);
    }
    // Ended: a late write from a slow worker changes nothing, and says what the record is.
    expect(await store.update(run.run_id, { status: 'error' }, run)).toMatchObject({ status: 'success' });
    await expect(store.end(run.run_id, [{ event: 'error', data: { code: 'late' } }], { status: 'error' }, run)).rejects.toBeInstanceOf(RunEnded);
    expect(await store.get(run.run_id)).toMatchObject({ status: 'success' });
    // ... and its frames are not added: the log keeps its one end (before, the late error frame followed it).
    const after = await readAll(run.run_id);
    expect(after).toHaveLength(1204);
    expect(after.at(-1)?.event).toBe('end');
  });

  it('forgets the heartbeat of a run executed here that was ended elsewhere first, adding nothing to its log', async () => {
    const run = record();
    await store.create(run, { local: true });
    expect(await store.stale(-60_000)).toContain(run.run_id);
    // Another process ends it (a sweep), then the one executing it ends it too.
    await store.end(run.run_id, [{ event: 'error', data: { code: 'RUNNEL_ERR_RUN_LOST' } }], { status: 'error' }, run);
    await expect(store.end(run.run_id, [{ event: 'end' }], { status: 'success', output: 'late' }, run, { local: true })).rejects.toBeInstanceOf(RunEnded);
    expect(await store.get(run.run_id)).toMatchObject({ status: 'error' });
    expect(await store.stale(-60_000)).not.toContain(run.run_id);
    expect((await readAll(run.run_id)).map((frame) => frame.event)).toEqual(['error']);
  });

  it.each([
    ['words', (i: number): unknown => `w${i}`],
    // A review: an entry Redis's JSON decoder cannot read (nested past its depth) is taken for a full one.
    ['its last nested deeper than Redis decodes', (i: number): unknown => (i === 5 ? nested(1001) : `w${i}`)],
  ])("logs an end written from elsewhere after a worker's last frame when the worker's clock runs ahead of Redis's (%s)", async (_name, data) => {
    // A queued run numbers its frames from its worker's clock: an hour ahead of Redis's here. Six frames, one entry.
    const run = record();
    await store.create(run, { local: true });
    const next = store.frameIds(Date.now() + 3_600_000);
    const frames = Array.from({ length: 6 }, (_, i) => ({ id: next(), event: 'data' as const, data: data(i) }));
    await store.append(run.run_id, frames);
    // The worker dies; a sweep ends the run with a frame of no id of its own (Redis's next). Redis's next id
    // came after the entry's id only — `{base}-1`, before the entry's own later frames.
    await store.end(run.run_id, [{ event: 'error', data: { code: 'RUNNEL_ERR_RUN_LOST' } }], { status: 'error' }, run);
    const all = await readAll(run.run_id);
    expect(all.map((frame) => frame.data)).toEqual([...frames.map((frame) => frame.data), { code: 'RUNNEL_ERR_RUN_LOST' }]);
    // A reader resuming after any frame gets the rest and the end, once.
    for (const [i, frame] of frames.entries()) {
      const rest = await readAll(run.run_id, frame.id);
      expect(rest.map((read) => read.data)).toEqual([...frames.slice(i + 1).map((later) => later.data), { code: 'RUNNEL_ERR_RUN_LOST' }]);
    }
    expect(await readAll(run.run_id, all.at(-1)?.id)).toEqual([]);
  });

  it("judges heartbeats by Redis's clock: replicas whose clocks disagree never end each other's runs as lost", async () => {
    // One run stored beating by `create`, one by its first write (a durable stream's).
    const made = record();
    const written = record();
    await store.create(made, { local: true });
    await store.append(written.run_id, [{ id: store.frameIds(1)(), event: 'metadata', data: { run_id: written.run_id } }], { create: written });
    const ids = [made.run_id, written.run_id];
    expect((await store.stale(-60_000)).filter((id) => ids.includes(id)).sort()).toEqual([...ids].sort());
    const now = Date.now();
    const clock = vi.spyOn(Date, 'now');
    try {
      // A replica whose clock runs a minute ahead sweeps (30 s to stale): the runs beat just now.
      clock.mockReturnValue(now + 60_000);
      expect((await store.stale(30_000)).filter((id) => ids.includes(id))).toEqual([]);
      // A replica whose clock runs a minute behind beats: by Redis's clock, its runs beat now, not a minute ago.
      clock.mockReturnValue(now - 60_000);
      await store.heartbeat(ids);
      clock.mockReturnValue(now);
      expect((await store.stale(30_000)).filter((id) => ids.includes(id))).toEqual([]);
    } finally {
      clock.mockRestore();
    }
    // Still beating, and judged stale once their heartbeat is older than asked.
    expect(await store.stale(-60_000)).toEqual(expect.arrayContaining(ids));
    for (const id of ids) await store.forget(id);
  });

  it("keeps a live run's record as long as its log: its frames and its heartbeat renew both for the TTL", async () => {
    // The record's TTL was set once, when the run was stored: a run streaming past RUNNEL_RUN_TTL lost it (404 to
    // every read and cancel, its end and webhook gone) while its log lived on. Time passing is a TTL cut short.
    const keyOf = (id: string) => `${namespace}:run:${id}`;
    const streaming = record();
    const next = store.frameIds(1);
    await store.append(streaming.run_id, [{ id: next(), event: 'metadata', data: { run_id: streaming.run_id } }], { create: streaming });
    await client.expire(keyOf(streaming.run_id), 5);
    await store.append(streaming.run_id, [{ id: next(), event: 'data', data: 'x' }]);
    expect(await client.ttl(keyOf(streaming.run_id))).toBeGreaterThan(3600);
    // A queued run between frames (a model thinking for long): its worker's heartbeat renews both.
    const quiet = record();
    await store.create(quiet, { local: true });
    await store.append(quiet.run_id, [{ id: store.frameIds(1)(), event: 'metadata', data: { run_id: quiet.run_id } }]);
    await client.expire(keyOf(quiet.run_id), 5);
    await client.expire(`${keyOf(quiet.run_id)}:log`, 5);
    await store.heartbeat([quiet.run_id, streaming.run_id]);
    expect(await client.ttl(keyOf(quiet.run_id))).toBeGreaterThan(3600);
    expect(await client.ttl(`${keyOf(quiet.run_id)}:log`)).toBeGreaterThan(3600);
    for (const run of [streaming, quiet]) {
      await store.end(run.run_id, [{ id: undefined, event: 'end' }], { status: 'success', output: 1 }, run, { local: true });
      expect(await store.get(run.run_id)).toMatchObject({ status: 'success' });
    }
  });

  it('reports a frame Redis refuses (an id not after the last) as RUNNEL_ERR_REDIS_UNAVAILABLE, and then does not end the run', async () => {
    const run = record();
    await store.create(run, { local: true });
    const next = store.frameIds(Date.now());
    const first = next();
    await store.append(run.run_id, [{ id: first, event: 'data', data: 1 }]);
    await expect(store.append(run.run_id, [{ id: first, event: 'data', data: 2 }])).rejects.toMatchObject({ code: 'RUNNEL_ERR_REDIS_UNAVAILABLE' });
    await expect(store.end(run.run_id, [{ id: first, event: 'end' }], { status: 'success', output: 1 }, run, { local: true })).rejects.toMatchObject({ code: 'RUNNEL_ERR_REDIS_UNAVAILABLE' });
    // Not ended without its last frame, and still beating (the executor's error path ends it).
    expect(await store.get(run.run_id)).toMatchObject({ status: 'running' });
    expect(await store.stale(-60_000)).toContain(run.run_id);
    await store.forget(run.run_id);
  });

  it('stores a run with its first frames (running, beating) or as it ends (ended, no heartbeat), in one command each', async () => {
    const slow = record();
    const next = store.frameIds(1);
    const before = await evalshaCalls();
    expect(await store.append(slow.run_id, [{ id: next(), event: 'metadata', data: { run_id: slow.run_id } }], { create: slow })).toEqual(['1-0']);
    expect(await evalshaCalls()).toBe(before + 1);
    expect(await store.get(slow.run_id)).toMatchObject({ status: 'running', identity: 'ada' });
    expect(await store.stale(-60_000)).toContain(slow.run_id);
    expect((await store.list('ada', 10)).map((run) => run.run_id)).toContain(slow.run_id);
    expect(await store.end(slow.run_id, [{ id: next(), event: 'end' }], { status: 'success', output: 'x' }, slow, { local: true })).toMatchObject({ status: 'success' });
    expect(await store.stale(-60_000)).not.toContain(slow.run_id);

    const fast = record('fast-owner');
    const ids = store.frameIds(1);
    const frames = [{ id: ids(), event: 'metadata' as const, data: { run_id: fast.run_id } }, { id: ids(), event: 'data' as const, data: 'w' }, { id: ids(), event: 'end' as const }];
    const beforeFast = await evalshaCalls();
    const ended = await store.end(fast.run_id, frames, { status: 'success', output: 'w' }, fast, { local: true, create: fast });
    expect(ended).toMatchObject({ status: 'success', output: 'w' });
    expect(await evalshaCalls()).toBe(beforeFast + 1);
    expect(await store.get(fast.run_id)).toMatchObject({ status: 'success', output: 'w' });
    expect(await store.stale(-60_000)).not.toContain(fast.run_id);
    expect((await store.list('fast-owner', 10)).map((run) => run.run_id)).toEqual([fast.run_id]);
    expect((await readAll(fast.run_id)).map((frame) => frame.id)).toEqual(['1-0', '1-1', '1-2']);
  });

  it('writes nothing with a run whose id is taken, or whose frame Redis refuses', async () => {
    const owner = record();
    await store.create(owner);
    const next = store.frameIds(1);
    const intruder = { ...owner, identity: 'mallory' };
    await expect(store.append(owner.run_id, [{ id: next(), event: 'data', data: 'forged' }], { create: intruder })).rejects.toMatchObject({ code: 'RUNNEL_ERR_INVALID_ARGUMENT' });
    await expect(store.end(owner.run_id, [{ id: next(), event: 'end' }], { status: 'success' }, intruder, { local: true, create: intruder })).rejects.toMatchObject({ code: 'RUNNEL_ERR_INVALID_ARGUMENT' });
    expect(await store.get(owner.run_id)).toMatchObject({ identity: 'ada', status: 'running' });
    expect(await store.frames(owner.run_id)).toEqual([]);
    expect(await store.list('mallory', 10)).toEqual([]);

    // The second entry's id is not after the first's: Redis refuses it, and the run is not stored at all.
    const refused = record('refused-owner');
    const frames = [...Array.from({ length: 500 }, (_, i) => ({ id: `5-${i}`, event: 'data' as const, data: i })), { id: '4-0', event: 'end' as const }];
    await expect(store.end(refused.run_id, frames, { status: 'success' }, refused, { local: true, create: refused })).rejects.toMatchObject({ code: 'RUNNEL_ERR_REDIS_UNAVAILABLE' });
    expect(await store.get(refused.run_id)).toBeUndefined();
    expect(await client.exists(`${(store as unknown as { ns: string }).ns}:run:${refused.run_id}:log`)).toBe(0);
    expect(await store.list('refused-owner', 10)).toEqual([]);
    expect(await store.stale(-60_000)).not.toContain(refused.run_id);
  });

  // A client resumes with the last id it saw (Last-Event-ID): one of the run's frames, or one its executing
  // process handed out and was killed before writing (CI caught a first version that refused those); not an id
  // of another execution, nor one past the end in another.
  it('knows which ids a client may resume after', async () => {
    const run = record();
    const next = store.frameIds(1);
    await store.append(run.run_id, [{ id: next(), event: 'metadata', data: { run_id: run.run_id } }, { id: next(), event: 'data', data: 'a' }], { create: run });
    await store.append(run.run_id, [{ id: next(), event: 'data', data: 'b' }]);
    for (const id of ['1-0', '1-1', '1-2', '1-3', '1-9']) expect(await store.hasFrame(run.run_id, id), id).toBe(true);
    for (const id of ['0-5', '2-0', '1796320426016-3']) expect(await store.hasFrame(run.run_id, id), id).toBe(false);
    expect(await store.hasFrame(randomUUID(), '1-0')).toBe(false);
    // A queued run's clients have only read its log: an id past its last frame written was never sent (a probe
    // resumed after made-up ids and was answered as if it had seen them).
    for (const id of ['1-0', '1-1', '1-2']) expect(await store.hasFrame(run.run_id, id, true), id).toBe(true);
    for (const id of ['1-3', '1-9']) expect(await store.hasFrame(run.run_id, id, true), id).toBe(false);
  });

  // A durable stream's frames reach its client before their write returns, so a client cut off rejoins (on any
  // replica) as that write lands. The check reads the log twice; a probe's rejoins were refused 400 ("not an
  // event id of this run's stream") about once in 500 when the entry holding the id came between the reads.
  it('takes an id whose entry is written between its two reads of the log', async () => {
    const run = record();
    const next = store.frameIds(1);
    await store.append(run.run_id, [{ id: next(), event: 'metadata', data: { run_id: run.run_id } }, { id: next(), event: 'data', data: 'a' }], { create: run });
    const later = [{ id: next(), event: 'data' as const, data: 'b' }, { id: next(), event: 'data' as const, data: 'c' }];
    const xrange = client.xrange.bind(client);
    // The write of 1-2 and 1-3 lands after the entry before them was found, before the entry after it is read.
    const spy = vi.spyOn(client, 'xrange').mockImplementationOnce((async (...args: Parameters<typeof client.xrange>) => {
      await store.append(run.run_id, later);
      return xrange(...args);
    }) as typeof client.xrange);
    try {
      expect(await store.hasFrame(run.run_id, '1-3')).toBe(true);
      expect(spy).toHaveBeenCalled();
    } finally {
      spy.mockRestore();
    }
    // Past the last frame written, as before: taken while the run may have made it, refused once it has ended.
    expect(await store.hasFrame(run.run_id, '1-9')).toBe(true);
    await store.append(run.run_id, [{ id: next(), event: 'end' }]);
    expect(await store.hasFrame(run.run_id, '1-9')).toBe(false);
  });

  // A review: an entry whose own id is past the id asked for, but whose first frame says it is not (edited into
  // the log by hand), sent that look round and round, two reads a turn, for ever.
  it('refuses an id that an entry edited into the log claims, its own id past it, and returns', async () => {
    const run = record();
    const next = store.frameIds(1);
    await store.append(run.run_id, [{ id: next(), event: 'metadata', data: { run_id: run.run_id } }, { id: next(), event: 'data', data: 'a' }], { create: run });
    await client.xadd(`${namespace}:run:${run.run_id}:log`, '1-10', 'f', JSON.stringify([['1-3', 'data', 'planted']]));
    expect(await store.hasFrame(run.run_id, '1-5')).toBe(false);
  });

  // The in-process store trims a long run's frames too: an id before what it still holds is one of them (a
  // client resuming after it is not told its id is wrong), and a read that would skip trimmed frames — from the
  // start, or after one of them — is refused: the rest alone read as the whole answer (a probe, and a review:
  // a reader that fell behind the trim mid-stream got the rest and `end`).
  it('in process: an id of a trimmed frame is still a frame of the run, and no read skips trimmed frames', async () => {
    const memory = new MemoryRunStore({ maxFrames: 3 });
    const run = record();
    await memory.create(run);
    const ids = await memory.append(run.run_id, [{ event: 'metadata', data: { run_id: run.run_id } }, ...[1, 2, 3, 4].map((n) => ({ event: 'data' as const, data: n }))]);
    for (const id of ids) expect(await memory.hasFrame(run.run_id, id), id).toBe(true);
    expect(await memory.hasFrame(run.run_id, String(Number(ids.at(-1)) + 1))).toBe(false);
    for (const after of [undefined, ids[0]]) await expect(memory.frames(run.run_id, after), String(after)).rejects.toMatchObject({ code: 'RUNNEL_ERR_RUN_LOG_TRIMMED' });
    expect((await memory.frames(run.run_id, ids[1])).map((frame) => frame.id)).toEqual(ids.slice(2));
    expect((await memory.frames(run.run_id, ids[3])).map((frame) => frame.id)).toEqual(ids.slice(4));
    // A review: an id below the run's first (another run's, each counting from a start of its own) passed for
    // a trimmed frame of this one.
    const next = memory.frameIds();
    const own = [next(), next(), next(), next(), next()];
    const counted = record();
    await memory.create(counted);
    await memory.append(counted.run_id, own.map((id, n) => ({ id, event: n === 0 ? 'metadata' : 'data', data: n })));
    expect(await memory.hasFrame(counted.run_id, own[0] as string)).toBe(true);
    expect(await memory.hasFrame(counted.run_id, String(Number(own[0]) - 1))).toBe(false);
  });

  it('in Redis: no read skips the frames the log trimmed away, from the start or after one of them', async () => {
    // Trimmed approximately (whole nodes of Redis's stream): 300 entries kept to about 100.
    const small = new RedisRunStore({ client, namespace, maxFrames: 100 });
    const run = record();
    const next = small.frameIds(1);
    const ids = [next()];
    await small.append(run.run_id, [{ id: ids[0], event: 'metadata', data: { run_id: run.run_id } }], { create: run });
    for (let n = 1; n < 300; n++) {
      const id = next();
      ids.push(id);
      await small.append(run.run_id, [{ id, event: 'data', data: n }]);
    }
    const [[firstKept]] = (await client.xrange(`${namespace}:run:${run.run_id}:log`, '-', '+', 'COUNT', 1)) as [[string, string[]]];
    const kept = ids.indexOf(firstKept);
    expect(kept).toBeGreaterThan(1);
    for (const after of [undefined, ids[0], ids[kept - 2]]) await expect(small.frames(run.run_id, after), String(after)).rejects.toMatchObject({ code: 'RUNNEL_ERR_RUN_LOG_TRIMMED' });
    expect((await small.frames(run.run_id, ids[kept - 1]))[0]?.id).toBe(firstKept);
    expect((await small.frames(run.run_id, ids[kept]))[0]?.id).toBe(ids[kept + 1]);
    // A log of an end written from elsewhere alone (a queued run cancelled before it began) was not trimmed: an
    // id before it is no frame of the run (a review: it passed for a trimmed one, then the read was refused).
    const unstarted = record();
    await small.create(unstarted);
    await small.end(unstarted.run_id, [{ event: 'error', data: { code: 'RUNNEL_ERR_RUN_CANCELLED' } }], { status: 'cancelled' });
    expect(await small.hasFrame(unstarted.run_id, '1-0')).toBe(false);
    expect((await small.frames(unstarted.run_id)).map((frame) => frame.event)).toEqual(['error']);
  });

  it('takes only frame ids of its own shape (they are written unescaped)', async () => {
    const run = record();
    await store.create(run);
    await expect(store.append(run.run_id, [{ id: '1-0', event: 'data', data: 1 }, { id: '1-1","data",{"forged":1}],["1-2', event: 'data', data: 2 }])).rejects.toMatchObject({ code: 'RUNNEL_ERR_INVALID_ARGUMENT' });
    expect(await store.frames(run.run_id)).toEqual([]);
  });

  it('reads its log as untrusted: the good frames before an entry that is not valid, then RUNNEL_ERR_STORED_RECORD_INVALID — never a forged event', async () => {
    const bad = [
      ['f', '[["id","data"'],
      ['f', '5'],
      ['f', '[null]'],
      ['g', '[[null,"data","x"]]'],
      // A frame id or event name is written into the SSE stream as it is: one edited in would forge events.
      ['f', JSON.stringify([['9-1\nevent: injected\ndata: {"pwn":1}\n\nid: z', 'data', 'x']])],
      ['f', JSON.stringify([[null, 'data\nevent: evil', 'x']])],
      ['f', JSON.stringify([['9-1', 'injected', 'x']])],
      // Only an end goes without data: this went out as an event with no data line, which a client drops.
      ['f', JSON.stringify([[null, 'data']])],
    ];
    for (const fields of bad) {
      const run = record();
      const next = store.frameIds(1);
      await store.append(run.run_id, [{ id: next(), event: 'metadata', data: { run_id: run.run_id } }, { id: next(), event: 'data', data: 'a' }], { create: run });
      const log = `${namespace}:run:${run.run_id}:log`;
      expect(await client.xlen(log)).toBe(1);
      const badEntry = await client.xadd(log, '*', ...fields);
      await client.xadd(log, '*', 'f', JSON.stringify([[null, 'data', 'after'], [null, 'end']]));
      const good = await store.frames(run.run_id);
      expect(good.map((frame) => frame.data), JSON.stringify(fields)).toEqual([{ run_id: run.run_id }, 'a']);
      await expect(store.frames(run.run_id, '1-1'), JSON.stringify(fields)).rejects.toMatchObject({ code: 'RUNNEL_ERR_STORED_RECORD_INVALID' });
      await expect(store.hasFrame(run.run_id, badEntry as string), JSON.stringify(fields)).rejects.toMatchObject({ code: 'RUNNEL_ERR_STORED_RECORD_INVALID' });
      // A frame of the execution past its last written one (made, sent, then not written): its client resumes
      // after it, and the read reports the bad entry then — the bad entry after it is no execution's (a
      // review: the check refused the resume before any good frame).
      expect(await store.hasFrame(run.run_id, '1-2'), JSON.stringify(fields)).toBe(true);
    }
  });

  it('refuses a record nested deeper than a reader can walk, and lists the caller\'s other runs past it', async () => {
    // Planted 100,000 levels deep, it parsed, passed the shape check, and overflowed the stack of the reply's
    // serialisation: 500 for it, and for every listing it was in.
    const owner = `deep-${randomUUID()}`;
    const kept = record(owner);
    const planted = record(owner);
    await store.create(kept);
    await store.create(planted);
    const key = `${namespace}:run:${planted.run_id}`;
    const good = (await client.get(key)) as string;
    await client.set(key, good.replace('"input":{"topic":"t"}', `"input":${'['.repeat(100_000)}${']'.repeat(100_000)}`));
    expect(await client.get(key)).not.toBe(good);
    await expect(store.get(planted.run_id)).rejects.toMatchObject({ code: 'RUNNEL_ERR_STORED_RECORD_INVALID' });
    expect((await store.list(owner, 10)).map((run) => run.run_id)).toEqual([kept.run_id]);
  });

  it("refuses a record that is not a run's where a reader relies on it (a status no run has would never end)", async () => {
    const run = record('shapes');
    await store.create(run);
    const key = `${namespace}:run:${run.run_id}`;
    const good = (await client.get(key)) as string;
    for (const change of [{ status: 'bogus' }, { created_at: -5 }, { updated_at: null }, { created_at: 'not a date' }, { error: 5 }, { error: { code: 'X' } }, { usage: { input_tokens: 'many' } }, { chain: ['/joke'] },
      // The usage's details, which a reader serves as counts.
      { usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2, input_token_details: 'x' } }, { usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2, output_token_details: { reasoning: 'x' } } },
      // What a worker runs the chain with and calls back (a config of another shape failed the run as a Redis outage).
      { kind: 'batch' }, { config: 5 }, { config: null }, { config: { tags: 'x' } }, { config: { metadata: [] } }, { config: { configurable: 'x' } },
      { filters: { include_names: 'x' } }, { filters: [] }, { webhook: 5 }, { chat_id: {} },
      // Another run's record copied under this key: it answered for a run it is not.
      { run_id: randomUUID() }]) {
      await client.set(key, JSON.stringify({ ...(JSON.parse(good) as object), ...change }));
      await expect(store.get(run.run_id), JSON.stringify(change)).rejects.toMatchObject({ code: 'RUNNEL_ERR_STORED_RECORD_INVALID' });
      expect(await store.list('shapes', 10), JSON.stringify(change)).toEqual([]);
    }
    await client.set(key, good);
    expect(await store.get(run.run_id)).toMatchObject({ run_id: run.run_id, status: 'running' });
  });

  it('reads the records a run may well have: usage with a model\'s own details or a count unknown (null), finish_reason null', async () => {
    const run = record('odd');
    await store.create(run);
    const key = `${namespace}:run:${run.run_id}`;
    const good = JSON.parse((await client.get(key)) as string) as object;
    for (const change of [{ usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5, input_token_details: { cache_read: 1 } } }, { usage: { input_tokens: null, output_tokens: 2, total_tokens: null } },
      // A detail JSON could not write (a custom provider's NaN), as the counts above may be.
      { usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5, output_token_details: { reasoning: null } } }, { finish_reason: null }]) {
      await client.set(key, JSON.stringify({ ...good, ...change }));
      expect(await store.get(run.run_id), JSON.stringify(change)).toMatchObject({ run_id: run.run_id, ...change });
    }
  });

  it("runs a chain with a stored config's own fields only: callbacks written into a record do not reach it", async () => {
    const queued = { ...record(), status: 'pending' as const, config: { tags: ['t'], callbacks: 5, signal: { aborted: true }, onUsage: 'x' } };
    await store.create(queued);
    const chain = ChatPromptTemplate.fromTemplate('{topic}').pipe(new FakeListChatModel({ responses: ['fine'] })).pipe(new StringOutputParser());
    const ended = await executeRun({ record: queued, runnable: chain as never, store, signal: new AbortController().signal });
    expect(ended).toMatchObject({ status: 'success', output: 'fine' });
  });

  it('keeps its records writable when an input is nested deeper than Redis’s JSON decoder goes', async () => {
    let deep: unknown = 'bottom';
    for (let i = 0; i < 1200; i++) deep = [deep];
    const run = { ...record(), status: 'pending' as const, input: deep };
    await store.create(run);
    expect(await store.start(run.run_id, run)).toMatchObject({ started: true });
    expect(await store.end(run.run_id, [{ event: 'end' }], { status: 'success', output: 1 }, { ...run, status: 'running' })).toMatchObject({ status: 'success' });
    expect(await store.update(run.run_id, { status: 'error' }, { ...run, status: 'running' })).toMatchObject({ status: 'success' });
  });

  it('starts a queued run unless its cancel came first, and then changes nothing', async () => {
    const queued = { ...record(), status: 'pending' as const };
    await store.create(queued);
    const started = await store.start(queued.run_id, queued);
    expect(started).toMatchObject({ cancelled: false, record: { status: 'running' } });
    expect(await store.get(queued.run_id)).toMatchObject({ status: 'running' });
    const doomed = { ...record(), status: 'pending' as const };
    await store.create(doomed);
    await store.requestCancel(doomed.run_id);
    expect(await store.start(doomed.run_id, doomed)).toMatchObject({ started: false, cancelled: true, record: { status: 'pending' } });
    expect(await store.get(doomed.run_id)).toMatchObject({ status: 'pending' });
  });

  it('starts only a pending run: not a running one (another worker has it), an ended one, or a missing one', async () => {
    const queued = { ...record(), status: 'pending' as const };
    await store.create(queued);
    expect(await store.start(queued.run_id, queued)).toMatchObject({ started: true });
    expect(await store.start(queued.run_id, queued)).toMatchObject({ started: false, cancelled: false, record: { status: 'running' } });
    await store.requestCancel(queued.run_id);
    await store.end(queued.run_id, [{ event: 'error', data: { code: 'RUNNEL_ERR_RUN_CANCELLED' } }], { status: 'cancelled' });
    // Ended (with its cancel flag still set): neither started nor reported as a cancel to act on again.
    expect(await store.start(queued.run_id, queued)).toMatchObject({ started: false, cancelled: false, record: { status: 'cancelled' } });
    expect(await store.start('no-such-run', queued)).toEqual({ started: false, cancelled: false, record: undefined });
  });

  it('still writes and reads after Redis forgets its scripts (SCRIPT FLUSH, as after a restart)', async () => {
    const run = record();
    await client.script('FLUSH');
    await store.create(run);
    await client.script('FLUSH');
    const next = store.frameIds(Date.now());
    const ids = await store.append(run.run_id, [{ id: next(), event: 'metadata', data: { run_id: run.run_id } }, { id: next(), event: 'data', data: 'x' }]);
    await client.script('FLUSH');
    expect(await store.update(run.run_id, { usage: { input_tokens: 1, output_tokens: 2, total_tokens: 3 } }, run)).toMatchObject({ usage: { total_tokens: 3 } });
    await client.script('FLUSH');
    await store.update(run.run_id, { status: 'pending' }, run);
    await client.script('FLUSH');
    expect(await store.start(run.run_id, { ...run, status: 'pending' })).toMatchObject({ started: true });
    await client.script('FLUSH');
    await store.end(run.run_id, [{ id: next(), event: 'end' }], { status: 'success', output: 'x' });
    await client.script('FLUSH');
    expect((await store.frames(run.run_id, ids[0])).map((frame) => frame.event)).toEqual(['data', 'end']);
    expect(await store.get(run.run_id)).toMatchObject({ status: 'success', output: 'x' });
  });
});

describe('a queued run whose cancel came before it started', () => {
  for (const name of ['memory', 'redis'] as const) {
    it(`ends cancelled without running its chain (${name} store)`, async () => {
      const runs: RunStore = name === 'memory' ? new MemoryRunStore() : store;
      let calls = 0;
      const chain = lambda((n: number) => {
        calls++;
        return n + 1;
      });
      const queued = { ...record(), status: 'pending' as const, input: 1 };
      await runs.create(queued);
      await runs.requestCancel(queued.run_id);
      const ended = await executeRun({ record: queued, runnable: chain as never, store: runs, signal: new AbortController().signal });
      expect(calls).toBe(0);
      expect(ended).toMatchObject({ status: 'cancelled', error: { code: 'RUNNEL_ERR_RUN_CANCELLED' } });
      expect((await runs.frames(queued.run_id)).map((frame) => frame.event)).toEqual(['error']);
      // Started by nobody afterwards: an ended run is not executed again, and nothing more is written.
      expect(await executeRun({ record: queued, runnable: chain as never, store: runs, signal: new AbortController().signal })).toBeUndefined();
      expect(calls).toBe(0);
      expect(await runs.frames(queued.run_id)).toHaveLength(1);
    });
  }
});

describe('a run executed here (a durable stream’s)', () => {
  /** The Redis store, telling `events` when each write settles. */
  function watched(events: string[]): RunStore {
    return new Proxy(store, {
      get(target, key, receiver) {
        const value = Reflect.get(target, key, receiver) as unknown;
        if ((key !== 'append' && key !== 'end') || typeof value !== 'function') return typeof value === 'function' ? value.bind(target) : value;
        return async (...args: unknown[]) => {
          const options = args[key === 'append' ? 2 : 4] as { create?: unknown } | undefined;
          try {
            return await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          } finally {
            events.push(`${key}${options?.create === undefined ? '' : '+create'}`);
          }
        };
      },
    });
  }

  it('is stored by its first write, and its reader hears no frame before that; one ending in its first tick is that one write', async () => {
    const events: string[] = [];
    const run = { ...record(), input: 1 };
    const ended = await executeRun({
      record: run,
      runnable: lambda((n: number) => n + 1) as never,
      store: watched(events),
      signal: new AbortController().signal,
      local: true,
      reader: { frame: (frame) => events.push(frame.event) },
    });
    expect(ended).toMatchObject({ status: 'success', output: 2 });
    expect(events).toEqual(['end+create', 'metadata', 'data', 'end']);
    expect((await store.frames(run.run_id)).map((frame) => frame.id)).toEqual(['1-0', '1-1', '1-2']);

    // A run that outlasts its first tick (a token every 5 ms): its first frames are written (and it is stored)
    // before the reader hears them; then every frame reaches the reader once, in order, as the log has them.
    events.length = 0;
    const heard: string[] = [];
    const slow = { ...record(), input: { topic: 't' } };
    const model = new FakeListChatModel({ responses: ['one two three four five six'], sleepMs: 5 });
    await executeRun({
      record: slow,
      runnable: ChatPromptTemplate.fromMessages([['human', '{topic}']]).pipe(model).pipe(new StringOutputParser()) as never,
      store: watched(events),
      signal: new AbortController().signal,
      local: true,
      reader: {
        frame: (frame) => {
          events.push(frame.event);
          heard.push(frame.id);
        },
      },
    });
    expect(events.slice(0, 2)).toEqual(['append+create', 'metadata']);
    expect(events.at(-1)).toBe('end');
    expect(events.filter((event) => event.startsWith('append')).length).toBeGreaterThan(1);
    expect(await store.get(slow.run_id)).toMatchObject({ status: 'success', output: 'one two three four five six' });
    expect(heard).toEqual((await readAll(slow.run_id)).map((frame) => frame.id));
    expect(heard).toHaveLength(1 + 6 + 1);
  });

  it('stops once its run is ended elsewhere (a sweep that took it for lost): its log keeps that one end, and its reader hears it', async () => {
    const run = { ...record(), input: 'go' };
    let swept!: () => void;
    const sweptMeanwhile = new Promise<void>((resolve) => (swept = resolve));
    // The sweep of another process ends the run once its first 30 words are written, a write each: more
    // entries than one read of the log returns.
    const WORDS = Array.from({ length: 30 }, (_, i) => `w${i}`);
    const sweptStore = new Proxy(store, {
      get(target, key, receiver) {
        const value = Reflect.get(target, key, receiver) as unknown;
        if (key !== 'append' || typeof value !== 'function') return typeof value === 'function' ? value.bind(target) : value;
        return async (...args: unknown[]) => {
          const ids = (await (value as (...a: unknown[]) => Promise<string[]>).apply(target, args)) as string[];
          if ((args[1] as { data?: unknown }[]).some((frame) => frame.data === WORDS.at(-1))) {
            const lost = new RunnelError('RUNNEL_ERR_RUN_LOST', 'The process running this run stopped before it ended');
            const record = await store.get(run.run_id);
            await store.end(run.run_id, [{ event: 'error', data: { status_code: lost.statusCode, code: lost.code, message: lost.message } }], { status: 'error', error: { code: lost.code, message: lost.message } }, record);
            swept();
          }
          return ids;
        };
      },
    });
    let stoppedBy: unknown;
    const chain = generator(async function* (_inputs: AsyncIterable<string>, config) {
      for (const word of WORDS) {
        yield word;
        await new Promise((resolve) => setImmediate(resolve));
      }
      await sweptMeanwhile;
      // Its write is refused, and the run is stopped: a model call here would be aborted.
      yield 'second';
      const signal = config?.signal as AbortSignal;
      await new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));
      stoppedBy = signal.reason;
      yield 'never written';
    });
    const heard: { id: string; event: string; data?: unknown }[] = [];
    const ended = await executeRun({ record: run, runnable: chain as never, store: sweptStore, signal: new AbortController().signal, local: true, reader: { frame: (frame) => heard.push(frame) } });
    expect(stoppedBy).toMatchObject({ code: 'RUNNEL_ERR_RUN_LOST' });
    // Ended by the sweep, which told its followers and its webhook: nothing for this execution to say.
    expect(ended).toBeUndefined();
    expect(await store.get(run.run_id)).toMatchObject({ status: 'error', error: { code: 'RUNNEL_ERR_RUN_LOST', message: 'The process running this run stopped before it ended' } });
    // The log: what was written before the sweep, then the sweep's end — nothing after it.
    const log = await readAll(run.run_id);
    expect(log.map((frame) => frame.data ?? frame.event)).toEqual([{ run_id: run.run_id }, ...WORDS, { status_code: 500, code: 'RUNNEL_ERR_RUN_LOST', message: 'The process running this run stopped before it ended' }]);
    expect(log.length).toBeGreaterThan(20);
    // The reader's last frame is the log's end, as a client joining the run reads it (found past a page of
    // the log). Before it, the frame made before the refusal came back ('second': frames go out as they are
    // made, before they are written), and nothing after.
    expect(heard.at(-1)).toMatchObject({ id: log.at(-1)?.id, event: 'error', data: log.at(-1)?.data });
    expect(heard.map((frame) => frame.data ?? frame.event).slice(-3, -1)).toEqual([WORDS.at(-1), 'second']);
    expect(heard.filter((frame) => frame.event === 'error' || frame.event === 'end')).toHaveLength(1);
    expect(await store.stale(-60_000)).not.toContain(run.run_id);
  });

  it('that cannot be stored rejects with RunNotStored, its reader having heard nothing — ending in its first write, or going on after it', async () => {
    let writes = 0;
    const failing = new Proxy(store, {
      get(target, key, receiver) {
        if (key === 'append' || key === 'end') {
          return async () => {
            writes++;
            return Promise.reject(new Error('Redis is down'));
          };
        }
        const value = Reflect.get(target, key, receiver) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const model = new FakeListChatModel({ responses: ['a b c d e f g h'], sleepMs: 5 });
    for (const [runnable, input] of [
      [lambda((n: number) => n + 1), 1],
      // Still making frames when its first write fails: it is stopped, and nothing more is written.
      [ChatPromptTemplate.fromMessages([['human', '{topic}']]).pipe(model), { topic: 't' }],
    ] as const) {
      writes = 0;
      const heard: string[] = [];
      const run = { ...record(), input };
      const outcome = executeRun({ record: run, runnable: runnable as never, store: failing, signal: new AbortController().signal, local: true, reader: { frame: (frame) => heard.push(frame.event) } });
      await expect(outcome).rejects.toBeInstanceOf(RunNotStored);
      await expect(outcome).rejects.toMatchObject({ cause: { message: 'Redis is down' } });
      expect(heard).toEqual([]);
      expect(writes).toBe(1);
      expect(await store.get(run.run_id)).toBeUndefined();
    }
    // The model was called: the run was under way when its first write failed.
    expect(model.calls).toHaveLength(1);
  });
});

describe('MemoryRunStore ends', () => {
  it('two ends at once: one is written, the other is refused (RunEnded), and the log has one end', async () => {
    const memory = new MemoryRunStore();
    const run = record();
    await memory.create(run);
    const outcomes = await Promise.allSettled([
      memory.end(run.run_id, [{ event: 'error', data: { code: 'RUNNEL_ERR_RUN_LOST' } }], { status: 'error' }),
      memory.end(run.run_id, [{ event: 'end' }], { status: 'success', output: 'late' }),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'rejected']);
    expect((outcomes[1] as PromiseRejectedResult).reason).toBeInstanceOf(RunEnded);
    expect((await memory.frames(run.run_id)).map((frame) => frame.event)).toEqual(['error']);
    expect(await memory.get(run.run_id)).toMatchObject({ status: 'error' });
  });
});

describe('MemoryRunStore frame ids', () => {
  it("increase within an execution, start apart in each, and a reader resumes after any of them", async () => {
    const memory = new MemoryRunStore();
    const [a, b] = [record(), record()];
    await memory.create(a);
    await memory.create(b);
    const [nextA, nextB] = [memory.frameIds(), memory.frameIds()];
    const ids = [nextA(), nextA(), nextA()];
    await memory.append(a.run_id, ids.map((id, data) => ({ id, event: data === 0 ? 'metadata' : 'data', data })));
    const idsB = [nextB(), nextB()];
    await memory.append(b.run_id, idsB.map((id, data) => ({ id, event: 'data', data })));
    expect(ids.map(Number)).toEqual([0, 1, 2].map((n) => Number(ids[0]) + n));
    expect([...ids, ...idsB].every((id) => memory.validFrameId(id))).toBe(true);
    expect((await memory.frames(a.run_id, ids[1])).map((frame) => frame.data)).toEqual([2]);
    // One counter for the process, as before, told a run's reader how many frames other runs had sent; from 1
    // in each, another run's id would name a frame of this one.
    expect(Number(idsB[0])).not.toBe(Number(ids[2]) + 1);
    expect(await memory.hasFrame(a.run_id, idsB[0] as string)).toBe(false);
    // A frame without an id (a run ended from outside its execution: cancelled while waiting) takes its run's next.
    const [lone] = await memory.append(b.run_id, [{ event: 'error', data: { code: 'RUNNEL_ERR_RUN_CANCELLED' } }]);
    expect(Number(lone)).toBe(Number(idsB[1]) + 1);
  });
});

/** EVALSHA calls Redis has served so far (each of the store's writes is one). */
async function evalshaCalls(): Promise<number> {
  return Number(/cmdstat_evalsha:calls=(\d+)/.exec(await client.info('commandstats'))?.[1] ?? 0);
}

/** A value nested `depth` lists deep. */
function nested(depth: number): unknown {
  let value: unknown = 'deep';
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

/** Every frame of a run's log after `after`, page by page (a read returns at most 20 entries). */
async function readAll(runId: string, after?: string): Promise<{ id: string; event: string; data?: unknown }[]> {
  const out: { id: string; event: string; data?: unknown }[] = [];
  let cursor = after;
  for (;;) {
    const page = await store.frames(runId, cursor);
    if (page.length === 0) return out;
    out.push(...page);
    cursor = page.at(-1)?.id;
  }
}

// A stored-records probe: Redis keeps what a script wrote before a command failed on a key of another kind,
// so such a key left half a write — a durable stream's run stored as running with no heartbeat (nothing would
// ever end it), a run ended without leaving its caller's open runs (its place held for good), a pending run
// with no place among the runs not yet started. Each script now checks its keys first and writes nothing.
describe('a key of another kind than the store writes there', () => {
  /** Every key of the namespace, its kind and contents: what a refused write must leave as it was. */
  async function snapshot(ns: string): Promise<string> {
    const keys = (await client.keys(`${ns}:*`)).sort();
    const held = await Promise.all(
      keys.map(async (key) => {
        const kind = await client.type(key);
        const value = kind === 'string' ? await client.get(key) : kind === 'zset' ? await client.zrange(key, 0, -1) : kind === 'stream' ? await client.xlen(key) : await client.hgetall(key);
        return [key, kind, value];
      }),
    );
    return JSON.stringify(held);
  }

  /** A sorted set's members with their scores, as ZADD takes them back. */
  async function scored(key: string): Promise<string[]> {
    const pairs = await client.zrange(key, 0, -1, 'WITHSCORES');
    const args: string[] = [];
    for (let i = 0; i < pairs.length; i += 2) args.push(pairs[i + 1] as string, pairs[i] as string);
    return args;
  }

  async function refusedUnchanged(ns: string, write: () => Promise<unknown>): Promise<void> {
    const before = await snapshot(ns);
    await expect(write()).rejects.toMatchObject({ code: 'RUNNEL_ERR_STORED_RECORD_INVALID' });
    expect(await snapshot(ns)).toBe(before);
  }

  it('refuses every write to one, writing nothing of it; a key a write only tidies does not stop it', async () => {
    const ns = `test-${randomUUID()}`;
    const runs = new RedisRunStore({ client, namespace: ns });
    try {
      const run = record('kinds');
      // A durable stream's first write: the heartbeats a string.
      await client.set(`${ns}:local`, 'x');
      const next = runs.frameIds(1);
      await refusedUnchanged(ns, () => runs.append(run.run_id, [{ id: next(), event: 'metadata', data: {} }], { create: run }));
      await refusedUnchanged(ns, () => runs.create(run, { local: true }));
      await client.del(`${ns}:local`);
      // A submission: the caller's list, its open runs, the runs not yet started.
      const queued = { ...record('kinds'), status: 'pending' as const };
      for (const key of [`${ns}:owner:kinds`, `${ns}:open:kinds`, `${ns}:unqueued`]) {
        await client.hset(key, 'x', '1');
        await refusedUnchanged(ns, () => runs.create(queued, { openLimit: 5, queued: true }));
        await client.del(key);
      }
      await runs.create(queued, { openLimit: 5, queued: true });
      // Its start: the heartbeats, which it writes (a run running with no heartbeat would never be ended).
      const beats = await scored(`${ns}:local`);
      await client.del(`${ns}:local`);
      await client.set(`${ns}:local`, 'x');
      await refusedUnchanged(ns, () => runs.start(queued.run_id, queued));
      await client.del(`${ns}:local`);
      if (beats.length > 0) await client.zadd(`${ns}:local`, ...beats);
      const running = { ...queued, status: 'running' as const };
      // Its log: a frame refused, as stored data not valid (it read as Redis unavailable).
      await client.hset(`${ns}:run:${queued.run_id}:log`, 'x', '1');
      await expect(runs.start(queued.run_id, queued)).resolves.toMatchObject({ started: true });
      await refusedUnchanged(ns, () => runs.append(queued.run_id, [{ event: 'data', data: 1 }]));
      await client.del(`${ns}:run:${queued.run_id}:log`);
      // What a write only tidies — the runs not yet started, the caller's open runs — does not stop it: a run
      // that could not end (a review) stayed running until its TTL, and /wait with it.
      const other = { ...record('kinds'), status: 'pending' as const };
      await runs.create(other, { queued: true });
      await client.del(`${ns}:unqueued`);
      await client.set(`${ns}:unqueued`, 'x');
      expect(await runs.start(other.run_id, other)).toMatchObject({ started: true });
      await client.del(`${ns}:open:kinds`);
      await client.set(`${ns}:open:kinds`, 'x');
      expect(await runs.end(queued.run_id, [{ event: 'end' }], { status: 'success', output: 1 }, running)).toMatchObject({ status: 'success' });
      expect(await runs.frames(queued.run_id)).toMatchObject([{ event: 'end' }]);
      expect(await runs.update(other.run_id, { status: 'cancelled' })).toMatchObject({ status: 'cancelled' });
      expect([await client.get(`${ns}:open:kinds`), await client.get(`${ns}:unqueued`)]).toEqual(['x', 'x']);
    } finally {
      await runs.close();
      const keys = await client.keys(`${ns}:*`);
      if (keys.length > 0) await client.del(...keys);
    }
  });
});

// A probe: `GET /{chain}/runs?limit=1` read the caller's latest thousand records whole, inputs and all (150 runs
// of 1 MB: 755 ms, 180 MB more in the server), and an AI SDK resume a hundred; they now read a record whole only
// when its first bytes say it may match.
describe('listing a caller\'s runs of one kind', () => {
  const ns = `list-${randomUUID()}`;
  const sent = async (): Promise<number> => Number(/total_net_output_bytes:(\d+)/.exec(await client.info('stats'))?.[1]);
  const big = 'x'.repeat(100_000);
  const at = (i: number) => new Date(Date.now() + 1000 * i).toISOString();

  afterAll(async () => {
    const keys = await client.keys(`${ns}:*`);
    if (keys.length > 0) await client.del(...keys);
  });

  it('reads whole only the records that may match, and finds them among every run listed', async () => {
    const wide = new RedisRunStore({ client, namespace: ns });
    const b = { ...record('wide'), chain: '/b', status: 'success' as const, created_at: at(0), updated_at: at(0) };
    await wide.create(b);
    // Written before this version: its chat id after its input, so its first bytes cannot rule it out.
    const old = { run_id: randomUUID(), chain: '/c', kind: 'stream' as const, identity: 'wide', status: 'running' as const, input: { text: big }, config: {}, chat_id: 'chat-old', created_at: at(1), updated_at: at(1) };
    await wide.create(old);
    // A newer one whose input says it is of /b and of that chat: words inside the input are not its fields.
    const liar = { run_id: randomUUID(), chain: '/a', kind: 'stream' as const, identity: 'wide', status: 'running' as const, chat_id: 'chat-a', created_at: at(2), updated_at: at(2), input: { chain: '/b', chat_id: 'chat-old', status: 'success' }, config: {} };
    await wide.create(liar);
    for (let i = 0; i < 40; i++) await wide.create({ ...record('wide'), chain: '/a', chat_id: `chat-${i}`, created_at: at(3 + i), updated_at: at(3 + i), input: { text: big } });

    let before = await sent();
    expect((await wide.list('wide', 1, { chain: '/b' })).map((run) => run.run_id)).toEqual([b.run_id]);
    // 43 heads of 1 KB, the old record (100 KB: it may be one) and /b's; not forty records of 100 KB.
    expect((await sent()) - before).toBeLessThan(250_000);

    expect((await wide.list('wide', 1, { chain: '/c', chat_id: 'chat-old' })).map((run) => run.run_id)).toEqual([old.run_id]);
    expect(await wide.list('wide', 5, { chain: '/b', status: 'running' })).toEqual([]);
    expect((await wide.list('wide', 5, { chat_id: 'chat-a' })).map((run) => run.run_id)).toEqual([liar.run_id]);

    before = await sent();
    const newest = await wide.list('wide', 3, { chain: '/a' });
    expect(newest.map((run) => run.chat_id)).toEqual(['chat-39', 'chat-38', 'chat-37']);
    // The three it keeps, and the heads of one page.
    expect((await sent()) - before).toBeLessThan(3 * 100_000 + 150_000);
    // Unfiltered, the newest `limit` and no more.
    before = await sent();
    expect(await wide.list('wide', 2)).toHaveLength(2);
    expect((await sent()) - before).toBeLessThan(2 * 100_000 + 50_000);
  });
});

// A review: the listing reads by rank, a page at a time; a run the caller added between two pages moved the
// rest down a place, and the next page began with the last of the one before — listed twice.
describe('a listing while the caller adds a run', () => {
  it('lists each run once', async () => {
    const ns = `list-pages-${randomUUID()}`;
    const paged = new RedisRunStore({ client, namespace: ns });
    try {
      const at = (i: number) => new Date(Date.now() + 1000 * i).toISOString();
      for (let i = 0; i < 150; i++) await paged.create({ ...record('ada'), chain: '/b', status: i < 100 ? 'success' : 'running', created_at: at(i), updated_at: at(i) });
      const original = client.zrevrange.bind(client);
      let added = false;
      const spy = vi.spyOn(client, 'zrevrange').mockImplementation((async (...args: Parameters<typeof client.zrevrange>) => {
        const page = await original(...(args as unknown as [string, number, number]));
        if (!added) {
          added = true;
          await paged.create({ ...record('ada'), chain: '/b', status: 'running', created_at: at(500), updated_at: at(500) });
        }
        return page;
      }) as never);
      try {
        const listed = await paged.list('ada', 100, { chain: '/b', status: 'success' });
        expect(added).toBe(true);
        expect(new Set(listed.map((run) => run.run_id)).size).toBe(listed.length);
        expect(listed).toHaveLength(100);
      } finally {
        spy.mockRestore();
      }
    } finally {
      const keys = await client.keys(`${ns}:*`);
      if (keys.length > 0) await client.del(...keys);
    }
  });
});

// A review of the listing: `limit=100` of runs with 1 MB inputs read the hundred records in one MGET — 100 MB in
// one reply and in the server at once, for each such request. They are now read a few megabytes at a time.
describe('a listing of large records', () => {
  it('reads them a few megabytes at a time, and lists them all', async () => {
    const ns = `list-large-${randomUUID()}`;
    const large = new RedisRunStore({ client, namespace: ns });
    try {
      const at = (i: number) => new Date(Date.now() + 1000 * i).toISOString();
      const input = { text: 'y'.repeat(1_000_000) };
      for (let i = 0; i < 12; i++) await large.create({ ...record('ada'), chain: '/b', created_at: at(i), updated_at: at(i), input });
      await large.create({ ...record('ada'), chain: '/b', created_at: at(20), updated_at: at(20) });
      const spy = vi.spyOn(client, 'mget');
      try {
        const listed = await large.list('ada', 100);
        expect(listed).toHaveLength(13);
        const reads = spy.mock.calls.map((call) => call.length);
        // The small record with the next three of a megabyte, then four at a time: never the thirteen at once.
        expect(Math.max(...reads)).toBeLessThanOrEqual(5);
        expect(reads.reduce((sum, n) => sum + n, 0)).toBe(13);
      } finally {
        spy.mockRestore();
      }
    } finally {
      const keys = await client.keys(`${ns}:*`);
      if (keys.length > 0) await client.del(...keys);
    }
  });
});
