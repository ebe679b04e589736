/**
 * A worker process's own `/metrics` (`RUNNEL_WORKER_METRICS_PORT`): a server's `/metrics` cannot see the model
 * calls of the runs a separate worker executes, which an operator's tokens a minute then missed. The real
 * `npm run worker` entry, the shipped `/joke` chain on the real `openai` SDK against the local provider server,
 * a run submitted to a server without workers of its own, both on one Redis; the server's key rule.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jokeChain } from '../../chains/joke.js';
import { buildApp, connectServices, loadServerConfig, type ChainSpec, type Services } from '../../src/index.js';
import { scanKeys } from '../helpers.js';
import { startProviderServer, type ProviderServer } from '../support/provider-server.js';
import { sampleValue } from '../support/prometheus.js';

const root = new URL('../..', import.meta.url).pathname;
const REDIS_URL = process.env.RUNNEL_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const ADA = 'ada-key-0123456789abcdef';
const SCRAPER = 'scraper-key-0123456789abcdef';
const namespace = `runnel-test-worker-metrics-${randomUUID()}`;
const env = { REDIS_URL, RUNNEL_RUN_NAMESPACE: namespace, RUNNEL_API_KEYS: `ada:${ADA},scraper:${SCRAPER}`, RUNNEL_METRICS_KEYS: 'scraper' };

let provider: ProviderServer;
let services: Services;
let app: FastifyInstance;
let base: string;
let worker: ChildProcess | undefined;

/** A port free now (the worker is given it). */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

/** Starts the worker entry; resolves with what it logged once it says it runs. */
async function startWorker(extra: Record<string, string>): Promise<{ child: ChildProcess; said: () => string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server/worker.ts'], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', LOG_LEVEL: 'info', OPENAI_API_KEY: 'sk-test-0000', OPENAI_BASE_URL: provider.url, DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/runnel_test', ...env, ...extra },
  });
  let out = '';
  child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (out += chunk.toString()));
  await new Promise<void>((resolve, reject) => {
    const check = (): void => {
      if (out.includes('runs at a time')) resolve();
    };
    child.stdout?.on('data', check);
    child.once('exit', (code) => reject(new Error(`worker exited ${code}: ${out}`)));
  });
  return { child, said: () => out };
}

beforeAll(async () => {
  provider = await startProviderServer('openai');
  services = await connectServices({ redisUrl: REDIS_URL, namespace });
  const config = loadServerConfig({ ...env, RUNNEL_WORKER_CONCURRENCY: '0' });
  app = await buildApp({ chains: [jokeChain({ services, env: { OPENAI_API_KEY: 'sk-test-0000', OPENAI_BASE_URL: provider.url } })] as ChainSpec<never, unknown>[], config, services });
  await app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
}, 60_000);

afterAll(async () => {
  worker?.kill('SIGKILL');
  await app?.close();
  await services?.close();
  await provider?.close();
  const redis = new Redis(REDIS_URL);
  try {
    const keys = await scanKeys(redis, `${namespace}:*`);
    if (keys.length > 0) await redis.unlink(...keys);
  } finally {
    redis.disconnect();
  }
});

describe("a worker's own /metrics", () => {
  it("counts the model calls and tokens of the runs it executes, behind the server's key rule, and stops with the worker", async () => {
    const port = await freePort();
    const started = await startWorker({ RUNNEL_WORKER_METRICS_PORT: String(port) });
    worker = started.child;
    expect(started.said()).toContain(`/metrics on port ${port}`);
    const url = `http://127.0.0.1:${port}/metrics`;
    const scrape = async (key?: string) => fetch(url, { headers: key === undefined ? {} : { authorization: `Bearer ${key}` } });

    const submitted = await fetch(`${base}/joke/runs`, { method: 'POST', headers: { authorization: `Bearer ${ADA}`, 'content-type': 'application/json' }, body: JSON.stringify({ input: { topic: 'metrics' } }) });
    expect(submitted.status).toBe(202);
    const { run_id: runId } = (await submitted.json()) as { run_id: string };
    const ended = (await (await fetch(`${base}/joke/runs/${runId}/wait?timeout_s=60`, { headers: { authorization: `Bearer ${ADA}` } })).json()) as { status: string };
    expect(ended.status).toBe('success');

    const text = await (await scrape(SCRAPER)).text();
    expect(sampleValue(text, 'runnel_model_request_duration_seconds_count', { provider: 'openai', model: 'gpt-4o-mini' })).toBe(1);
    expect(sampleValue(text, 'runnel_model_tokens_total', { chain: '/joke', direction: 'in' })).toBe(12);
    // Its run's response-cache lookup (a miss: the first time that prompt was asked).
    expect(sampleValue(text, 'runnel_model_cache_total', { result: 'miss' })).toBe(1);
    // The process's own series, which only the worker can tell.
    expect(sampleValue(text, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    // The server, whose workers are elsewhere, counted no call.
    const server = await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${SCRAPER}` } })).text();
    expect(sampleValue(server, 'runnel_model_request_duration_seconds_count', { provider: 'openai', model: 'gpt-4o-mini' })).toBeUndefined();

    // The server's rule: no key is a 401, a key RUNNEL_METRICS_KEYS does not name a 403; nothing else is served.
    const none = await scrape();
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer');
    expect(await none.json()).toMatchObject({ code: 'RUNNEL_ERR_UNAUTHORIZED' });
    expect((await scrape(ADA)).status).toBe(403);
    expect((await fetch(`http://127.0.0.1:${port}/joke/invoke`)).status).toBe(404);
    expect((await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${SCRAPER}` } })).status).toBe(405);

    const exited = new Promise<number | null>((resolve) => started.child.once('exit', resolve));
    started.child.kill('SIGTERM');
    expect(await exited).toBe(0);
    await expect(scrape(SCRAPER)).rejects.toThrow();
  }, 60_000);

  it('stops the start with a port already taken, naming the setting', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      const child = spawn(process.execPath, ['--import', 'tsx', 'src/server/worker.ts'], {
        cwd: root,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/runnel_test', ...env, RUNNEL_WORKER_METRICS_PORT: String(port) },
      });
      let err = '';
      child.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString()));
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      expect(code).toBe(1);
      expect(err).toContain(`RUNNEL_WORKER_METRICS_PORT ${port}`);
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
  }, 60_000);
});
