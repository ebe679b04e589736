import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp, ChatPromptTemplate, defineChain, FakeListChatModel, InMemoryCache, StringOutputParser } from '../../src/index.js';

const model = new FakeListChatModel({ responses: ['first', 'second', 'third'], cache: new InMemoryCache() });
let app: FastifyInstance;
beforeAll(async () => {
  app = await buildApp({
    chains: [defineChain({ path: '/cached', runnable: ChatPromptTemplate.fromMessages([['human', '{q}']]).pipe(model).pipe(new StringOutputParser()) })] as never,
  });
});
afterAll(async () => app.close());

const ask = (headers: Record<string, string> = {}, config?: unknown) =>
  app.inject({ method: 'POST', url: '/cached/invoke', headers: { 'content-type': 'application/json', ...headers }, payload: { input: { q: 'same' }, ...(config ? { config } : {}) } });

describe('the response cache over HTTP', () => {
  it('answers a repeated request from the cache; cache-control: no-cache or configurable.cache = false bypass it', async () => {
    expect((await ask()).json().output).toBe('first');
    expect((await ask()).json().output).toBe('first');
    expect(model.calls).toHaveLength(1);
    expect((await ask({ 'cache-control': 'no-cache' })).json().output).toBe('second');
    expect((await ask({}, { configurable: { cache: false } })).json().output).toBe('third');
    expect(model.calls).toHaveLength(3);
    expect((await app.inject('/cached/config_schema')).json().properties.configurable.properties.cache).toMatchObject({ type: 'boolean', default: true });
  });
});
