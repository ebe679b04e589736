/**
 * The embedded stores (no Redis) are bounded in bytes, not only in count: a probe computed that the
 * history's 10,000 sessions of 200 messages could hold gigabytes, and the run store's 10,000 runs of
 * 10,000 frames as much — and a finished run was kept for the life of the process, RUNNEL_RUN_TTL or not.
 */
import { describe, expect, it } from 'vitest';
import { AIMessage, HumanMessage, MemoryHistoryStore } from '../../src/index.js';
import { MemoryRunStore, type RunRecord } from '../../src/runs/index.js';

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
