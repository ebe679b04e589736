/**
 * A submission answered 503 while Redis was frozen: its record's write timed
 * out on this side but was carried out once Redis woke. (A probe: the run
 * then waited, its caller told it was refused, and held the caller's one
 * open run under RUNNEL_MAX_RUNS_PER_KEY — every later submission 429 for a
 * minute and more.) It is now ended as soon as Redis answers.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, expect, it } from 'vitest';
import type { RunnelError } from '../../src/index.js';
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

/** A webhook receiver on a spare port: the run ids of the deliveries it got, in order. */
async function webhookReceiver(): Promise<{ received: string[]; receiver: Server; hookPort: number }> {
  const received: string[] = [];
  const receiver = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      received.push((JSON.parse(body) as { run_id: string }).run_id);
      response.end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  return { received, receiver, hookPort: (receiver.address() as AddressInfo).port };
}

/**
 * A probe: the refused run's webhook was called. Its caller was told 503 (retry), never learnt its id, and
 * submits again — its receiver then got a signed `error` record of a run nobody had (an alarm for a
 * failure that did not happen), beside the record of the run that was retried. A refused run calls none.
 */
it('calls no webhook for a run whose submission was refused', async () => {
  const { received, receiver, hookPort } = await webhookReceiver();
  const frozen = await RedisServer.scratch();
  const namespace = `runnel-test-refused-hook-${randomUUID()}`;
  const services = await connectServices({ redisUrl: frozen.url, namespace, redisCommandTimeoutMs: 2_000 });
  let kept = '';
  const server = await buildApp({
    chains: runChains as ChainSpec<never, unknown>[],
    services,
    config: { runNamespace: namespace, workerConcurrency: 0, runLockMs: 60_000, webhookHosts: [`127.0.0.1:${hookPort}`], webhookSecret: 's3cret-0123456789abcdef', webhookAllowHttp: true },
  });
  try {
    await server.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(server.server.address() as AddressInfo).port}`;
    const submit = () =>
      fetch(`${url}/noop/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { n: 1 }, webhook: `http://127.0.0.1:${hookPort}/hook` }) });
    const first = await submit();
    expect(first.status).toBe(202);
    kept = ((await first.json()) as { run_id: string }).run_id;
    frozen.signal('SIGSTOP');
    let refused: Response;
    try {
      refused = await submit();
    } finally {
      frozen.signal('SIGCONT');
    }
    expect(refused.status).toBe(503);
    await refused.text();
    // The refused run's write landed, and it is ended as Redis answers (the test above).
    let listed: { run_id: string; status: string }[] = [];
    for (let i = 0; i < 300 && listed[0]?.status !== 'error'; i++) {
      const res = await fetch(`${url}/noop/runs`);
      listed = res.status === 200 ? ((await res.json()) as { runs: typeof listed }).runs : (await res.text(), []);
      if (listed[0]?.status !== 'error') await new Promise((r) => setTimeout(r, 100));
    }
    expect(listed.map((run) => run.status)).toEqual(['error', 'pending']);
    // The run that was accepted calls its webhook when it ends (cancelled here: no worker runs it).
    const cancelled = await fetch(`${url}/noop/runs/${kept}/cancel`, { method: 'POST' });
    expect(((await cancelled.json()) as { status: string }).status).toBe('cancelled');
  } finally {
    // A stopping server waits for its deliveries under way: after the close, every webhook it sent has landed.
    await server.close();
    await frozen.kill();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
  }
  expect(received).toEqual([kept]);
}, 120_000);

/**
 * The same for a durable stream (`on_disconnect: "continue"`): its first write, which stores the run, timed
 * out, and its client got a 503; the write landed once Redis woke, storing the run as running with a
 * heartbeat nobody renews, and the sweep that ended it lost called its webhook.
 */
