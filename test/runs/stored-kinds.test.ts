/**
 * A key of the run store that holds another kind of value than Runnel writes there (a hand edit, another
 * program sharing the namespace): the runs it touches are refused with RUNNEL_ERR_STORED_RECORD_INVALID —
 * not reported as Redis being down — nothing of them is written, and everything else keeps serving.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildApp, connectServices, type ChainSpec, type Services } from '../../src/index.js';
import { runChains } from '../support/run-server.js';

let app: FastifyInstance;
let services: Services;
const namespace = `runnel-test-kinds-${randomUUID()}`;

beforeAll(async () => {
  services = await connectServices({ redisUrl: 'redis://127.0.0.1:6379', namespace });
  app = await buildApp({ chains: runChains as ChainSpec<never, unknown>[], services, config: { runNamespace: namespace, workerConcurrency: 1 } });
});
afterAll(async () => {
  const redis = services.redis;
  if (redis !== undefined) {
    const keys = await redis.keys(`${namespace}:*`);
    if (keys.length > 0) await redis.del(...keys);
  }
  await app.close();
});

it('refuses a durable stream whose heartbeats key holds a string, writing nothing, while plain streams and the rest serve', async () => {
  const redis = services.redis;
  if (redis === undefined) throw new Error('no redis');
  const heartbeats = `${namespace}:runs:local`;
  await redis.set(heartbeats, 'not a sorted set');
  const durable = await app.inject({ method: 'POST', url: '/story/stream', payload: { input: { topic: 'kinds' }, on_disconnect: 'continue' } });
  // It read 503 RUNNEL_ERR_REDIS_UNAVAILABLE: an operator would look for an outage that is not there.
  expect([durable.statusCode, durable.json().code]).toEqual([500, 'RUNNEL_ERR_STORED_RECORD_INVALID']);
  // Nothing of the run was stored: no record, no log, no place in the caller's list.
  expect((await redis.keys(`${namespace}:runs:*`)).sort()).toEqual([heartbeats]);
  const plain = await app.inject({ method: 'POST', url: '/story/stream', payload: { input: { topic: 'kinds' } } });
  expect(plain.statusCode).toBe(200);
  expect(plain.body).toContain('event: end');
  expect((await app.inject('/readyz')).statusCode).toBe(200);
  await redis.del(heartbeats);
  const again = await app.inject({ method: 'POST', url: '/story/stream', payload: { input: { topic: 'kinds' }, on_disconnect: 'continue' } });
  expect(again.statusCode).toBe(200);
  expect(again.body).toContain('event: end');
});
