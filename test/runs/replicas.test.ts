/**
 * Durable runs across real processes on one Redis: a stream cut after three
 * frames and rejoined on another replica with Last-Event-ID; cancel from
 * another replica; a worker killed with SIGKILL mid-run; 1,000 queued runs;
 * signed webhooks with a retry after a 500.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scanKeys } from '../helpers.js';
import { frames, rest } from '../support/sse-frames.js';
import { STORY } from '../support/run-server.js';

const root = new URL('../..', import.meta.url).pathname;
const KEY = 'ada-key-0123456789abcdef';
const SECRET = 'webhook-secret-0123456789';
const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
const children: ChildProcess[] = [];
// The replicas' runs, queue and logs live under it; forgotten after the suite (a day's TTL left 2,000 keys a run).
const namespace = `runnel-test-replicas-${randomUUID()}`;

/** Starts a run-server process; resolves with its base URL (or undefined for a worker) once it is ready. */
function start(env: Record<string, string>): Promise<{ child: ChildProcess; url?: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/run-server.ts'], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', REDIS_URL: 'redis://127.0.0.1:6379', RUNNEL_API_KEYS: `ada:${KEY}`, PORT: '0', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const port = /ready (\d+)/.exec(out)?.[1];
      if (port !== undefined) resolve({ child, url: `http://127.0.0.1:${port}` });
      else if (out.includes('ready worker')) resolve({ child });
    });
    child.stderr?.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.once('exit', (code) => reject(new Error(`run-server exited ${code}: ${out}`)));
  });
}


const submit = async (url: string, path: string, body: unknown): Promise<{ run_id: string }> => {
  const res = await fetch(`${url}${path}/runs`, { method: 'POST', headers, body: JSON.stringify(body) });
  expect(res.status).toBe(202);
  return (await res.json()) as { run_id: string };
};
const wait = async (url: string, path: string, runId: string): Promise<{ status: string; output?: unknown; error?: { code: string } }> =>
  (await (await fetch(`${url}${path}/runs/${runId}/wait?timeout_s=60`, { headers })).json()) as { status: string; output?: unknown; error?: { code: string } };

/** Reads an event stream up to its first data frame: the reader, to read on, and what it read. */
async function firstFrame(res: Response): Promise<{ reader: ReadableStreamDefaultReader<Uint8Array>; seen: string }> {
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  let seen = '';
  while (!seen.includes('event: data')) seen += new TextDecoder().decode((await reader.read()).value);
  return { reader, seen };
}

interface Delivery {
  runId: string;
  status: number;
  signed: boolean;
  /** The delivery's id header, and whose run the body says it is, to which URL. */
  id: string | undefined;
  caller: unknown;
  url: unknown;
}
let receiver: Server;
const deliveries: Delivery[] = [];
let replicaA: string;
let replicaB: string;

beforeAll(async () => {
  // The webhook receiver: the first delivery of each run fails with a 500, the next succeeds.
  receiver = createServer((req: IncomingMessage, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const { run_id: runId, caller, webhook_url: url } = JSON.parse(body) as { run_id: string; caller: unknown; webhook_url: unknown };
      const timestamp = String(req.headers['x-runnel-timestamp']);
      const signed = req.headers['x-runnel-signature'] === `sha256=${createHmac('sha256', SECRET).update(`${timestamp}.${body}`).digest('hex')}`;
      const status = deliveries.some((d) => d.runId === runId) ? 200 : 500;
      deliveries.push({ runId, status, signed, id: req.headers['x-runnel-webhook-id'] as string | undefined, caller, url });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const env = {
    RUNNEL_RUN_NAMESPACE: namespace,
    RUNNEL_WEBHOOK_HOSTS: `127.0.0.1:${(receiver.address() as AddressInfo).port}`,
    RUNNEL_WEBHOOK_SECRET: SECRET,
    RUNNEL_WEBHOOK_ALLOW_HTTP: 'true',
    RUNNEL_WORKER_CONCURRENCY: '8',
  };
  const [a, b] = await Promise.all([start(env), start(env)]);
  replicaA = a.url as string;
  replicaB = b.url as string;
}, 60_000);

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await Promise.all(children.map((child) => (child.exitCode !== null || child.signalCode !== null ? undefined : new Promise((resolve) => child.once('exit', resolve)))));
  await new Promise<void>((resolve) => receiver.close(() => resolve()));
  const redis = new Redis('redis://127.0.0.1:6379');
  try {
    const keys = await scanKeys(redis, `${namespace}:*`);
    for (let i = 0; i < keys.length; i += 1000) await redis.unlink(...keys.slice(i, i + 1000));
  } finally {
    redis.disconnect();
  }
});

