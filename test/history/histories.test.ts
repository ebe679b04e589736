import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { AIMessage, HumanMessage, lambda, MemoryHistoryStore, RedisChatMessageHistory, withMessageHistory, type BaseMessage } from '../../src/index.js';
import { BOUND, historyContract } from './contract.js';
import { freePort, scanKeys } from '../helpers.js';
import { RedisServer } from '../support/redis-server.js';

const namespace = `runnel-test:${process.pid}:${Date.now()}`;
const redis = new Redis('redis://127.0.0.1:6379', { maxRetriesPerRequest: 1, enableOfflineQueue: true, lazyConnect: false });
afterAll(async () => {
  const keys = await scanKeys(redis, `${namespace}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

const memory = new MemoryHistoryStore({ maxMessages: 5 });
const boundedMemory = new MemoryHistoryStore({ maxSessionBytes: BOUND });
historyContract('MemoryChatMessageHistory', (id) => memory.history(id), { maxMessages: 5, bounded: (id) => boundedMemory.history(id) });
historyContract('RedisChatMessageHistory', (sessionId) => new RedisChatMessageHistory({ client: redis, sessionId, namespace, maxMessages: 5 }), {
  maxMessages: 5,
  bounded: (sessionId) => new RedisChatMessageHistory({ client: redis, sessionId, namespace, maxBytes: BOUND }),
});

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
  it('reads the newest messages that fit maxBytes of a list written larger, and the next turn trims it', async () => {
    const key = `${namespace}:huge`;
    const history = new RedisChatMessageHistory({ client: redis, sessionId: 'huge', namespace, maxBytes: 1024 * 1024 });
    await history.addMessages([new HumanMessage('small')]);
    expect(await history.getMessages()).toHaveLength(1);
    await redis.rpush(key, JSON.stringify(new HumanMessage('x'.repeat(2 * 1024 * 1024)).toJSON()));
    // The newest does not fit: nothing older than it is read either (the messages read are the newest, in a row).
    expect(await history.getMessages()).toEqual([]);
    // The default reads it: 64 MiB.
    expect(await new RedisChatMessageHistory({ client: redis, sessionId: 'huge', namespace }).getMessages()).toHaveLength(2);
    await history.addMessages([new HumanMessage('next')]);
    expect(await redis.llen(key)).toBe(1);
  });

  // A review: a conversation past the bound (written before the write-side bound, or with a larger one) was
  // refused at every read, and a turn reads before it writes — so no write ever trimmed it, until its TTL.
  it('goes on with a conversation written past maxBytes: a turn answers and trims it', async () => {
    const key = `${namespace}:stuck`;
    const large = new RedisChatMessageHistory({ client: redis, sessionId: 'stuck', namespace });
    for (let i = 0; i < 20; i += 1) await large.addMessages([new HumanMessage(`m${i} ${'x'.repeat(8_000)}`)]);
    const chat = withMessageHistory(
      lambda((messages: BaseMessage[]) => new AIMessage(`read ${messages.length}`)),
      { getHistory: () => new RedisChatMessageHistory({ client: redis, sessionId: 'stuck', namespace, maxBytes: 64 * 1024 }) },
    );
    const answer = (await chat.invoke([new HumanMessage('hi')], { configurable: { session_id: 'stuck' } })) as AIMessage;
    // The newest 8 of about 8 KB fit in 64 KiB, then the question.
    expect(answer.text).toBe('read 9');
    // The turn's write trimmed the list under the bound: its 8 newest that still fit and the new turn.
    expect(await redis.llen(key)).toBeLessThanOrEqual(10);
  });

  it('refuses bounds it cannot keep', () => {
    for (const options of [{ maxMessages: 0 }, { maxBytes: 0 }, { ttlSeconds: 1.5 }]) {
      expect(() => new RedisChatMessageHistory({ client: redis, sessionId: 's', namespace, ...options }), JSON.stringify(options)).toThrow(/must be a whole number of at least 1/);
    }
  });

  it('keeps the stored list itself within maxBytes, counted as Redis holds it', async () => {
    const history = new RedisChatMessageHistory({ client: redis, sessionId: 'bytes', namespace, maxBytes: BOUND });
    for (let turn = 0; turn < 12; turn += 1) await history.addMessages([new HumanMessage(`q${turn} ${'x'.repeat(2_000)}`), new AIMessage(`a${turn} ${'y'.repeat(2_000)}`)]);
    const stored = await redis.lrange(`${namespace}:bytes`, 0, -1);
    expect(stored.reduce((sum, record) => sum + Buffer.byteLength(record), 0)).toBeLessThanOrEqual(BOUND);
    expect(stored.length).toBeGreaterThanOrEqual(8);
  });

  // The read bound was Redis's MEMORY USAGE: a list whose nodes Redis compresses counts a fraction of what
  // LRANGE sends (a 4 MiB list counted 0.2 MiB), and some hosted Redis refuse the command, which failed
  // every read as RUNNEL_ERR_REDIS_UNAVAILABLE. Both on a server of the test's own.
  it('bounds a read by the bytes it sends, on a Redis that compresses lists and has no MEMORY command', async () => {
    const server = new RedisServer(await freePort(), ['--save', '', '--appendonly', 'no', '--list-compress-depth', '1', '--rename-command', 'MEMORY', '']);
    await server.start();
    const client = await server.client();
    try {
      const history = new RedisChatMessageHistory({ client, sessionId: 's', namespace, maxBytes: 1024 * 1024 });
      await history.addMessages([new HumanMessage('small')]);
      expect(await history.getMessages()).toHaveLength(1);
      const key = `${namespace}:s`;
      for (let i = 0; i < 64; i += 1) await client.rpush(key, JSON.stringify(new HumanMessage('a'.repeat(64 * 1024)).toJSON()));
      // About 65.6 KB each: the newest 15 fit in 1 MiB, whatever Redis counts of its compressed list.
      const read = await history.getMessages();
      expect(read.map((message) => message.text.length)).toEqual(Array(15).fill(64 * 1024));
      // A write trims the list itself under the bound.
      await history.addMessages([new HumanMessage('again')]);
      const stored = await client.lrange(key, 0, -1);
      expect(stored.reduce((sum, record) => sum + Buffer.byteLength(record), 0)).toBeLessThanOrEqual(1024 * 1024);
      expect((await history.getMessages()).at(-1)?.text).toBe('again');
    } finally {
      client.disconnect();
      await server.kill();
    }
  });

  it('rejects a corrupt or poisoned record with a code, never reviving it', async () => {
    const key = `${namespace}:poison`;
    const history = new RedisChatMessageHistory({ client: redis, sessionId: 'poison', namespace });
    await redis.rpush(key, JSON.stringify({ lc: 1, type: 'constructor', id: ['langchain_core', 'messages', 'HumanMessage'], kwargs: { content: 'x' } }));
    await expect(history.getMessages()).rejects.toMatchObject({ code: 'RUNNEL_ERR_STORED_RECORD_INVALID' });
    await redis.del(key);
    await redis.rpush(key, '{not json');
    await expect(history.getMessages()).rejects.toMatchObject({ code: 'RUNNEL_ERR_STORED_RECORD_INVALID' });
    // Valid JSON, a valid message, nested deeper than a reader can walk: the cache key's canonical JSON
    // overflowed the stack on it (RUNNEL_ERR_INTERNAL at every turn of the session).
    await redis.del(key);
    await redis.rpush(key, `{"type":"human","content":"x","additional_kwargs":{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}}`);
    await expect(history.getMessages()).rejects.toMatchObject({ code: 'RUNNEL_ERR_STORED_RECORD_INVALID' });
    // Nor is one written that deep (a library's message): the session would be unreadable after it.
    await redis.del(key);
    let deep: unknown = 'bottom';
    for (let i = 0; i < 2000; i++) deep = [deep];
    await expect(history.addMessages([new HumanMessage({ content: 'deep', additional_kwargs: { deep } })])).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
    expect(await redis.llen(key)).toBe(0);
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
