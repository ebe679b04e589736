/**
 * The worker's error log through a Redis outage: BullMQ's worker fails at
 * every try while Redis is away, and the log gets the first error of each
 * kind, then a line a minute saying how many it held back — not a line a
 * second for the whole outage. The clock is the test's.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { RedisRunStore } from '../../src/runs/index.js';
import { BullRunQueue, repeatsHeldBack } from '../../src/runs/queue.js';

describe('repeatsHeldBack', () => {
  it('passes the first of each kind, then one a minute with the count held back', () => {
    let clock = 0;
    const lines: string[] = [];
    const log = repeatsHeldBack((error, message) => lines.push(`${message}: ${(error as Error).message}`), { now: () => clock });
    const refused = new Error('connect ECONNREFUSED 127.0.0.1:6379');
    // An outage of two and a half minutes, a failure a second.
    for (clock = 0; clock < 150_000; clock += 1_000) log(refused, 'run worker error');
    expect(lines).toEqual([
      'run worker error: connect ECONNREFUSED 127.0.0.1:6379',
      'run worker error (and 59 more like it since the last line): connect ECONNREFUSED 127.0.0.1:6379',
      'run worker error (and 59 more like it since the last line): connect ECONNREFUSED 127.0.0.1:6379',
    ]);
    // Another kind is not held back by the first; the first, after a quiet minute, passes at once.
    log(new Error('READONLY You can\'t write against a read only replica.'), 'run worker error');
    clock += 120_000;
    log(refused, 'run worker error');
    expect(lines.slice(3)).toEqual([
      "run worker error: READONLY You can't write against a read only replica.",
      'run worker error (and 29 more like it since the last line): connect ECONNREFUSED 127.0.0.1:6379',
    ]);
  });
});

describe("the run worker's errors", () => {
  it("says a lost job lock as a warning, not as errors: a paused worker's three BullMQ errors a run are handled", async () => {
    const connection = new Redis('redis://127.0.0.1:6379', { maxRetriesPerRequest: null, lazyConnect: true });
    await connection.connect();
    const namespace = `test-locks-${randomUUID()}`;
    const errors: string[] = [];
    const warnings: string[] = [];
    const store = new RedisRunStore({ client: connection, namespace });
    const queue = new BullRunQueue({
      store,
      chains: new Map(),
      concurrency: 1,
      connection,
      prefix: namespace,
      log: (error, message) => void errors.push(`${message}: ${(error as Error).message}`),
      warn: (fields, message) => void warnings.push(`${message}: ${String(fields.reason)}`),
    });
    try {
      const worker = (queue as unknown as { worker: { emit(event: string, error: Error): void } }).worker;
      // BullMQ's own words (lock-manager.js, finished-errors.js).
      worker.emit('error', new Error('could not renew lock for job 7'));
      worker.emit('error', new Error('Missing lock for job 7. moveToFinished'));
      worker.emit('error', new Error('Lock mismatch for job 7. Cmd moveToFinished from active'));
      worker.emit('error', new Error('connect ECONNREFUSED 127.0.0.1:6379'));
      // Another error that speaks of a lock is no lost job lock.
      worker.emit('error', new Error('ERR lock table is full'));
      expect(warnings).toHaveLength(3);
      expect(warnings[0]).toMatch(/^run worker lost a job's lock .*: could not renew lock for job 7$/);
      expect(errors).toEqual(['run worker error: connect ECONNREFUSED 127.0.0.1:6379', 'run worker error: ERR lock table is full']);
    } finally {
      await queue.close(0);
      await store.close();
      const keys = await connection.keys(`${namespace}*`);
      if (keys.length > 0) await connection.del(...keys);
      connection.disconnect();
    }
  });
});
