/**
 * The limits hold at the server, on the shipped chains: body size, batch
 * size, `k`, input length, history length.
 */
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createChains } from '../../chains/index.js';
import { buildApp, connectServices, HashingEmbeddings, HumanMessage, MemoryVectorStore, RedisChatMessageHistory } from '../../src/index.js';
import { scanKeys } from '../helpers.js';

const run = `limits-${process.pid}-${Date.now()}`;
const redis = new Redis('redis://127.0.0.1:6379');
afterAll(async () => {
  const keys = await scanKeys(redis, `runnel-test-limits:${run}*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

describe('limits', () => {
  it('refuses a body over RUNNEL_BODY_LIMIT (413) and a batch over RUNNEL_MAX_BATCH (422), before any run', async () => {
    const services = await connectServices({});
    const app = await buildApp({ chains: createChains({ services, env: {}, offlineDelayMs: 0 }).chains, services, config: { bodyLimit: 10_000, maxBatch: 3 } });
    const big = await app.inject({ method: 'POST', url: '/joke/invoke', payload: { input: { topic: 'x'.repeat(20_000) } } });
    expect(big.statusCode).toBe(413);
    expect(big.json()).toMatchObject({ code: 'RUNNEL_ERR_BODY_TOO_LARGE' });
    const many = await app.inject({ method: 'POST', url: '/joke/batch', payload: { inputs: Array.from({ length: 4 }, () => ({ topic: 'x' })) } });
    expect(many.statusCode).toBe(422);
    expect(many.json()).toMatchObject({ code: 'RUNNEL_ERR_BATCH_TOO_LARGE' });
    expect((await app.inject({ method: 'POST', url: '/joke/batch', payload: { inputs: Array.from({ length: 3 }, () => ({ topic: 'x' })) } })).statusCode).toBe(200);
    // Input length: a /rag question is at most 4,000 characters.
    const long = await app.inject({ method: 'POST', url: '/rag/invoke', payload: { input: { question: 'q'.repeat(4001) } } });
    expect(long.statusCode).toBe(422);
    expect(long.json()).toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID', detail: [{ loc: ['question'] }] });
    // A calculator expression is at most 500 characters: the tool says so to the model, the agent still answers.
    const sum = await app.inject({ method: 'POST', url: '/agent/invoke', payload: { input: { input: `${'1+'.repeat(300)}1` } } });
    expect(sum.statusCode).toBe(200);
    expect(sum.json().output).toMatch(/500/);
    await app.close();
  });

  it('caps k at 100', async () => {
    const store = new MemoryVectorStore(new HashingEmbeddings({ dimensions: 32 }));
    await expect(store.similaritySearch('x', 101)).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
    await expect(store.similaritySearch('x', 0)).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
  });

  it('trims a history to its maximum length', async () => {
    const history = new RedisChatMessageHistory({ client: redis, namespace: `runnel-test-limits:${run}`, sessionId: 's', maxMessages: 5 });
    for (let i = 0; i < 8; i++) await history.addMessages([new HumanMessage(`m${i}`)]);
    expect((await history.getMessages()).map((m) => m.text)).toEqual(['m3', 'm4', 'm5', 'm6', 'm7']);
  });
});
