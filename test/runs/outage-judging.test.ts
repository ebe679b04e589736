/**
 * After a Redis outage every process's heartbeats are old: a sweep that
 * judged them at once ended runs still executing `RUNNEL_ERR_RUN_LOST` (a
 * probe: a 3.5 s restart with a 3 s lock). A process whose sweeps Redis
 * failed takes no run for lost until a lock after Redis answered it again;
 * a run nobody beats for is still ended then. Real Redis, killed and
 * restarted on its own append-only file.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { createRedisClient } from '../../src/index.js';
import { BullRunQueue, RedisRunStore, type RunRecord, type RunStore } from '../../src/runs/index.js';
import { delay, freePort, settleWithin } from '../helpers.js';
import { RedisServer } from '../support/redis-server.js';

const dir = mkdtempSync(join(tmpdir(), 'runnel-judging-'));
let redis: RedisServer | undefined;
afterAll(async () => {
  await redis?.kill();
  rmSync(dir, { recursive: true, force: true });
});

it('takes no run for lost until a lock after Redis came back, and then ends the one nobody beats for', async () => {
  redis = new RedisServer(await freePort(), ['--dir', dir, '--appendonly', 'yes', '--appendfsync', 'always', '--save', '']);
  await redis.start();
  const client = createRedisClient(redis.url, { commandTimeoutMs: 200 });
  await client.connect();
  const ns = `runnel-test-judging-${randomUUID()}`;
  const inner = new RedisRunStore({ client, namespace: `${ns}:runs` });
  const runId = randomUUID();
  // Counts the sweeps after the outage that found the run stale, and how many had when it was ended.
  let back = false;
  let staleSweeps = 0;
  let sweepsAtEnd: number | undefined;
  const store = new Proxy(inner, {
    get(target, property, receiver) {
      if (property === 'stale') {
        return async (ms: number) => {
          const ids = await target.stale(ms);
          if (back && ids.includes(runId)) staleSweeps++;
          return ids;
        };
      }
      if (property === 'end') {
        return (id: string, ...rest: unknown[]) => {
          if (id === runId) sweepsAtEnd ??= staleSweeps;
          return (target.end as (...args: unknown[]) => unknown).call(target, id, ...rest);
        };
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as RunStore;
  const lockMs = 1_000;
  const queue = new BullRunQueue({ connection: client, prefix: `${ns}:bull`, store, chains: new Map(), concurrency: 0, lockMs });
  try {
    // A run another process executes, beating for it now.
    const now = new Date().toISOString();
    const record: RunRecord = { run_id: runId, kind: 'stream', chain: '/gated', identity: 'ada', status: 'running', input: 1, config: {}, created_at: now, updated_at: now };
    await inner.create(record, { local: true });
    // Redis goes away for more than a lock: this process's sweeps fail meanwhile (one every half lock).
    await redis.kill();
    await delay(2.5 * lockMs);
    await redis.start();
    back = true;
    // Nobody beats for the run again: it is ended lost — but not by the first sweep after Redis came back,
    // whose judgement every live process's old heartbeat would have failed.
    await settleWithin(
      (async () => {
        // Read as soon as the client is connected again (until then, refused).
        while ((await inner.get(runId).catch(() => undefined))?.status !== 'error') await delay(50);
      })(),
      30_000,
    );
    expect((await inner.get(runId))?.error).toMatchObject({ code: 'RUNNEL_ERR_RUN_LOST' });
    expect(sweepsAtEnd).toBeGreaterThanOrEqual(2);
  } finally {
    await queue.close(50);
    client.disconnect();
  }
}, 60_000);