describe('durable runs across replicas', () => {
  it('a /stream cut after 3 frames and rejoined on another replica with Last-Event-ID gives exactly the text /invoke gives', async () => {
    const res = await fetch(`${replicaA}/story/stream`, { method: 'POST', headers, body: JSON.stringify({ input: { topic: 'x' }, on_disconnect: 'continue' }) });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let seen = '';
    while (frames(seen).filter((f) => f.event === 'data').length < 3) seen += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    const got = frames(seen).filter((f) => f.event !== 'end');
    const runId = (got[0]?.data as { run_id: string }).run_id;
    const rest = frames(await (await fetch(`${replicaB}/story/runs/${runId}/stream`, { headers: { ...headers, 'last-event-id': got.at(-1)?.id as string } })).text());
    const invoked = (await (await fetch(`${replicaB}/story/invoke`, { method: 'POST', headers, body: JSON.stringify({ input: { topic: 'x' } }) })).json()) as { output: string };
    expect([...got, ...rest].filter((f) => f.event === 'data').map((f) => f.data).join('')).toBe(invoked.output);
    expect(invoked.output).toBe(STORY);
    expect(rest.at(-1)?.event).toBe('end');
  });

  it('cancels from another replica: the run ends cancelled, seen from both', async () => {
    const run = await submit(replicaA, '/long', { input: { topic: 'c' } });
    // Running (it has streamed a frame) before the cancel.
    const { reader } = await firstFrame(await fetch(`${replicaA}/long/runs/${run.run_id}/stream`, { headers }));
    await reader.cancel();
    const cancelled = (await (await fetch(`${replicaB}/long/runs/${run.run_id}/cancel`, { method: 'POST', headers })).json()) as { status: string };
    expect(cancelled.status).toBe('cancelled');
    expect((await wait(replicaA, '/long', run.run_id)).status).toBe('cancelled');
  });

  it('1,000 queued runs all end, each with its output', async () => {
    const runs: { run_id: string; n: number }[] = [];
    for (let batch = 0; batch < 10; batch++) {
      runs.push(...(await Promise.all(Array.from({ length: 100 }, async (_, i) => ({ ...(await submit(batch % 2 === 0 ? replicaA : replicaB, '/noop', { input: { n: batch * 100 + i } })), n: batch * 100 + i })))));
    }
    const ended = await Promise.all(runs.map(async (run) => ({ n: run.n, record: await wait(replicaB, '/noop', run.run_id) })));
    expect(ended.filter(({ n, record }) => record.status === 'success' && record.output === n)).toHaveLength(1000);
  }, 120_000);

  it('delivers one signed webhook per run, after retrying a 500, naming its caller and URL in what is signed', async () => {
    const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    const run = await submit(replicaA, '/noop', { input: { n: 7 }, webhook: hook });
    expect((await wait(replicaB, '/noop', run.run_id)).status).toBe('success');
    for (;;) {
      if (deliveries.some((d) => d.runId === run.run_id && d.status === 200)) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const mine = deliveries.filter((d) => d.runId === run.run_id);
    expect(mine.map((d) => d.status)).toEqual([500, 200]);
    expect(mine.every((d) => d.signed)).toBe(true);
    // A probe: with one secret for every caller, a signed body said nothing of whose run it was, so any caller
    // could send one (output of its choosing) to another's receiver. The id is the same on every attempt.
    expect(mine.map((d) => [d.caller, d.url, d.id])).toEqual([
      ['ada', hook, run.run_id],
      ['ada', hook, run.run_id],
    ]);
  }, 60_000);
});

describe('a worker killed mid-run', () => {
  it('never leaves the run running: another worker ends it RUNNEL_ERR_RUN_LOST', async () => {
    const namespace = `runnel-test-kill-${randomUUID()}`;
    const env = { RUNNEL_RUN_NAMESPACE: namespace, RUNNEL_RUN_LOCK_MS: '1000' };
    const api = await start({ ...env, RUNNEL_WORKER_CONCURRENCY: '0' });
    const doomed = await start({ ...env, RUNNEL_ROLE: 'worker' });
    const run = await submit(api.url as string, '/long', { input: { topic: 'k' } });
    const { reader, seen } = await firstFrame(await fetch(`${api.url}/long/runs/${run.run_id}/stream`, { headers }));
    doomed.child.kill('SIGKILL');
    await new Promise((resolve) => doomed.child.once('exit', resolve));
    await start({ ...env, RUNNEL_ROLE: 'worker' });
    const all = seen + (await rest(reader));
    expect(frames(all).at(-1)).toMatchObject({ event: 'error', data: { code: 'RUNNEL_ERR_RUN_LOST' } });
    expect(await wait(api.url as string, '/long', run.run_id)).toMatchObject({ status: 'error', error: { code: 'RUNNEL_ERR_RUN_LOST' } });
  }, 60_000);
});

// An operator's probe: Ctrl-C on `npm run worker` sends SIGINT twice (the terminal's to the process group, and npm's
// forward). The handler was a one-time one: the second took Node's default, and the worker died at once, its run
// left running until a sweep ended it lost.
describe('a worker told to stop twice (Ctrl-C under npm)', () => {
  it('drains once: its run ends RUNNEL_ERR_SHUTTING_DOWN after the grace, and the worker exits on its own', async () => {
    const namespace = `runnel-test-sigint-${randomUUID()}`;
    const env = { RUNNEL_RUN_NAMESPACE: namespace, RUNNEL_RUN_LOCK_MS: '1000' };
    const api = await start({ ...env, RUNNEL_WORKER_CONCURRENCY: '0' });
    const worker = await start({ ...env, RUNNEL_ROLE: 'worker', RUNNEL_SHUTDOWN_GRACE_MS: '500' });
    let said = '';
    worker.child.stdout?.on('data', (chunk: Buffer) => (said += chunk.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => worker.child.once('exit', (code, signal) => resolve({ code, signal })));
    const run = await submit(api.url as string, '/long', { input: { topic: 'interrupted' } });
    const { reader } = await firstFrame(await fetch(`${api.url}/long/runs/${run.run_id}/stream`, { headers }));
    worker.child.kill('SIGINT');
    // The second once the first was heard (it said so), as npm's forward comes after the terminal's.
    while (!said.includes('SIGINT: stopping the worker')) await new Promise((resolve) => setTimeout(resolve, 10));
    worker.child.kill('SIGINT');
    expect(await exited).toEqual({ code: 0, signal: null });
    expect(said.match(/stopping the worker/g)).toHaveLength(1);
    expect(await wait(api.url as string, '/long', run.run_id)).toMatchObject({ status: 'error', error: { code: 'RUNNEL_ERR_SHUTTING_DOWN' } });
    await reader.cancel();
  }, 60_000);
});

describe('a worker killed mid-run, no worker left', () => {
  // A probe: after `kill -9` of the only worker, the replicas ended its runs RUNNEL_ERR_RUN_LOST, and their
  // `/metrics` said `runnel_runs{status="running"}` of them for good: BullMQ keeps a dead worker's job active
  // until another worker's stall check, and the gauge read BullMQ's count.
  it('counts the lost run running no more once it is ended', async () => {
    const namespace = `runnel-test-none-left-${randomUUID()}`;
    const env = { RUNNEL_RUN_NAMESPACE: namespace, RUNNEL_RUN_LOCK_MS: '1000', RUNNEL_METRICS_KEYS: 'ada' };
    const api = await start({ ...env, RUNNEL_WORKER_CONCURRENCY: '0' });
    const url = api.url as string;
    const running = async (): Promise<string | undefined> => /^runnel_runs\{status="running"\} (\d+)$/m.exec(await (await fetch(`${url}/metrics`, { headers })).text())?.[1];
    const doomed = await start({ ...env, RUNNEL_ROLE: 'worker' });
    const run = await submit(url, '/long', { input: { topic: 'none left' } });
    while (((await (await fetch(`${url}/long/runs/${run.run_id}`, { headers })).json()) as { status: string }).status !== 'running') await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await running()).toBe('1');
    doomed.child.kill('SIGKILL');
    await new Promise((resolve) => doomed.child.once('exit', resolve));
    expect(await wait(url, '/long', run.run_id)).toMatchObject({ status: 'error', error: { code: 'RUNNEL_ERR_RUN_LOST' } });
    expect(await running()).toBe('0');
  }, 60_000);
});

describe('a worker killed mid-run while the other worker is busy', () => {
  // A probe: the lost run stayed running until the surviving worker had a free slot to take its job again
  // (the run ended as lost only when that worker's own run ended), far past a lock and a half.
  it('its run is ended RUNNEL_ERR_RUN_LOST by the sweep, while the other worker\'s run goes on', async () => {
    const namespace = `runnel-test-busy-${randomUUID()}`;
    const env = { RUNNEL_RUN_NAMESPACE: namespace, RUNNEL_RUN_LOCK_MS: '1000', RUNNEL_WORKER_CONCURRENCY: '1' };
    const api = await start({ ...env, RUNNEL_WORKER_CONCURRENCY: '0' });
    const url = api.url as string;
    const status = async (path: string, runId: string) => ((await (await fetch(`${url}${path}/runs/${runId}`, { headers })).json()) as { status: string }).status;
    await start({ ...env, RUNNEL_ROLE: 'worker' });
    // The survivor's one slot: a run of a minute.
    const busy = await submit(url, '/long', { input: { topic: 'busy' } });
    while ((await status('/long', busy.run_id)) !== 'running') await new Promise((resolve) => setTimeout(resolve, 50));
    const doomed = await start({ ...env, RUNNEL_ROLE: 'worker' });
    const run = await submit(url, '/long', { input: { topic: 'doomed' } });
    const { reader, seen } = await firstFrame(await fetch(`${url}/long/runs/${run.run_id}/stream`, { headers }));
    doomed.child.kill('SIGKILL');
    const all = seen + (await rest(reader));
    expect(frames(all).at(-1)).toMatchObject({ event: 'error', data: { code: 'RUNNEL_ERR_RUN_LOST' } });
    expect(await wait(url, '/long', run.run_id)).toMatchObject({ status: 'error', error: { code: 'RUNNEL_ERR_RUN_LOST' } });
    // Ended before a slot came free: the survivor's run is still under way.
    expect(await status('/long', busy.run_id)).toBe('running');
    await fetch(`${url}/long/runs/${busy.run_id}/cancel`, { method: 'POST', headers });
  }, 60_000);
});

describe('a replica killed under a durable stream', () => {
  it('its run, executed there, is ended RUNNEL_ERR_RUN_LOST by another replica', async () => {
    const env = { RUNNEL_RUN_NAMESPACE: `runnel-test-local-${randomUUID()}`, RUNNEL_RUN_LOCK_MS: '1000' };
    const [doomed, survivor] = await Promise.all([start(env), start(env)]);
    const res = await fetch(`${doomed.url}/long/stream`, { method: 'POST', headers, body: JSON.stringify({ input: { topic: 'gone' }, on_disconnect: 'continue' }) });
    const { seen } = await firstFrame(res);
    const got = frames(seen);
    const runId = (got[0]?.data as { run_id: string }).run_id;
    doomed.child.kill('SIGKILL');
    await new Promise((resolve) => doomed.child.once('exit', resolve));
    const rest = frames(await (await fetch(`${survivor.url}/long/runs/${runId}/stream`, { headers: { ...headers, 'last-event-id': got.at(-1)?.id as string } })).text());
    expect(rest.at(-1)).toMatchObject({ event: 'error', data: { code: 'RUNNEL_ERR_RUN_LOST' } });
    expect(await wait(survivor.url as string, '/long', runId)).toMatchObject({ status: 'error', error: { code: 'RUNNEL_ERR_RUN_LOST' } });
  }, 60_000);
});
