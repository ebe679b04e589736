import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AIMessageChunk, buildApp, connectServices, HumanMessage } from '../../src/index.js';
import { echo } from '../support/server.js';

const DATABASE_URL = process.env.RUNNEL_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/runnel_test';
const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const close of closers) await close();
});

describe('services', () => {
  it('reports Redis and Postgres in /readyz, and keeps histories per caller in Redis', async () => {
    const services = await connectServices({ redisUrl: 'redis://127.0.0.1:6379', databaseUrl: DATABASE_URL });
    const app = await buildApp({ chains: [echo] as never, services });
    closers.push(() => app.close());
    const ready = await app.inject('/readyz');
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toEqual({ status: 'ready', checks: { redis: true, postgres: true } });
    const session = `svc-${Date.now()}`;
    await services.history('alice', session).addMessages([new HumanMessage('hi')]);
    expect(await services.history('alice', session).getMessages()).toHaveLength(1);
    expect(await services.history('bob', session).getMessages()).toHaveLength(0);
    await services.history('alice', session).clear();
    expect((await (await services.sql()).query<{ one: number }>('SELECT 1 AS one')).rows[0]?.one).toBe(1);
  });

  it('keeps serving what does not need a service that is down; /readyz says which', async () => {
    const services = await connectServices({ redisUrl: 'redis://127.0.0.1:1', databaseUrl: 'postgres://postgres@127.0.0.1:1/none' });
    const app = await buildApp({ chains: [echo] as never, services });
    closers.push(() => app.close());
    const ready = await app.inject('/readyz');
    expect(ready.statusCode).toBe(503);
    expect(ready.json().checks).toEqual({ redis: false, postgres: false });
    expect((await app.inject('/healthz')).statusCode).toBe(200);
    expect((await app.inject({ method: 'POST', url: '/echo/invoke', payload: { input: { name: 'a' } } })).statusCode).toBe(200);
    await expect(services.history('a', 's').getMessages()).rejects.toMatchObject({ code: 'RUNNEL_ERR_REDIS_UNAVAILABLE' });
  });

  it('uses the embedded defaults without URLs: memory histories and PGlite with pgvector', async () => {
    const services = await connectServices({ dataDir: `/tmp/runnel-test-data-${process.pid}` });
    closers.push(() => services.close());
    expect(services.redis).toBeUndefined();
    await services.history('a', 's').addMessages([new HumanMessage('x')]);
    expect(await services.history('a', 's').getMessages()).toHaveLength(1);
    const sql = await services.sql();
    await sql.exec('CREATE EXTENSION IF NOT EXISTS vector');
    expect((await sql.query<{ d: number }>("SELECT '[1,0]'::vector <=> '[0,1]'::vector AS d")).rows[0]?.d).toBeCloseTo(1);
    // PGlite compiles its WebAssembly at first open: seconds on a loaded 2-core machine.
  }, 90_000);

  // A trial: on a fresh data directory, PGlite's initdb held the server's thread for 7-15 s — /healthz answered
  // nothing. It is made on a worker thread now: the thread turns all along, but for the open that follows.
  it('makes a new embedded database off the main thread', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'runnel-init-'));
    // What earlier processes left (a review): a making killed midway, removed; a directory without a
    // database, moved aside, never deleted.
    mkdirSync(join(dataDir, 'pgdata.making-99999-1'));
    mkdirSync(join(dataDir, 'pgdata'));
    writeFileSync(join(dataDir, 'pgdata', 'keep.txt'), 'mine');
    const services = await connectServices({ dataDir });
    const started = performance.now();
    let last = started;
    let longest = 0;
    let opened = false;
    const opening = services.sql().finally(() => (opened = true));
    while (!opened) {
      await new Promise((resolve) => setImmediate(resolve));
      const now = performance.now();
      longest = Math.max(longest, now - last);
      last = now;
    }
    await opening;
    const total = performance.now() - started;
    const sql = await services.sql();
    expect((await sql.query<{ d: number }>("SELECT '[1,0]'::vector <=> '[0,1]'::vector AS d")).rows[0]?.d).toBeCloseTo(1);
    await services.close();
    const left = readdirSync(dataDir);
    expect(left.filter((name) => name.includes('.making-'))).toEqual([]);
    const aside = left.find((name) => name.startsWith('pgdata.incomplete-')) as string;
    expect(readFileSync(join(dataDir, aside, 'keep.txt'), 'utf8')).toBe('mine');
    // The thread's longest stall is the open of the made database, not the making: far under half of it all.
    expect(longest).toBeLessThan(total / 2);
  }, 120_000);
});

describe('the services model cache', () => {
  it("keeps a chain's own namespace inside the deployment's cache prefix, so deployments sharing a Redis never share entries", async () => {
    const deployment = `runnel-test-dep-${process.pid}-${Date.now()}`;
    const services = await connectServices({ redisUrl: 'redis://127.0.0.1:6379', namespace: deployment });
    closers.push(() => services.close());
    const redis = services.redis!;
    await redis.ping();
    await services.modelCache({ namespace: 'my-chain', ttlSeconds: 60 }).update('k1', [new AIMessageChunk('a')]);
    await services.modelCache().update('k2', [new AIMessageChunk('b')]);
    expect(await redis.exists(`${deployment}:cache:my-chain:k1`, `${deployment}:cache:k2`)).toBe(2);
    // What was the chain's own prefix, beside every deployment's, holds nothing.
    expect(await redis.exists('my-chain:k1')).toBe(0);
    expect(await redis.ttl(`${deployment}:cache:my-chain:k1`)).toBeGreaterThan(0);
    await redis.del(`${deployment}:cache:my-chain:k1`, `${deployment}:cache:k2`);
  });

  it('counts hits and misses in /metrics, in Redis', async () => {
    const { buildApp: build, defineChain, FakeListChatModel, lambda } = await import('../../src/index.js');
    const services = await connectServices({ redisUrl: 'redis://127.0.0.1:6379' });
    const model = new FakeListChatModel({ responses: ['cached answer'], cache: services.modelCache({ namespace: `runnel-test-metrics:${Date.now()}`, ttlSeconds: 60 }) });
    const app = await build({ chains: [defineChain({ path: '/m', runnable: lambda((q: string) => q).pipe(model) })] as never, services });
    closers.push(() => app.close());
    const question = `metrics-${Math.random()}`;
    for (let i = 0; i < 3; i++) expect((await app.inject({ method: 'POST', url: '/m/invoke', payload: { input: question } })).statusCode).toBe(200);
    const metrics = (await app.inject('/metrics')).body;
    expect(metrics).toContain('runnel_model_cache_total{result="miss"} 1');
    expect(metrics).toContain('runnel_model_cache_total{result="hit"} 2');
  });
});
