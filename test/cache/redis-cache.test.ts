import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { AIMessageChunk, createRedisClient, FakeListChatModel, RedisCache } from '../../src/index.js';
import { scanKeys, toArray } from '../helpers.js';

const namespace = `runnel-test-cache:${process.pid}:${Date.now()}`;
const redis = new Redis('redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
afterAll(async () => {
  const keys = await scanKeys(redis, `${namespace}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

function cached(responses: string[], options: { sleepMs?: number; onLookup?: (r: 'hit' | 'miss' | 'error') => void } = {}) {
  const cache = new RedisCache({ client: redis, namespace, ttlSeconds: 600, onLookup: options.onLookup });
  return new FakeListChatModel({ responses, cache, sleepMs: options.sleepMs ?? 0 });
}

describe('RedisCache', () => {
  it('serves a repeated call from Redis, and replays it chunk by chunk when streamed', async () => {
    const results: string[] = [];
    const model = cached(['first answer', 'second answer'], { onLookup: (r) => void results.push(r) });
    const question = `q-${Math.random()}`;
    expect((await model.invoke(question)).text).toBe('first answer');
    expect((await model.invoke(question)).text).toBe('first answer');
    const replay = await toArray(model.stream(question));
    expect(replay.map((c) => c.text).join('')).toBe('first answer');
    expect(model.calls).toHaveLength(1);
    expect(results).toEqual(['miss', 'hit', 'hit']);
    const keys = await scanKeys(redis, `${namespace}:*`);
    expect(keys.length).toBeGreaterThan(0);
    expect(await redis.ttl(keys[0] as string)).toBeGreaterThan(500);
  });

  it('makes one model call for identical concurrent misses (single flight)', async () => {
    const model = cached(['only once'], { sleepMs: 10 });
    const question = `concurrent-${Math.random()}`;
    const answers = await Promise.all([model.invoke(question), model.invoke(question), toArray(model.stream(question))]);
    expect(answers[0].text).toBe('only once');
    expect(answers[1].text).toBe('only once');
    expect(answers[2].map((c) => c.text).join('')).toBe('only once');
    expect(model.calls).toHaveLength(1);
  });

  it('rejects a poisoned entry with a code and calls the model instead', async () => {
    const results: string[] = [];
    const cache = new RedisCache({ client: redis, namespace, onLookup: (r) => void results.push(r) });
    const model = new FakeListChatModel({ responses: ['fresh'], cache });
    const question = `poisoned-${Math.random()}`;
    await model.invoke(question);
    let poisoned = 0;
    for (const key of await scanKeys(redis, `${namespace}:*`)) {
      if ((await redis.get(key))?.includes('"fresh"')) {
        await redis.set(key, JSON.stringify([{ lc: 1, type: 'constructor', kwargs: { content: 'evil' } }]));
        await expect(cache.lookup(key.slice(namespace.length + 1))).rejects.toMatchObject({ code: 'RUNNEL_ERR_STORED_RECORD_INVALID' });
        // A chunk nested deeper than a reader can walk, served, overflowed the stack of whatever walked it next.
        await redis.set(key, `[{"type":"AIMessageChunk","content":"deep","additional_kwargs":{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}}]`);
        await expect(cache.lookup(key.slice(namespace.length + 1))).rejects.toMatchObject({ code: 'RUNNEL_ERR_STORED_RECORD_INVALID' });
        await redis.set(key, JSON.stringify([{ lc: 1, type: 'constructor', kwargs: { content: 'evil' } }]));
        poisoned++;
      }
    }
    expect(poisoned).toBe(1);
    expect((await model.invoke(question)).text).toBe('fresh');
    expect(model.calls).toHaveLength(2);
    expect(results).toContain('error');
  });

  it('does not write an answer nested deeper than a lookup reads, and answers it all the same', async () => {
    const cache = new RedisCache({ client: redis, namespace });
    let deep: unknown = 'bottom';
    for (let i = 0; i < 2000; i++) deep = [deep];
    const key = `deep-${Math.random()}`;
    await cache.update(key, [new AIMessageChunk({ content: 'deep', additional_kwargs: { deep } })]);
    expect(await redis.exists(`${namespace}:${key}`)).toBe(0);
    await cache.update(key, [new AIMessageChunk({ content: 'shallow' })]);
    expect(await redis.exists(`${namespace}:${key}`)).toBe(1);
  });

  it('fails open when Redis is down: the call succeeds and counts as an error lookup', async () => {
    const down = createRedisClient('redis://127.0.0.1:1', { commandTimeoutMs: 200 });
    const results: string[] = [];
    const model = new FakeListChatModel({ responses: ['still answers'], cache: new RedisCache({ client: down, namespace, onLookup: (r) => void results.push(r) }) });
    expect((await model.invoke('x')).text).toBe('still answers');
    expect(results).toEqual(['error']);
    down.disconnect();
  });
});
