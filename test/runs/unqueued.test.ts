/**
 * A queued run is stored, then its job added to BullMQ: two steps. A process stopped between them (kill -9
 * in a deploy, under load) left a run `pending` that no worker would ever take — for `/wait` and
 * `/stream` until its TTL (24 h), and holding one of its caller's places under `RUNNEL_MAX_RUNS_PER_KEY`
 * for as long. Now the sweep ends such a run as lost, and leaves alone a run whose job waits its turn.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, connectServices, defineChain, lambda, type ChainSpec } from '../../src/index.js';
import { rewriteJobData } from '../../src/runs/queue.js';
import { RedisRunStore, type RunRecord } from '../../src/runs/index.js';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';

const keys = { ada: 'ada-key-0123456789abcdef', bob: 'bob-key-0123456789abcdef' };
const as = (who: keyof typeof keys) => ({ authorization: `Bearer ${keys[who]}`, 'content-type': 'application/json' });

describe('a run stored but never queued (its submitter stopped between the two steps)', () => {
  const gate: { open?: () => void; started?: () => void } = {};
  const heldStarted = new Promise<void>((started) => (gate.started = started));
  const chain = defineChain({
    path: '/gate',
    runnable: lambda(
      async (input: { name: string }) => {
        if (input.name === 'held') {
          await new Promise<void>((resolve) => {
            gate.open = resolve;
            gate.started?.();
          });
        }
        return input.name;
      },
      { input: z.object({ name: z.string() }), output: z.string() },
    ),
  });
  const runNamespace = `runnel-test-${randomUUID()}`;
  const redis = new Redis('redis://127.0.0.1:6379');
  // The server's own store, on the same keys: what a submitter killed after its first step leaves behind.
  const store = new RedisRunStore({ client: redis, namespace: `${runNamespace}:runs` });
  let app: FastifyInstance;
  let url = '';

  beforeAll(async () => {
    const config = { apiKeys: Object.entries(keys).map(([name, key]) => ({ name, key })), runNamespace, maxRunsPerKey: 1, workerConcurrency: 1, runLockMs: 1_000 };
    app = await buildApp({ chains: [chain] as ChainSpec<never, unknown>[], services: await connectServices({ redisUrl: 'redis://127.0.0.1:6379', namespace: runNamespace }), config });
    await app.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    gate.open?.();
    await app.close();
    redis.disconnect();
  });

  const submit = (who: keyof typeof keys, name: string) => fetch(`${url}/gate/runs`, { method: 'POST', headers: as(who), body: JSON.stringify({ input: { name } }) });
  const read = async (runId: string, who: keyof typeof keys, wait = false) =>
    (await (await fetch(`${url}/gate/runs/${runId}${wait ? '/wait?timeout_s=15' : ''}`, { headers: as(who) })).json()) as { status: string; output?: unknown; error?: { code: string } };

  it('ends it as lost and frees its caller’s place; a run whose job waits its turn past the same time is left to run', async () => {
    // Bob's run holds the one worker; Ada's next one waits in the queue, with its job, longer than the grace.
    const held = (await (await submit('bob', 'held')).json()) as { run_id: string };
    const waiting = (await (await submit('ada', 'waiting')).json()) as { run_id: string };
    expect(waiting.run_id).toBeTypeOf('string');
    // Ada's second run stored with the server's own first step, and no job: the process stopped there.
    const now = new Date().toISOString();
    const orphan: RunRecord = { run_id: randomUUID(), chain: '/gate', kind: 'run', identity: 'ada', status: 'pending', input: { name: 'orphan' }, config: {}, created_at: now, updated_at: now };
    await store.create(orphan, { queued: true });
    const lost = await read(orphan.run_id, 'ada', true);
    expect(lost).toMatchObject({ status: 'error', error: { code: 'RUNNEL_ERR_RUN_LOST' } });
    // The sweep takes the oldest first, so it has looked at the waiting run too: it left it to its job.
    await heldStarted;
    expect((await read(waiting.run_id, 'ada')).status).toBe('pending');
    expect((await store.unqueued(0, 100)).map((run) => run.runId)).toContain(waiting.run_id);
    gate.open?.();
    expect(await read(held.run_id, 'bob', true)).toMatchObject({ status: 'success', output: 'held' });
    expect(await read(waiting.run_id, 'ada', true)).toMatchObject({ status: 'success', output: 'waiting' });
    // A run leaves the runs not yet started as it starts.
    expect((await store.unqueued(0, 100)).map((run) => run.runId)).not.toContain(waiting.run_id);
  });

  it('ends a run whose job failed before it started (the store unreadable to its worker then): it stayed pending', async () => {
    const now = new Date().toISOString();
    const run: RunRecord = { run_id: randomUUID(), chain: '/gate', kind: 'run', identity: 'ada', status: 'pending', input: { name: 'failed' }, config: {}, created_at: now, updated_at: now };
    // Stored unreadable (as the worker that takes its job will find it, and fail), and noted as not started,
    // as the create's step notes it: a sweep meanwhile cannot read it, and leaves it.
    const key = `${runNamespace}:runs:run:${run.run_id}`;
    await redis.set(key, 'not a record', 'EX', 3600);
    const [seconds, micros] = await redis.time();
    await redis.zadd(`${runNamespace}:runs:unqueued`, Number(seconds) * 1000 + Math.floor(Number(micros) / 1000), run.run_id);
    const queue = new Queue('runs', { connection: redis.duplicate({ maxRetriesPerRequest: null }), prefix: `${runNamespace}:bull` });
    try {
      await queue.add('run', { run_id: run.run_id }, { jobId: run.run_id });
      const job = queue.toKey(run.run_id);
      while ((await redis.hget(job, 'finishedOn')) === null) await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      await queue.close();
    }
    // Readable again, still pending: its job has failed.
    await redis.set(key, JSON.stringify(run), 'KEEPTTL');
    expect(await read(run.run_id, 'ada', true)).toMatchObject({ status: 'error', error: { code: 'RUNNEL_ERR_RUN_LOST' } });
  });

  // A sweep reads at most 20 passes of 500; each began again from the oldest, so a lost run behind more than
  // 10,000 runs waiting their turn was never reached while they waited.
  it('reaches a lost run behind a backlog longer than one sweep reads', async () => {
    const [seconds] = await redis.time();
    const old = Number(seconds) * 1000 - 10_000;
    const queue = new Queue('runs', { connection: redis.duplicate({ maxRetriesPerRequest: null }), prefix: `${runNamespace}:bull` });
    const record = (name: string): RunRecord => {
      const now = new Date().toISOString();
      return { run_id: randomUUID(), chain: '/gate', kind: 'run', identity: 'ada', status: 'pending', input: { name }, config: {}, created_at: now, updated_at: now };
    };
    try {
      // 10,500 runs not started, each with its job (as a queue holds one waiting its turn: added, not finished).
      for (let batch = 0; batch < 21; batch++) {
        const pipeline = redis.pipeline();
        for (let i = 0; i < 500; i++) {
          const run = record(`backlog-${batch}-${i}`);
          pipeline.set(`${runNamespace}:runs:run:${run.run_id}`, JSON.stringify(run), 'EX', 600);
          pipeline.hset(queue.toKey(run.run_id), 'timestamp', String(old));
          pipeline.expire(queue.toKey(run.run_id), 600);
          pipeline.zadd(`${runNamespace}:runs:unqueued`, old, run.run_id);
        }
        await pipeline.exec();
      }
      // Behind them, one with no job.
      const lost = record('behind');
      await redis.set(`${runNamespace}:runs:run:${lost.run_id}`, JSON.stringify(lost), 'EX', 600);
      await redis.zadd(`${runNamespace}:runs:unqueued`, old + 1, lost.run_id);
      // Two sweeps at least (each reads 10,000): waited for as long as they take on a loaded machine.
      let ended = await read(lost.run_id, 'ada', true);
      while (ended.status === 'pending') ended = await read(lost.run_id, 'ada', true);
      expect(ended).toMatchObject({ status: 'error', error: { code: 'RUNNEL_ERR_RUN_LOST' } });
    } finally {
      await queue.close();
      await redis.del(`${runNamespace}:runs:unqueued`);
    }
  }, 120_000);

  it('ends a queued run whose job data was changed by hand (it failed in every worker before it started, and never ended)', async () => {
    const now = new Date().toISOString();
    const run: RunRecord = { run_id: randomUUID(), chain: '/gate', kind: 'run', identity: 'ada', status: 'pending', input: { name: 'mended' }, config: {}, created_at: now, updated_at: now };
    await store.create(run, { queued: true });
    const queue = new Queue('runs', { connection: redis.duplicate({ maxRetriesPerRequest: null }), prefix: `${runNamespace}:bull` });
    try {
      // Held back (the queue paused) while its data is spoilt, then let go to the worker.
      await queue.pause();
      await queue.add('run', { run_id: run.run_id }, { jobId: run.run_id });
      await redis.hset(queue.toKey(run.run_id), 'data', '{"run_id":');
      await queue.resume();
      let ended = await read(run.run_id, 'ada', true);
      while (ended.status === 'pending') ended = await read(run.run_id, 'ada', true);
      // Its data written again from its id, the job is taken again: it runs, or — when BullMQ has counted it
      // stalled once too often meanwhile (a worker took it and failed) — fails, and the run ends lost. Either
      // way it ends (it stayed pending for good, a worker failing at it every few seconds).
      if (ended.status === 'success') expect(ended).toMatchObject({ output: 'mended' });
      else expect(ended, JSON.stringify(ended)).toMatchObject({ status: 'error', error: { code: 'RUNNEL_ERR_RUN_LOST' } });
    } finally {
      await queue.close();
    }
  }, 120_000);

  it('frees the place the lost run held under RUNNEL_MAX_RUNS_PER_KEY', async () => {
    const now = new Date().toISOString();
    const orphan: RunRecord = { run_id: randomUUID(), chain: '/gate', kind: 'run', identity: 'bob', status: 'pending', input: { name: 'orphan' }, config: {}, created_at: now, updated_at: now };
    // Bob's one place, taken by it until its end.
    await store.create(orphan, { queued: true, openLimit: 1 });
    expect(await read(orphan.run_id, 'bob', true)).toMatchObject({ status: 'error', error: { code: 'RUNNEL_ERR_RUN_LOST' } });
    const next = await submit('bob', 'next');
    expect(next.status).toBe(202);
    expect(await read(((await next.json()) as { run_id: string }).run_id, 'bob', true)).toMatchObject({ status: 'success', output: 'next' });
  });
});

// A review: the sweep read a job's data, then wrote it again with a bare HSET — a job a worker finished and
// BullMQ removed in between came back as a hash of one field that nothing removes, and a replica's sweep that
// mended it first was written over. Now the write is one step with the check that the job is as read.
describe('writing a spoilt job\'s data again', () => {
  const redis = new Redis('redis://127.0.0.1:6379');
  const key = `runnel-test-${randomUUID()}:bull:runs:r1`;
  afterAll(async () => {
    await redis.del(key);
    redis.disconnect();
  });

  it('writes only over the data read, of a job still queued and not finished', async () => {
    await redis.hset(key, 'timestamp', '1', 'data', '{"run_id":');
    // Changed meanwhile (another replica mended it): left.
    expect(await rewriteJobData(redis, key, 'spoilt before', 'r1')).toBe(false);
    expect(await redis.hget(key, 'data')).toBe('{"run_id":');
    expect(await rewriteJobData(redis, key, '{"run_id":', 'r1')).toBe(true);
    expect(await redis.hget(key, 'data')).toBe('{"run_id":"r1"}');
    // Finished meanwhile: left.
    await redis.hset(key, 'data', 'x', 'finishedOn', '2');
    expect(await rewriteJobData(redis, key, 'x', 'r1')).toBe(false);
    // Removed meanwhile: not made again.
    await redis.del(key);
    expect(await rewriteJobData(redis, key, 'x', 'r1')).toBe(false);
    expect(await redis.exists(key)).toBe(0);
    // Its data missing as read, and still: written.
    await redis.hset(key, 'timestamp', '1');
    expect(await rewriteJobData(redis, key, null, 'r1')).toBe(true);
    expect(await rewriteJobData(redis, key, null, 'r1')).toBe(false);
  });
});
