/**
 * A submission answered 503 while Redis was frozen: its record's write timed
 * out on this side but was carried out once Redis woke. (A probe: the run
 * then waited, its caller told it was refused, and held the caller's one
 * open run under RUNNEL_MAX_RUNS_PER_KEY — every later submission 429 for a
 * minute and more.) It is now ended as soon as Redis answers.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, expect, it } from 'vitest';
import { buildApp, connectServices, type ChainSpec } from '../../src/index.js';
import { RedisServer } from '../support/redis-server.js';
import { runChains } from '../support/run-server.js';

let redis: RedisServer | undefined;
let app: FastifyInstance | undefined;
afterAll(async () => {
  redis?.signal('SIGCONT');
  await app?.close();
  await redis?.kill();
});

it('ends a run whose submission was refused for a write that landed late, freeing the caller\'s place', async () => {
  redis = await RedisServer.scratch();
  const namespace = `runnel-test-refused-${randomUUID()}`;
  const services = await connectServices({ redisUrl: redis.url, namespace, redisCommandTimeoutMs: 2_000 });
  app = await buildApp({ chains: runChains as ChainSpec<never, unknown>[], services, config: { runNamespace: namespace, workerConcurrency: 0, runLockMs: 60_000, maxRunsPerKey: 2 } });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const submit = () => fetch(`${url}/noop/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { n: 1 } }) });
  // One run waits (no worker here), holding one of the caller's two places; the script is loaded, so the
  // frozen submission's first command is its record's write.
  const first = await submit();
  expect(first.status).toBe(202);
  await first.text();
  redis.signal('SIGSTOP');
  let refused: Response;
  try {
    refused = await submit();
  } finally {
    redis.signal('SIGCONT');
  }
  expect(refused.status).toBe(503);
  await refused.text();
  // The write landed: the run is listed. It ends as soon as Redis answers, so the caller's place is free again.
  let listed: { status: string; error?: { code: string } }[] = [];
  for (let i = 0; i < 300 && listed[0]?.status !== 'error'; i++) {
    const res = await fetch(`${url}/noop/runs`);
    listed = res.status === 200 ? ((await res.json()) as { runs: typeof listed }).runs : (await res.text(), []);
    if (listed[0]?.status !== 'error') await new Promise((r) => setTimeout(r, 100));
  }
  expect(listed).toEqual([expect.objectContaining({ status: 'error', error: expect.objectContaining({ code: 'RUNNEL_ERR_REDIS_UNAVAILABLE' }) }), expect.objectContaining({ status: 'pending' })]);
  const next = await submit();
  expect(next.status).toBe(202);
  await next.text();
}, 120_000);
