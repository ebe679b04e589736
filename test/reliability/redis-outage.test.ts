/**
 * Redis killed (SIGKILL) and frozen (SIGSTOP) under load, at the server: a
 * Redis of the test's own on a spare port, append-only with fsync on every
 * write, restarted on the same files. Chains that do not need Redis keep
 * answering, the response cache fails open, history routes answer 503 with
 * their code, everything recovers when Redis returns, and no history message
 * whose request succeeded is lost. Times are reported, not asserted; the
 * bounds are guards against hangs.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChains } from '../../chains/index.js';
import { AIMessage, buildApp, connectServices, HumanMessage, RedisChatMessageHistory, type Services } from '../../src/index.js';
import { freePort, settleWithin } from '../helpers.js';
import { RedisServer } from '../support/redis-server.js';

const dir = mkdtempSync(join(tmpdir(), 'runnel-redis-'));
let redis: RedisServer;
let app: FastifyInstance;
let services: Services;

beforeAll(async () => {
  redis = new RedisServer(await freePort(), ['--dir', dir, '--appendonly', 'yes', '--appendfsync', 'always', '--save', '']);
  await redis.start();
  services = await connectServices({ redisUrl: redis.url, redisCommandTimeoutMs: 300 });
  app = await buildApp({ chains: createChains({ services, env: {}, offlineDelayMs: 0 }).chains, services });
}, 30_000);

afterAll(async () => {
  await app?.close();
  // undefined when beforeAll failed before starting it
  redis?.signal('SIGCONT');
  await redis?.kill();
  rmSync(dir, { recursive: true, force: true });
});

const chat = (message: string, session: string) =>
  app.inject({ method: 'POST', url: '/chat/invoke', payload: { input: { message }, config: { configurable: { session_id: session } } } });
const joke = (topic: string) => app.inject({ method: 'POST', url: '/joke/invoke', payload: { input: { topic } } });

describe('Redis killed under load', () => {
  it('keeps other chains answering, fails the cache open, answers history 503, recovers, and loses no saved message', async () => {
    // Turns go to a new session every 50 (100 messages), under the history's cap of 200: none is trimmed away.
    const sessionOf = (i: number) => `outage-${Math.floor(i / 50)}`;
    const saved: [string, string][] = [];
    let stop = false;
    const jokeStatuses: number[] = [];
    const chatStatuses: number[] = [];
    // Load: jokes (cache in Redis) and chat turns (history in Redis), until told to stop.
    const load = (async () => {
      for (let i = 0; !stop; i++) {
        const [j, c] = await Promise.all([joke(`topic ${i % 7}`), chat(`turn ${i}`, sessionOf(i))]);
        jokeStatuses.push(j.statusCode);
        chatStatuses.push(c.statusCode);
        if (c.statusCode === 200) saved.push([sessionOf(i), `turn ${i}`]);
        else expect(c.json()).toMatchObject({ code: 'RUNNEL_ERR_REDIS_UNAVAILABLE' });
      }
    })();
    // The load stops however this test ends: a failure below must not leave it calling a closed app.
    let historyMs = Number.NaN;
    let recoveredMs = Number.NaN;
    let downAt = 0;
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      await redis.kill();
      const started = performance.now();
      const history = await settleWithin(app.inject({ url: '/chat/history/outage' }), 2000);
      historyMs = performance.now() - started;
      expect(history.statusCode).toBe(503);
      expect(history.json()).toMatchObject({ code: 'RUNNEL_ERR_REDIS_UNAVAILABLE' });
      await new Promise((resolve) => setTimeout(resolve, 500));
      downAt = jokeStatuses.length;
      await redis.start();
      const backAt = performance.now();
      // The app's client reconnects with backoff (at most 2 s apart); the deadline only guards against a hang.
      for (const until = backAt + 30_000; performance.now() < until; ) {
        if ((await app.inject({ url: '/chat/history/outage' })).statusCode === 200) {
          recoveredMs = performance.now() - backAt;
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await new Promise((resolve) => setTimeout(resolve, 300));
    } finally {
      stop = true;
      await load;
    }
    console.log(`history 503 after ${historyMs.toFixed(0)} ms with Redis down; history answered again ${recoveredMs.toFixed(0)} ms after Redis restarted`);
    // Jokes never failed: the cache failed open while Redis was down.
    expect(jokeStatuses.every((s) => s === 200)).toBe(true);
    expect(jokeStatuses.length).toBeGreaterThan(downAt - 1);
    expect(chatStatuses.some((s) => s === 503)).toBe(true);
    expect(Number.isFinite(recoveredMs)).toBe(true);
    // Every turn that was answered 200 is in its history (append-only Redis, restarted on its files).
    for (const session of new Set(saved.map(([id]) => id))) {
      const after = await app.inject({ url: `/chat/history/${session}` });
      const humans = (after.json().messages as { type: string; content: string }[]).filter((m) => m.type === 'human').map((m) => m.content);
      for (const [id, turn] of saved) if (id === session) expect(humans).toContain(turn);
    }
    const metrics = (await app.inject('/metrics')).body;
    expect(Number(/runnel_model_cache_total\{result="error"\} (\d+)/.exec(metrics)?.[1] ?? 0)).toBeGreaterThan(0);
  }, 60_000);

  it('bounds every request by the command timeout while Redis is frozen (SIGSTOP)', async () => {
    expect((await app.inject({ url: '/chat/history/frozen' })).statusCode).toBe(200);
    redis.signal('SIGSTOP');
    try {
      const timed = async (request: () => Promise<{ statusCode: number }>) => {
        const started = performance.now();
        const res = await settleWithin(request(), 3000);
        return { status: res.statusCode, ms: performance.now() - started };
      };
      const [history, turn, other] = await Promise.all([timed(() => app.inject({ url: '/chat/history/frozen' })), timed(() => chat('hello', 'frozen')), timed(() => joke('frozen'))]);
      expect(history.status).toBe(503);
      expect(turn.status).toBe(503);
      expect(other.status).toBe(200);
      console.log(`with Redis frozen (command timeout 300 ms): history ${history.ms.toFixed(0)} ms, chat turn ${turn.ms.toFixed(0)} ms, joke (cache fails open) ${other.ms.toFixed(0)} ms`);
    } finally {
      redis.signal('SIGCONT');
    }
  }, 30_000);

  it('saves nothing of a turn whose history write timed out while Redis was frozen, once it wakes (a retry is not a second copy)', async () => {
    const history = new RedisChatMessageHistory({ client: services.redis as NonNullable<Services['redis']>, sessionId: 'frozen-write' });
    await history.addMessages([new HumanMessage('an earlier question'), new AIMessage('an earlier answer')]);
    redis.signal('SIGSTOP');
    try {
      // The same words as the turn before: only this write's records may go.
      await expect(settleWithin(history.addMessages([new HumanMessage('an earlier question'), new AIMessage('an earlier answer')]), 5_000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_REDIS_UNAVAILABLE' });
    } finally {
      redis.signal('SIGCONT');
    }
    // Redis runs what its socket held when it wakes, the timed-out write included; this read comes after it.
    expect((await history.getMessages()).map((message) => message.text)).toEqual(['an earlier question', 'an earlier answer']);
  }, 30_000);
});
