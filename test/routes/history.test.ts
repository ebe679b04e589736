import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import {
  buildApp,
  ChatPromptTemplate,
  defineChain,
  FakeListChatModel,
  MessagesPlaceholder,
  RedisChatMessageHistory,
  StringOutputParser,
  withMessageHistory,
} from '../../src/index.js';

const KEY_A = 'k_alice_0123456789abcdef';
const KEY_B = 'k_bob_0123456789abcdef00';
const namespace = `runnel-test-routes:${process.pid}:${Date.now()}`;
const redis = new Redis('redis://127.0.0.1:6379');
const history = (sessionId: string, caller: { identity: string }) => new RedisChatMessageHistory({ client: redis, namespace, sessionId: `${caller.identity}:${sessionId}` });
let app: FastifyInstance;

beforeAll(async () => {
  const model = new FakeListChatModel({ responses: ['Hello!', 'You said hi.'] });
  const prompt = ChatPromptTemplate.fromMessages([new MessagesPlaceholder('history'), ['human', '{question}']]);
  const chat = withMessageHistory(prompt.pipe(model).pipe(new StringOutputParser()), { getHistory: history, inputMessagesKey: 'question', historyMessagesKey: 'history' });
  app = await buildApp({
    chains: [defineChain({ path: '/chat', runnable: chat, history, playground: 'chat' })] as never,
    config: { apiKeys: [{ name: 'alice', key: KEY_A }, { name: 'bob', key: KEY_B }] },
  });
});
afterAll(async () => {
  await app.close();
  const keys = await redis.keys(`${namespace}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

const say = (key: string, question: string, session = 's1') =>
  app.inject({ method: 'POST', url: '/chat/invoke', headers: { 'x-api-key': key }, payload: { input: { question }, config: { configurable: { session_id: session } } } });

describe('history over HTTP', () => {
  it('continues a conversation, serves it back, forgets it, and keeps callers apart', async () => {
    expect((await say(KEY_A, 'hi')).json().output).toBe('Hello!');
    expect((await say(KEY_A, 'what did I say?')).json().output).toBe('You said hi.');
    const mine = await app.inject({ url: '/chat/history/s1', headers: { 'x-api-key': KEY_A } });
    expect(mine.json().messages.map((m: { type: string; content: string }) => `${m.type}:${m.content}`)).toEqual([
      'human:hi',
      'ai:Hello!',
      'human:what did I say?',
      'ai:You said hi.',
    ]);
    const theirs = await app.inject({ url: '/chat/history/s1', headers: { 'x-api-key': KEY_B } });
    expect(theirs.json().messages).toEqual([]);
    expect((await app.inject({ method: 'DELETE', url: '/chat/history/s1', headers: { 'x-api-key': KEY_A } })).statusCode).toBe(204);
    expect((await app.inject({ url: '/chat/history/s1', headers: { 'x-api-key': KEY_A } })).json().messages).toEqual([]);
  });

  it('requires session_id, refuses bad ones, and needs a key', async () => {
    const missing = await app.inject({ method: 'POST', url: '/chat/invoke', headers: { 'x-api-key': KEY_A }, payload: { input: { question: 'x' } } });
    expect(missing.statusCode).toBe(422);
    expect(missing.json().detail[0].loc).toEqual(['config', 'configurable', 'session_id']);
    const bad = await app.inject({ url: '/chat/history/bad%20id', headers: { 'x-api-key': KEY_A } });
    expect(bad.statusCode).toBe(422);
    // A probe: the path's session id was located in a config the request never sent (["configurable", "session_id"]).
    expect(bad.json().detail).toEqual([{ type: 'session_id', loc: ['path', 'session_id'], msg: 'Invalid session id' }]);
    expect((await app.inject({ url: '/chat/history/s1' })).statusCode).toBe(401);
    expect((await app.inject({ url: '/chat/config_schema', headers: { 'x-api-key': KEY_A } })).json().properties.configurable.properties.session_id).toMatchObject({ type: 'string', pattern: '^[A-Za-z0-9_.:-]{1,128}$' });
  });
});
