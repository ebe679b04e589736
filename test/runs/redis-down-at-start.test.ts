/**
 * Redis down when the server starts, up later: background runs work once it
 * is up, as everything else that needs Redis does. (A probe: BullMQ's
 * connections, copies of the server's lazy client, failed their first
 * connect and never tried again — every run was 503 until a restart, while
 * /readyz said ready.)
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, expect, it } from 'vitest';
import { buildApp, connectServices, type ChainSpec } from '../../src/index.js';
import { freePort } from '../helpers.js';
import { RedisServer } from '../support/redis-server.js';
import { runChains } from '../support/run-server.js';

let redis: RedisServer | undefined;
let app: FastifyInstance | undefined;
afterAll(async () => {
  await app?.close();
  await redis?.kill();
});

it('takes background runs once Redis, down at start, is up', async () => {
  redis = new RedisServer(await freePort(), ['--save', '', '--appendonly', 'no']);
  const namespace = `runnel-test-late-${randomUUID()}`;
  const services = await connectServices({ redisUrl: redis.url, namespace });
  app = await buildApp({ chains: runChains as ChainSpec<never, unknown>[], services, config: { runNamespace: namespace, workerConcurrency: 2 } });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const submit = () => fetch(`${url}/noop/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { n: 7 } }) });
  const down = await submit();
  expect(down.status).toBe(503);
  await down.text();
  await redis.start();
  // Readiness first (the server's own client reconnects), then a run end to end.
  let ready = false;
  for (let i = 0; i < 600 && !ready; i++) {
    ready = (await fetch(`${url}/readyz`)).status === 200;
    if (!ready) await new Promise((r) => setTimeout(r, 100));
  }
  expect(ready).toBe(true);
  let accepted: Response | undefined;
  for (let i = 0; i < 600 && accepted === undefined; i++) {
    const res = await submit();
    if (res.status === 202) accepted = res;
    else {
      await res.text();
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  expect(accepted?.status).toBe(202);
  const { run_id: runId } = (await (accepted as Response).json()) as { run_id: string };
  const ended = await fetch(`${url}/noop/runs/${runId}/wait?timeout_s=60`);
  expect([ended.status, ((await ended.json()) as { status: string; output: unknown })]).toEqual([200, expect.objectContaining({ status: 'success', output: 7 })]);
}, 120_000);
