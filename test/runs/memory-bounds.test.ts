/**
 * The embedded stores (no Redis) are bounded in bytes, not only in count: a probe computed that the
 * history's 10,000 sessions of 200 messages could hold gigabytes, and the run store's 10,000 runs of
 * 10,000 frames as much — and a finished run was kept for the life of the process, RUNNEL_RUN_TTL or not.
 */
import { describe, expect, it } from 'vitest';
import { AIMessage, HumanMessage, MemoryHistoryStore } from '../../src/index.js';
import { lambda } from '../../src/core/index.js';
import { MemoryRunQueue, MemoryRunStore, type RunRecord } from '../../src/runs/index.js';

const now = new Date().toISOString();
const record = (id: string): RunRecord => ({ run_id: id, chain: '/story', kind: 'run', identity: 'ada', status: 'running', input: null, config: {}, created_at: now, updated_at: now });
const words = (n: number): string => 'word '.repeat(n);

describe('MemoryHistoryStore', () => {
  it('forgets the least recently written conversations past its bytes, never the one just written', async () => {
    const store = new MemoryHistoryStore({ maxBytes: 20_000 });
    for (const id of ['a', 'b', 'c']) await store.history(id).addMessages([new HumanMessage(words(1_000)), new AIMessage('ok')]);
    // Each conversation is a little over 5,000 bytes: all three fit.
    expect(store.size).toBe(3);
    await store.history('a').addMessages([new HumanMessage(words(1_000))]);
    await store.history('d').addMessages([new HumanMessage(words(1_000))]);
    // 'b' was the least recently written.
    expect((await store.history('b').getMessages()).length).toBe(0);
    expect((await store.history('a').getMessages()).length).toBe(3);
    expect(store.bytes).toBeLessThanOrEqual(20_000);
    // One conversation larger than the whole budget is kept (until another is written), alone.
    await store.history('big').addMessages([new HumanMessage(words(5_000))]);
    expect(store.size).toBe(1);
    expect((await store.history('big').getMessages()).length).toBe(1);
    await store.history('big').clear();
    expect([store.size, store.bytes]).toEqual([0, 0]);
  });
});

describe('MemoryRunStore', () => {
  it('forgets the oldest finished runs past its bytes; a run under way is kept', async () => {
    const store = new MemoryRunStore({ maxBytes: 35_000 });
    await store.create(record('live'));
    await store.append('live', [{ event: 'data', data: words(2_000) }]);
    for (const id of ['r1', 'r2', 'r3']) {
      await store.create(record(id));
      await store.end(id, [{ event: 'data', data: words(2_000) }, { event: 'end' }], { status: 'success' });
    }
    // 4 logs of about 10,000 bytes in a budget of 35,000: the oldest finished one went.
    expect(await store.get('r1')).toBeUndefined();
    expect((await store.get('r2'))?.status).toBe('success');
    expect((await store.get('live'))?.status).toBe('running');
    expect((await store.frames('live', undefined)).length).toBe(1);
  });

  it('keeps a finished run for its time to live, as Redis does: gone from its record, its log and the list', async () => {
    const store = new MemoryRunStore({ ttlSeconds: 0 });
    await store.create(record('r1'));
    await store.create(record('r2'));
    expect((await store.get('r1'))?.status).toBe('running');
    await store.end('r1', [{ event: 'data', data: 'x' }, { event: 'end' }], { status: 'success' });
    expect(await store.get('r1')).toBeUndefined();
    expect(await store.frames('r1')).toEqual([]);
    expect((await store.list('ada', 10)).map((run) => run.run_id)).toEqual(['r2']);
    const kept = new MemoryRunStore();
    await kept.create(record('r1'));
    await kept.end('r1', [{ event: 'end' }], { status: 'success' });
    expect((await kept.get('r1'))?.status).toBe('success');
  });
});

// A review: runs moved to the end of the store as they ended, so a caller's list was no longer newest first.
it('lists a caller\'s runs newest first, however they ended', async () => {
  const store = new MemoryRunStore();
  for (const id of ['a', 'b', 'c']) await store.create(record(id));
  await store.end('a', [{ event: 'end' }], { status: 'success' });
  expect((await store.list('ada', 10)).map((run) => run.run_id)).toEqual(['c', 'b', 'a']);
});

// A review: every read forgot runs past the store's count, so with the store full of runs under way a run
// that had just ended was gone before its stream could send its last frames.
it('keeps a run that has just ended readable until the next write, however full the store is', async () => {
  const store = new MemoryRunStore({ maxRuns: 2 });
  for (const id of ['a', 'b', 'x']) await store.create(record(id));
  await store.end('x', [{ event: 'data', data: 'last' }, { event: 'end' }], { status: 'success' });
  expect((await store.frames('x')).map((frame) => frame.event)).toEqual(['data', 'end']);
  expect((await store.get('x'))?.status).toBe('success');
  await store.create(record('y'));
  expect(await store.get('x')).toBeUndefined();
});

// A limits probe: the bounds counted characters, and text past Latin-1 (Chinese, emoji) takes two bytes a
// character in V8 — 128 MB of history held about 240 MB of Chinese.
it('counts text past Latin-1 at two bytes a character, in both stores', async () => {
  const wide = '漢'.repeat(2_000);
  const cjk = new MemoryHistoryStore();
  await cjk.history('s').addMessages([new HumanMessage(wide)]);
  expect(cjk.bytes).toBeGreaterThan(4_000);
  // Latin-1 (é included) is one byte a character.
  const latin = new MemoryHistoryStore();
  await latin.history('s').addMessages([new HumanMessage('é'.repeat(2_000))]);
  expect(latin.bytes).toBeLessThan(2_200);
  const runs = new MemoryRunStore({ maxBytes: 10_000 });
  for (const id of ['r1', 'r2']) {
    await runs.create(record(id));
    await runs.end(id, [{ event: 'data', data: '漢'.repeat(3_000) }, { event: 'end' }], { status: 'success' });
  }
  // Two logs of about 6,000 bytes each in a budget of 10,000: the older went.
  expect(await runs.get('r1')).toBeUndefined();
  expect((await runs.get('r2'))?.status).toBe('success');
});

