/**
 * Failures of real services: a Redis server of the test's own on a spare
 * port, killed and restarted; Redis frozen with CLIENT PAUSE; Redis full
 * (maxmemory, noeviction); Postgres
 * backends of the pool terminated. Bounds below guard against hangs; they
 * are not timing assertions.
 */
import { afterAll, describe, expect, it, vi } from 'vitest';
import { connectServices, createRedisClient, HumanMessage, RedisChatMessageHistory } from '../../src/index.js';
import { serviceFailure } from '../../src/server/error-reply.js';
import { freePort, settleWithin } from '../helpers.js';
import { RedisServer } from '../support/redis-server.js';

const DATABASE_URL = process.env.RUNNEL_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/runnel_test';
// A spare port of its own, kept across the restarts (a fixed range collided with other servers of the machine).
const redis = new RedisServer(await freePort(), ['--save', '', '--appendonly', 'no']);

afterAll(async () => redis.kill());

describe('Redis failures', () => {
  it('answers 503-coded errors promptly while Redis is down, and recovers when it returns, losing no saved message', async () => {
    await redis.start();
    const client = createRedisClient(`redis://127.0.0.1:${redis.port}`, { commandTimeoutMs: 300 });
    await client.connect();
    const history = new RedisChatMessageHistory({ client, sessionId: 'failover', namespace: 'runnel-failure' });
    await history.addMessages([new HumanMessage('before the outage')]);
    await redis.kill();
    await expect(settleWithin(history.getMessages(), 1000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_REDIS_UNAVAILABLE' });
    await expect(settleWithin(history.addMessages([new HumanMessage('during')]), 1000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_REDIS_UNAVAILABLE' });
    await redis.start();
    // Redis kept nothing on disk (--save ""), so the restarted server is empty; the client reconnects by itself.
    const recovered = await settleWithin(
      (async () => {
        for (;;) {
          const ok = await history.addMessages([new HumanMessage('after')]).then(() => true, () => false);
          if (ok) return history.getMessages();
          await new Promise((r) => setTimeout(r, 50));
        }
      })(),
      5000,
    );
    expect(recovered.map((m) => m.text)).toEqual(['after']);
    client.disconnect();
  });

  // A review: a turn refused unsent (Redis down) sent a removal per message behind it, each carrying the message.
  it('sends no removal after a history write refused unsent: it cannot land', async () => {
    if (!redis.running) await redis.start();
    const client = createRedisClient(`redis://127.0.0.1:${redis.port}`, { commandTimeoutMs: 300 });
    await client.connect();
    const history = new RedisChatMessageHistory({ client, sessionId: 'down', namespace: 'runnel-failure' });
    const removals = vi.spyOn(client, 'lrem');
    const closed = new Promise((resolve) => client.once('close', resolve));
    await redis.kill();
    await closed;
    try {
      await expect(history.addMessages([new HumanMessage('while down')])).rejects.toMatchObject({ code: 'RUNNEL_ERR_REDIS_UNAVAILABLE' });
      expect(removals).not.toHaveBeenCalled();
    } finally {
      client.disconnect();
    }
  });

  it('never lets a command wait past its timeout while Redis is frozen', async () => {
    if (!redis.running) await redis.start();
    const admin = createRedisClient(`redis://127.0.0.1:${redis.port}`);
    await admin.connect();
    const client = createRedisClient(`redis://127.0.0.1:${redis.port}`, { commandTimeoutMs: 200 });
    await client.connect();
    const history = new RedisChatMessageHistory({ client, sessionId: 'frozen', namespace: 'runnel-failure' });
    await admin.call('CLIENT', 'PAUSE', '1500', 'ALL');
    try {
      await expect(settleWithin(history.getMessages(), 1000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_REDIS_UNAVAILABLE' });
    } finally {
      await admin.call('CLIENT', 'UNPAUSE').catch(() => undefined);
      admin.disconnect();
      client.disconnect();
    }
  });
});

describe('Postgres failures', () => {
  it('lives on when idle pool connections are terminated, and the next query works', async () => {
    const services = await connectServices({ databaseUrl: `${DATABASE_URL}?application_name=runnel_failure_test` });
    const sql = await services.sql();
    await sql.query('SELECT 1');
    const killer = await connectServices({ databaseUrl: DATABASE_URL });
    const terminated = await (await killer.sql()).query<{ ok: boolean }>(
      `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = 'runnel_failure_test'`,
    );
    expect(terminated.rows.length).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 100));
    expect((await sql.query<{ one: number }>('SELECT 1 AS one')).rows[0]?.one).toBe(1);
    expect(await services.checks.get('postgres')?.()).toBe(true);
    await services.close();
    await killer.close();
  });
});

describe('Redis full', () => {
  it('a Redis full (maxmemory, noeviction): a turn is refused whole, Redis unavailable, its log saying out of memory; reads still answer', async () => {
    const full = await RedisServer.scratch();
    const client = createRedisClient(full.url, { commandTimeoutMs: 300 });
    await client.connect();
    const history = new RedisChatMessageHistory({ client, sessionId: 'full', namespace: 'runnel-failure' });
    try {
      await history.addMessages([new HumanMessage('before it filled up')]);
      await client.config('SET', 'maxmemory-policy', 'noeviction');
      await client.config('SET', 'maxmemory', '1');
      const refused = await history.addMessages([new HumanMessage('a question'), new HumanMessage('and its answer')]).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refused).toMatchObject({ code: 'RUNNEL_ERR_REDIS_UNAVAILABLE' });
      // The log's line: what an operator needs to see it is not an outage (the message said nothing of it).
      expect(serviceFailure(refused)).toEqual({ code: 'RUNNEL_ERR_REDIS_UNAVAILABLE', service_error: 'out_of_memory' });
      expect((await history.getMessages()).map((m) => m.text)).toEqual(['before it filled up']);
    } finally {
      client.disconnect();
      await full.kill();
    }
  });
});
