/**
 * A run whose end was written while Redis was frozen: the write timed out on
 * this side but Redis ran it as it woke, so the run ended by this process's
 * own write — and every later attempt found it ended "by another process,
 * which told its webhook". (A probe, two replicas, Redis frozen 4 s under
 * background runs: 13 of the 16 runs that ended `error` never had their
 * webhook called; a run that succeeded so calls none either.) The webhook
 * is now called once.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, expect, it } from 'vitest';
import { buildApp, connectServices, createRedisClient, type ChainSpec } from '../../src/index.js';
import { BullRunQueue, RedisRunStore, type RunRecord, type RunStore } from '../../src/runs/index.js';
import { settleWithin } from '../helpers.js';
import { gatedChain } from '../support/gated-essay.js';
import { RedisServer } from '../support/redis-server.js';

let redis: RedisServer | undefined;
let app: FastifyInstance | undefined;
let receiver: Server | undefined;
afterAll(async () => {
  redis?.signal('SIGCONT');
  await app?.close();
  await redis?.kill();
  receiver?.close();
});

/** `/gated`, held under way until the test opens it. */
const { chain: gated, open: openGate } = gatedChain();

it('calls the webhook of a run ended by its own write that Redis ran late, once', async () => {
  const received: { run_id: string; status: string }[] = [];
  receiver = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      received.push(JSON.parse(body) as { run_id: string; status: string });
      response.end();
    });
  });
  await new Promise<void>((resolve) => receiver?.listen(0, '127.0.0.1', resolve));
  const hookPort = (receiver.address() as AddressInfo).port;
  redis = await RedisServer.scratch();
  const namespace = `runnel-test-late-end-${randomUUID()}`;
  const services = await connectServices({ redisUrl: redis.url, namespace, redisCommandTimeoutMs: 300 });
  app = await buildApp({
    chains: [gated] as ChainSpec<never, unknown>[],
    services,
    config: { runNamespace: namespace, workerConcurrency: 1, runLockMs: 60_000, webhookHosts: [`127.0.0.1:${hookPort}`], webhookSecret: 's3cret-0123456789abcdef', webhookAllowHttp: true },
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const res = await fetch(`${url}/gated/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: {}, webhook: `http://127.0.0.1:${hookPort}/hook` }) });
  const { run_id: runId } = (await res.json()) as { run_id: string };
  // It runs: its first chunk is in its log.
  const stream = await fetch(`${url}/gated/runs/${runId}/stream`);
  const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
  let seen = '';
  while (!seen.includes('"before "')) seen += new TextDecoder().decode((await reader.read()).value);
  await reader.cancel();
  redis.signal('SIGSTOP');
  try {
    // The run goes on and ends while Redis is frozen: its last frames and its end are written, and time out
    // (300 ms) — held in the socket, well within the 10 s a stalled connection is kept.
    openGate();
    await new Promise((resolve) => setTimeout(resolve, 2_000));
  } finally {
    redis.signal('SIGCONT');
  }
  // Redis runs what its socket held: the run is ended by that write. Its webhook is called, once.
  let record: { status: string; error?: { code: string } } = { status: 'running' };
  for (let i = 0; i < 100 && !['success', 'error', 'cancelled'].includes(record.status); i++) {
    const got = await fetch(`${url}/gated/runs/${runId}/wait?timeout_s=1`);
    if (got.status === 200 || got.status === 408) record = (await got.json()) as typeof record;
  }
  // Its end, with its last frames, is one command: the run succeeded (Redis ran the success that timed out).
  expect(record.status).toBe('success');
  for (let i = 0; i < 100 && received.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 100));
  // Later attempts (a second apart) find the run ended: none may call it again.
  await new Promise((resolve) => setTimeout(resolve, 2_500));
  expect(received.map((hook) => [hook.run_id, hook.status])).toEqual([[runId, 'success']]);
}, 60_000);

// A review: the sweeps' ends were tried once each, so one that timed out and that Redis ran later left the next
// sweep finding the run ended "by another" — and no webhook.
it('calls the webhook of a lost run whose sweep end timed out and was run anyway, once', async () => {
  const received: string[] = [];
  const hooks = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      received.push(request.url ?? '');
      response.end();
    });
  });
  await new Promise<void>((resolve) => hooks.listen(0, '127.0.0.1', resolve));
  const hookPort = (hooks.address() as AddressInfo).port;
  const own = await RedisServer.scratch();
  const client = createRedisClient(own.url);
  await client.connect();
  const ns = `runnel-test-late-sweep-${randomUUID()}`;
  const inner = new RedisRunStore({ client, namespace: `${ns}:runs` });
  const runId = randomUUID();
  let timedOut = false;
  // Its first end is written, and then reported as timed out, as a write Redis ran after its caller gave up.
  const store = new Proxy(inner, {
    get(target, property, receiver) {
      if (property === 'end') {
        return async (id: string, ...rest: unknown[]) => {
          const ended: unknown = await (target.end as (...args: unknown[]) => Promise<unknown>).call(target, id, ...rest);
          if (id === runId && !timedOut) {
            timedOut = true;
            throw new Error('Command timed out');
          }
          return ended;
        };
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as RunStore;
  const queue = new BullRunQueue({
    connection: client,
    prefix: `${ns}:bull`,
    store,
    chains: new Map(),
    concurrency: 0,
    lockMs: 1_000,
    webhooks: { hosts: [`127.0.0.1:${hookPort}`], secret: 's3cret-0123456789abcdef', allowHttp: true },
  });
  try {
    // A run whose process died: its heartbeat goes stale, and a sweep ends it.
    const now = new Date().toISOString();
    const record: RunRecord = { run_id: runId, kind: 'stream', chain: '/gone', identity: 'ada', status: 'running', input: 1, config: {}, webhook: `http://127.0.0.1:${hookPort}/${runId}`, created_at: now, updated_at: now };
    await inner.create(record, { local: true });
    await settleWithin(
      (async () => {
        while (received.length === 0) await new Promise((resolve) => setTimeout(resolve, 50));
      })(),
      30_000,
    );
    expect(timedOut).toBe(true);
    expect((await inner.get(runId))?.error).toMatchObject({ code: 'RUNNEL_ERR_RUN_LOST' });
    // The sweeps after it find the run ended by their own end: told once.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(received).toEqual([`/${runId}`]);
  } finally {
    await queue.close(50);
    client.disconnect();
    await own.kill();
    hooks.close();
  }
}, 60_000);
