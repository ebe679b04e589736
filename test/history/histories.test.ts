import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { HumanMessage, MemoryHistoryStore, RedisChatMessageHistory } from '../../src/index.js';
import { historyContract } from './contract.js';
import { scanKeys } from '../helpers.js';

const namespace = `runnel-test:${process.pid}:${Date.now()}`;
const redis = new Redis('redis://127.0.0.1:6379', { maxRetriesPerRequest: 1, enableOfflineQueue: true, lazyConnect: false });
afterAll(async () => {
  const keys = await scanKeys(redis, `${namespace}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

const memory = new MemoryHistoryStore({ maxMessages: 5 });
historyContract('MemoryChatMessageHistory', (id) => memory.history(id), { maxMessages: 5 });
historyContract('RedisChatMessageHistory', (sessionId) => new RedisChatMessageHistory({ client: redis, sessionId, namespace, maxMessages: 5 }), { maxMessages: 5 });

describe('RedisChatMessageHistory', () => {
  it('stores full message JSON in one list per session, with a TTL refreshed on write', async () => {
    const history = new RedisChatMessageHistory({ client: redis, sessionId: 'ttl', namespace, ttlSeconds: 120 });
    await history.addMessages([new HumanMessage('hi')]);
    const key = `${namespace}:ttl`;
    expect(await redis.type(key)).toBe('list');
    // The message's own JSON, and the write that stored it (so a write that timed out can be taken back).
    expect(JSON.parse((await redis.lindex(key, 0)) as string)).toEqual({ ...new HumanMessage('hi').toJSON(), runnel_write: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    expect((await history.getMessages())[0]?.toJSON()).toEqual(new HumanMessage('hi').toJSON());
    await redis.expire(key, 10);
    await history.addMessages([new HumanMessage('again')]);
    expect(await redis.ttl(key)).toBeGreaterThan(100);
  });

  // A stored-records probe: a message of 50 MB written in by hand was read back whole at every turn of its
  // session — 150 MB of heap a request, with nothing to bound it.
  it('refuses to read a conversation Redis counts past maxBytes, sending none of it', async () => {
    const key = `${namespace}:huge`;
    const history = new RedisChatMessageHistory({ client: redis, sessionId: 'huge', namespace, maxBytes: 1024 * 1024 });
    await history.addMessages([new HumanMessage('small')]);
    expect(await history.getMessages()).toHaveLength(1);
    await redis.rpush(key, JSON.stringify(new HumanMessage('x'.repeat(2 * 1024 * 1024)).toJSON()));
    const read = await history.getMessages().catch((error: unknown) => error);
    expect(read).toMatchObject({ code: 'RUNNEL_ERR_STORED_RECORD_INVALID', message: expect.stringContaining('more than the 1 MiB') });
    // The default reads it: 64 MiB.
    expect(await new RedisChatMessageHistory({ client: redis, sessionId: 'huge', namespace }).getMessages()).toHaveLength(2);
  });

  it('rejects a corrupt or poisoned record with a code, never reviving it', async () => {
    const key = `${namespace}:poison`;
    const history = new RedisChatMessageHistory({ client: redis, sessionId: 'poison', namespace });
    await redis.rpush(key, JSON.stringify({ lc: 1, type: 'constructor', id: ['langchain_core', 'messages', 'HumanMessage'], kwargs: { content: 'x' } }));
    await expect(history.getMessages()).rejects.toMatchObject({ code: 'RUNNEL_ERR_STORED_RECORD_INVALID' });
    await redis.del(key);
    await redis.rpush(key, '{not json');
    await expect(history.getMessages()).rejects.toMatchObject({ code: 'RUNNEL_ERR_STORED_RECORD_INVALID' });
  });

  it('answers RUNNEL_ERR_REDIS_UNAVAILABLE promptly when Redis is unreachable', async () => {
    const down = new Redis('redis://127.0.0.1:1', { maxRetriesPerRequest: 0, enableOfflineQueue: false, lazyConnect: true, retryStrategy: () => null });
    const history = new RedisChatMessageHistory({ client: down, sessionId: 's', namespace });
    await expect(history.getMessages()).rejects.toMatchObject({ code: 'RUNNEL_ERR_REDIS_UNAVAILABLE', statusCode: 503 });
    await expect(history.addMessages([new HumanMessage('x')])).rejects.toMatchObject({ code: 'RUNNEL_ERR_REDIS_UNAVAILABLE' });
    down.disconnect();
  });
});

describe('MemoryHistoryStore', () => {
  it('holds at most maxSessions conversations, forgetting the least recently written first', async () => {
    const store = new MemoryHistoryStore({ maxSessions: 3 });
    for (const id of ['a', 'b', 'c']) await store.history(id).addMessages([new HumanMessage(id)]);
    // Writing to `a` again makes `b` the oldest: `d` pushes it out.
    await store.history('a').addMessages([new HumanMessage('a again')]);
    await store.history('d').addMessages([new HumanMessage('d')]);
    expect(await store.history('b').getMessages()).toEqual([]);
    expect((await store.history('a').getMessages()).map((m) => m.text)).toEqual(['a', 'a again']);
    expect((await store.history('c').getMessages()).map((m) => m.text)).toEqual(['c']);
    for (let i = 0; i < 1000; i++) await store.history(`new-${i}`).addMessages([new HumanMessage('x')]);
    expect(store.size).toBe(3);
  });
});