it('calls no webhook for a durable stream whose start was refused', async () => {
  const { received, receiver, hookPort } = await webhookReceiver();
  const frozen = await RedisServer.scratch();
  const namespace = `runnel-test-refused-stream-hook-${randomUUID()}`;
  const services = await connectServices({ redisUrl: frozen.url, namespace, redisCommandTimeoutMs: 2_000 });
  const server = await buildApp({
    chains: runChains as ChainSpec<never, unknown>[],
    services,
    config: { runNamespace: namespace, workerConcurrency: 0, runLockMs: 1_000, webhookHosts: [`127.0.0.1:${hookPort}`], webhookSecret: 's3cret-0123456789abcdef', webhookAllowHttp: true },
  });
  let listed: { run_id: string; status: string; error?: { code: string } }[] = [];
  try {
    await server.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(server.server.address() as AddressInfo).port}`;
    // Scripts loaded, so that the frozen stream's first command is its run's first write.
    const warm = await fetch(`${url}/story/stream`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { topic: 'x' }, on_disconnect: 'continue' }) });
    await warm.text();
    frozen.signal('SIGSTOP');
    let refused: Response;
    try {
      refused = await fetch(`${url}/story/stream`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { topic: 'x' }, on_disconnect: 'continue', webhook: `http://127.0.0.1:${hookPort}/hook` }) });
    } finally {
      frozen.signal('SIGCONT');
    }
    expect(refused.status).toBe(503);
    await refused.text();
    // The write landed: the run is listed, and ends.
    for (let i = 0; i < 300 && !(listed.length === 2 && listed.every((run) => run.status !== 'running')); i++) {
      const res = await fetch(`${url}/story/runs`);
      listed = res.status === 200 ? ((await res.json()) as { runs: typeof listed }).runs : (await res.text(), []);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await server.close();
    await frozen.kill();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
  }
  // Ended as refused, by the process that refused it, as soon as Redis answered (no longer lost, by a sweep).
  expect(listed.map((run) => [run.status, run.error?.code])).toEqual([['error', 'RUNNEL_ERR_REDIS_UNAVAILABLE'], ['success', undefined]]);
  expect(received).toEqual([]);
}, 120_000);

it('starts no retries to end a submission or a durable stream refused unsent (Redis down): it cannot land', async () => {
  const down = await RedisServer.scratch();
  const namespace = `runnel-test-refused-${randomUUID()}`;
  const services = await connectServices({ redisUrl: down.url, namespace });
  const downApp = await buildApp({ chains: runChains as ChainSpec<never, unknown>[], services, config: { runNamespace: namespace, workerConcurrency: 0, runLockMs: 60_000 } });
  try {
    // The queue's end of a waiting run, counted: each refused submission started two minutes of them, at once.
    type Ends = { endWaiting(runId: string, error: RunnelError, status: string): Promise<void>; endWhenPossible(runId: string, error: RunnelError, tell: boolean): Promise<boolean> };
    const core = (downApp as unknown as { runnel: { runQueue(): { core: Ends } } }).runnel.runQueue().core;
    const endWaiting = core.endWaiting.bind(core);
    const endWhenPossible = core.endWhenPossible.bind(core);
    let ends = 0;
    core.endWaiting = (...args) => {
      ends++;
      return endWaiting(...args);
    };
    // A durable stream's too: each refused one started a minute of tries (a review).
    core.endWhenPossible = (...args) => {
      ends++;
      return endWhenPossible(...args);
    };
    // Once the client has seen its socket close, a command is refused unsent.
    const client = services.redis as NonNullable<typeof services.redis>;
    const closed = new Promise((resolve) => client.once('close', resolve));
    await down.kill();
    await closed;
    for (let i = 0; i < 20; i++) {
      const res = await downApp.inject({ method: 'POST', url: '/noop/runs', payload: { input: { n: 1 } } });
      expect([res.statusCode, res.json().code]).toEqual([503, 'RUNNEL_ERR_REDIS_UNAVAILABLE']);
      const stream = await downApp.inject({ method: 'POST', url: '/story/stream', payload: { input: { topic: 'x' }, on_disconnect: 'continue' } });
      expect([stream.statusCode, stream.json().code]).toEqual([503, 'RUNNEL_ERR_REDIS_UNAVAILABLE']);
    }
    expect(ends).toBe(0);
  } finally {
    await downApp.close();
    await down.kill();
  }
}, 60_000);
