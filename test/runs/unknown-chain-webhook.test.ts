/**
 * A run taken by a worker that does not serve its chain (a worker deployed before the chain was added) ends
 * `error` `RUNNEL_ERR_NOT_FOUND` — and its webhook was never called: every other end told it, that one did not.
 * Its webhook now hears the run's end, signed, like any other's.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, expect, it } from 'vitest';
import { z } from 'zod';
import { buildApp, connectServices, defineChain, lambda, loadServerConfig, type ChainSpec, type Services } from '../../src/index.js';
import { startRunWorkers } from '../../src/server/worker-process.js';
import { settleWithin } from '../helpers.js';

const REDIS_URL = process.env.RUNNEL_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const SECRET = 'unknown-chain-secret-0123456789';
const added = defineChain({ path: '/added', runnable: lambda((input: { n: number }) => input.n, { input: z.object({ n: z.number() }), output: z.number() }) });
const older = defineChain({ path: '/older', runnable: lambda((input: { n: number }) => input.n, { input: z.object({ n: z.number() }), output: z.number() }) });

let receiver: Server | undefined;
const services: Services[] = [];
afterAll(async () => {
  receiver?.close();
  for (const each of services) await each.close();
});

it('calls the webhook of a run whose worker does not serve its chain', async () => {
  const received: { headers: IncomingHttpHeaders; body: string }[] = [];
  let heard!: () => void;
  const delivered = new Promise<void>((resolve) => (heard = resolve));
  receiver = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      received.push({ headers: request.headers, body });
      response.end();
      heard();
    });
  });
  await new Promise<void>((resolve) => receiver?.listen(0, '127.0.0.1', resolve));
  const hooks = `127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  const env = { REDIS_URL, RUNNEL_RUN_NAMESPACE: `test-unknown-chain-${randomUUID()}`, RUNNEL_WEBHOOK_HOSTS: hooks, RUNNEL_WEBHOOK_SECRET: SECRET, RUNNEL_WEBHOOK_ALLOW_HTTP: 'true' };
  const workerServices = await connectServices({ redisUrl: REDIS_URL, namespace: env.RUNNEL_RUN_NAMESPACE });
  const appServices = await connectServices({ redisUrl: REDIS_URL, namespace: env.RUNNEL_RUN_NAMESPACE });
  services.push(workerServices, appServices);
  // The worker serves the chains of before; the HTTP server, the new one too, and runs nothing itself.
  const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
  const worker = startRunWorkers({ config: loadServerConfig({ ...env, RUNNEL_WORKER_CONCURRENCY: '1' }), chains: [older] as ChainSpec<never, unknown>[], services: workerServices, log: quiet });
  const app = await buildApp({ chains: [added, older] as ChainSpec<never, unknown>[], config: { ...loadServerConfig(env), workerConcurrency: 0 }, services: appServices });
  try {
    await app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const submitted = await fetch(`${url}/added/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { n: 1 }, webhook: `http://${hooks}/hook` }) });
    expect(submitted.status).toBe(202);
    const { run_id: runId } = (await submitted.json()) as { run_id: string };
    const waited = (await (await fetch(`${url}/added/runs/${runId}/wait?timeout_s=30`)).json()) as { status: string; error?: { code: string } };
    expect([waited.status, waited.error?.code]).toEqual(['error', 'RUNNEL_ERR_NOT_FOUND']);
    await settleWithin(delivered, 30_000);
    const [hook] = received;
    const signature = `sha256=${createHmac('sha256', SECRET).update(`${String(hook?.headers['x-runnel-timestamp'])}.${hook?.body ?? ''}`).digest('hex')}`;
    expect(hook?.headers['x-runnel-signature']).toBe(signature);
    expect(JSON.parse(hook?.body ?? '{}')).toMatchObject({ run_id: runId, status: 'error', error: { code: 'RUNNEL_ERR_NOT_FOUND' } });
  } finally {
    await app.close();
    await worker.stop();
  }
  // Once: the worker's end is the run's only end.
  expect(received).toHaveLength(1);
}, 60_000);