// A limits probe: the bytes counted only logs, so 4,500 runs of a megabyte's input each (kept a day) took
// the default server's heap — and input, config and `stream_events` filters are the client's to fill.
describe('MemoryRunStore counts records', () => {
  const big = (id: string, status: RunRecord['status'] = 'running'): RunRecord => ({ ...record(id), status, input: { chat_history: [words(2_000)] } });

  it('forgets the oldest finished runs past its bytes when their input holds them', async () => {
    const store = new MemoryRunStore({ maxBytes: 25_000 });
    for (const id of ['r1', 'r2', 'r3']) {
      await store.create(big(id));
      await store.end(id, [{ event: 'end' }], { status: 'success' });
    }
    // Three inputs of about 10,000 bytes in a budget of 25,000: the first went.
    expect(await store.get('r1')).toBeUndefined();
    expect((await store.get('r3'))?.status).toBe('success');
  });

  it('counts an output as the run ends', async () => {
    const store = new MemoryRunStore({ maxBytes: 25_000 });
    for (const id of ['r1', 'r2', 'r3']) {
      await store.create(record(id));
      await store.end(id, [{ event: 'end' }], { status: 'success', output: words(2_000) });
    }
    await store.create(record('r4'));
    expect(await store.get('r1')).toBeUndefined();
    expect((await store.get('r2'))?.status).toBe('success');
  });

  it('refuses a run past its bytes while runs under way hold them, and takes it once one ends', async () => {
    const store = new MemoryRunStore({ maxBytes: 25_000 });
    await store.create(big('a'), { openLimit: 5 });
    await store.create(big('b'), { openLimit: 5 });
    const refused = await store.create(big('c'), { openLimit: 5 }).catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'RUNNEL_ERR_OVERLOADED' });
    expect(await store.get('c')).toBeUndefined();
    // Its place among the caller's open runs was given back (b, c, d and e are open: four).
    await store.end('a', [{ event: 'end' }], { status: 'success' });
    await store.create(big('c'), { openLimit: 5 });
    expect((await store.get('c'))?.status).toBe('running');
    expect(await store.get('a')).toBeUndefined();
    await store.create(record('d'), { openLimit: 5 });
    await store.create(record('e'), { openLimit: 5 });
    await expect(store.create(record('f'), { openLimit: 3 })).rejects.toMatchObject({ code: 'RUNNEL_ERR_TOO_MANY_RUNS' });
  });

  // A review: a run larger than the whole store was told 503, retry shortly — and could never be taken.
  it('refuses a run larger than the whole store as too large, not to be retried', async () => {
    const store = new MemoryRunStore({ maxBytes: 5_000 });
    const refused = await store.create(big('huge')).catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'RUNNEL_ERR_BODY_TOO_LARGE', statusCode: 413, retryable: false });
    expect(await store.get('huge')).toBeUndefined();
  });

  it('refuses a run it cannot hold without letting the finished runs go for it', async () => {
    const store = new MemoryRunStore({ maxBytes: 25_000 });
    for (const id of ['f1', 'f2', 'f3']) {
      await store.create(record(id));
      await store.end(id, [{ event: 'end' }], { status: 'success' });
    }
    await store.create(big('a'));
    await store.create(big('b'));
    await expect(store.create(big('c'))).rejects.toMatchObject({ code: 'RUNNEL_ERR_OVERLOADED' });
    for (const id of ['f1', 'f2', 'f3']) expect((await store.get(id))?.status, id).toBe('success');
    // One that fits once the finished runs go is taken, as before.
    await store.end('a', [{ event: 'end' }], { status: 'success' });
    await store.create(big('c'));
    expect((await store.get('c'))?.status).toBe('running');
  });
});

// The same refusal through the queue: a submission and a durable stream are told the process is full (503,
// retryable), not that Redis — which this process does not use — is unavailable.
it('refuses a background run and a durable stream with RUNNEL_ERR_OVERLOADED while runs under way fill the store', async () => {
  let release = (): void => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  const queue = new MemoryRunQueue({
    store: new MemoryRunStore({ maxBytes: 25_000 }),
    chains: new Map([['/story', lambda(async (input: unknown) => (await held, input))]]) as never,
    concurrency: 4,
    webhooks: { hosts: [], secret: undefined, allowHttp: false },
    log: () => undefined,
  });
  const input = { chat_history: [words(2_000)] };
  const pending = (id: string): RunRecord => ({ ...record(id), status: 'pending', input });
  await queue.submit(pending('a'));
  await queue.submit(pending('b'));
  await expect(queue.submit(pending('c'))).rejects.toMatchObject({ code: 'RUNNEL_ERR_OVERLOADED' });
  const frames: unknown[] = [];
  await expect(queue.runHere({ ...record('d'), kind: 'stream', input }, { frame: (frame) => void frames.push(frame) })).rejects.toMatchObject({ code: 'RUNNEL_ERR_OVERLOADED' });
  expect(frames).toEqual([]);
  release();
  for (;;) {
    if ((await queue.store.get('b'))?.status === 'success') break;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  await queue.submit(pending('c'));
  await queue.close(1_000);
});
