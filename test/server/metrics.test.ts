/**
 * `/metrics` on prom-client (issue 17), on a real server: Node's default
 * metrics beside the `runnel_*` series; time to first token observed when the
 * first output goes out, not before; the run queue's depth and running runs;
 * and many apps in one process, each with its own series, the process's
 * collectors started once.
 */
import { createRequire } from 'node:module';
import type * as PerfHooks from 'node:perf_hooks';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildApp, defineChain, generator, lambda, RunnelError, sequence, type ChainSpec } from '../../src/index.js';
import { deferred } from '../helpers.js';
import { metricNames, parseMetrics, sampleValue } from '../support/prometheus.js';
import { echo, post } from '../support/server.js';

// prom-client's default collectors start an event-loop monitor and a GC observer (never stopped): counted
// from before the first app of this file.
const perfHooks = createRequire(import.meta.url)('node:perf_hooks') as typeof PerfHooks;
const monitors = vi.spyOn(perfHooks, 'monitorEventLoopDelay');
const observes = vi.spyOn(perfHooks.PerformanceObserver.prototype, 'observe');
const gcObservers = (): number => observes.mock.calls.filter(([options]) => JSON.stringify(options ?? {}).includes('"gc"')).length;

/** Released by each test: the generator yields nothing until then. */
let gate = deferred();
const gated = defineChain({
  path: '/gated',
  description: 'A step, then one that yields two chunks once the test opens the gate',
  runnable: sequence(
    lambda((input: unknown) => input),
    generator(async function* (inputs: AsyncIterable<unknown>) {
      for await (const _ of inputs);
      await gate.promise;
      yield 'first';
      yield 'second';
    }),
  ),
});

let release = deferred();
const blocking = defineChain({
  path: '/blocking',
  description: 'A background run that waits for the test',
  runnable: lambda(async (input: { n: number }) => {
    await release.promise;
    return input.n;
  }),
});

const broken = defineChain({
  path: '/broken',
  description: 'Fails with a Runnel error',
  runnable: lambda((_input: unknown): string => {
    throw new RunnelError('RUNNEL_ERR_OUTPUT_PARSE', 'Could not parse the answer');
  }),
});

const chains = [echo, gated, blocking, broken] as ChainSpec<never, unknown>[];
let app: Awaited<ReturnType<typeof buildApp>>;
let url: string;
beforeAll(async () => {
  app = await buildApp({ chains, config: { workerConcurrency: 1 } });
  await app.listen({ port: 0, host: '127.0.0.1' });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});
afterAll(async () => app.close());

const scrape = async (): Promise<string> => {
  const res = await fetch(`${url}/metrics`);
  expect(res.status).toBe(200);
  return res.text();
};

describe('/metrics', () => {
  it("shows Node's default metrics and the runnel_* series, in the text exposition format", async () => {
    expect((await post(`${url}/echo/invoke`, { input: { name: 'metrics' } })).status).toBe(200);
    const res = await fetch(`${url}/metrics`);
    expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const body = await res.text();
    // Every line parses as Prometheus reads it.
    const samples = parseMetrics(body);
    for (const name of ['process_resident_memory_bytes', 'process_cpu_user_seconds_total', 'nodejs_eventloop_lag_seconds', 'nodejs_heap_size_used_bytes', 'nodejs_active_handles_total']) {
      expect(samples.some((sample) => sample.name === name && sample.value >= 0), name).toBe(true);
    }
    expect(metricNames(body)).toContain('nodejs_gc_duration_seconds_bucket');
    expect(sampleValue(body, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(sampleValue(body, 'runnel_requests_total', { chain: '/echo', endpoint: 'invoke', status: '200' })).toBe(1);
    expect(sampleValue(body, 'runnel_request_duration_seconds_count', { chain: '/echo', endpoint: 'invoke' })).toBe(1);
    expect(sampleValue(body, 'runnel_open_streams')).toBe(0);
    for (const name of ['runnel_model_tokens_total', 'runnel_model_cache_total', 'runnel_time_to_first_token_seconds_bucket', 'runnel_model_request_duration_seconds_bucket', 'runnel_model_request_errors_total', 'runnel_model_request_tokens_total', 'runnel_errors_total', 'runnel_runs']) {
      expect(metricNames(body), name).toContain(name);
    }
  });

  it('counts error answers by their Runnel code', async () => {
    const before = sampleValue(await scrape(), 'runnel_errors_total', { code: 'RUNNEL_ERR_INPUT_INVALID' }) ?? 0;
    expect((await post(`${url}/echo/invoke`, { input: { name: 42 } })).status).toBe(422);
    expect(sampleValue(await scrape(), 'runnel_errors_total', { code: 'RUNNEL_ERR_INPUT_INVALID' })).toBe(before + 1);
  });

  it('counts 405s as errors too: a chain route, a path another part of the server takes, /v1', async () => {
    const count = async () => sampleValue(await scrape(), 'runnel_errors_total', { code: 'RUNNEL_ERR_METHOD_NOT_ALLOWED' }) ?? 0;
    const before = await count();
    for (const [method, path] of [['GET', '/echo/invoke'], ['DELETE', '/echo/runs'], ['POST', '/healthz'], ['GET', '/v1/chat/completions']]) {
      expect((await fetch(`${url}${path}`, { method })).status, `${method} ${path}`).toBe(405);
    }
    expect(await count()).toBe(before + 4);
  });
});

describe('time to first token', () => {
  for (const endpoint of ['stream', 'stream_events', 'stream_log'] as const) {
    it(`/${endpoint}: observed once the first output goes out, and not before`, async () => {
      gate = deferred();
      const labels = { chain: '/gated', endpoint };
      const sent = performance.now();
      const res = await post(`${url}/gated/${endpoint}`, { input: null });
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      const decoder = new TextDecoder();
      let received = '';
      // /stream_events and /stream_log send the run's start before any output; /stream sends nothing yet.
      if (endpoint !== 'stream') while (!received.includes('event: data')) received += decoder.decode((await reader.read()).value);
      const waiting = await scrape();
      expect(sampleValue(waiting, 'runnel_open_streams')).toBe(1);
      expect(sampleValue(waiting, 'runnel_time_to_first_token_seconds_count', labels)).toBeUndefined();
      gate.resolve();
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) received += decoder.decode(chunk.value);
      const elapsed = (performance.now() - sent) / 1000;
      expect(received).toContain('event: end');
      const done = await scrape();
      expect(sampleValue(done, 'runnel_time_to_first_token_seconds_count', labels)).toBe(1);
      // Within the client's own view of the request: measured from the request's arrival, not from the epoch or zero.
      const seconds = sampleValue(done, 'runnel_time_to_first_token_seconds_sum', labels) as number;
      expect(seconds).toBeGreaterThan(0);
      expect(seconds).toBeLessThan(elapsed);
      expect(sampleValue(done, 'runnel_open_streams')).toBe(0);
    });
  }
});

describe('background runs', () => {
  it('shows the queue depth and the running runs, once the queue has started', async () => {
    const before = await scrape();
    expect(metricNames(before)).toContain('runnel_runs');
    expect(sampleValue(before, 'runnel_runs', { status: 'pending' })).toBeUndefined();
    release = deferred();
    const submit = async (n: number): Promise<string> => ((await (await post(`${url}/blocking/runs`, { input: { n } })).json()) as { run_id: string }).run_id;
    const first = await submit(1);
    const second = await submit(2);
    // One worker (workerConcurrency 1): the first runs, the second waits.
    while (((await (await fetch(`${url}/blocking/runs/${first}`)).json()) as { status: string }).status !== 'running') await new Promise((resolve) => setTimeout(resolve, 10));
    const busy = await scrape();
    expect(sampleValue(busy, 'runnel_runs', { status: 'running' })).toBe(1);
    expect(sampleValue(busy, 'runnel_runs', { status: 'pending' })).toBe(1);
    release.resolve();
    for (const id of [first, second]) expect(((await (await fetch(`${url}/blocking/runs/${id}/wait`)).json()) as { status: string }).status).toBe('success');
    const idle = await scrape();
    expect(sampleValue(idle, 'runnel_runs', { status: 'running' })).toBe(0);
    expect(sampleValue(idle, 'runnel_runs', { status: 'pending' })).toBe(0);
  });

  it('counts a durable stream’s error frame as a live stream’s (once: a join that replays it does not)', async () => {
    const count = async () => sampleValue(await scrape(), 'runnel_errors_total', { code: 'RUNNEL_ERR_OUTPUT_PARSE' }) ?? 0;
    // A trial: durable streams and joins were counted in requests_total but never timed.
    const timed = async (endpoint: string) => sampleValue(await scrape(), 'runnel_request_duration_seconds_count', { chain: '/broken', endpoint }) ?? 0;
    const before = await count();
    const [streamsTimed, joinsTimed] = [await timed('stream'), await timed('runs_stream')];
    const answer = await (await post(`${url}/broken/stream`, { input: 'x', on_disconnect: 'continue' })).text();
    expect(answer).toContain('RUNNEL_ERR_OUTPUT_PARSE');
    expect(await count()).toBe(before + 1);
    expect(await timed('stream')).toBe(streamsTimed + 1);
    const runId = /"run_id":"([^"]+)"/.exec(answer)?.[1];
    expect((await (await fetch(`${url}/broken/runs/${runId}/stream`)).text())).toContain('RUNNEL_ERR_OUTPUT_PARSE');
    expect(await count()).toBe(before + 1);
    expect(await timed('runs_stream')).toBe(joinsTimed + 1);
  });

  it('counts the run routes under their own endpoints (they were not counted at all)', async () => {
    const run = (await (await post(`${url}/echo/runs`, { input: { name: 'runs' } })).json()) as { run_id: string };
    for (const path of [`/echo/runs/${run.run_id}/wait`, `/echo/runs/${run.run_id}`, `/echo/runs/${run.run_id}/stream`, '/echo/runs']) expect((await fetch(`${url}${path}`)).status, path).toBe(200);
    expect((await fetch(`${url}/echo/runs/${run.run_id}/cancel`, { method: 'POST' })).status).toBe(200);
    expect((await fetch(`${url}/echo/runs/not-a-run`)).status).toBe(404);
    const body = await scrape();
    const counted = (endpoint: string, status = '200') => sampleValue(body, 'runnel_requests_total', { chain: '/echo', endpoint, status });
    expect(counted('runs', '202')).toBe(1);
    expect(counted('runs')).toBe(1);
    expect(counted('runs_wait')).toBe(1);
    expect(counted('runs_record')).toBe(1);
    expect(counted('runs_record', '404')).toBe(1);
    expect(counted('runs_stream')).toBe(1);
    expect(counted('runs_cancel')).toBe(1);
    expect(sampleValue(body, 'runnel_request_duration_seconds_count', { chain: '/echo', endpoint: 'runs_wait' })).toBe(1);
  });
});

describe('many apps in one process', () => {
  it('each serves its own series; the process metrics are collected once, whatever the number of apps', async () => {
    const other = await buildApp({ chains: [echo] as ChainSpec<never, unknown>[] });
    expect((await other.inject({ method: 'POST', url: '/echo/invoke', payload: { input: { name: 'b' } } })).statusCode).toBe(200);
    expect((await other.inject({ method: 'POST', url: '/echo/invoke', payload: { input: { name: 'b' } } })).statusCode).toBe(200);
    const theirs = (await other.inject('/metrics')).body;
    const ours = await scrape();
    expect(sampleValue(theirs, 'runnel_requests_total', { chain: '/echo', endpoint: 'invoke', status: '200' })).toBe(2);
    expect(sampleValue(ours, 'runnel_requests_total', { chain: '/echo', endpoint: 'invoke', status: '200' })).toBe(1);
    for (const body of [theirs, ours]) expect(sampleValue(body, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    await other.close();
    for (let i = 0; i < 3; i++) {
      const extra = await buildApp({ chains: [echo] as ChainSpec<never, unknown>[] });
      expect((await extra.inject('/metrics')).statusCode).toBe(200);
      await extra.close();
    }
    // Five apps so far: one event-loop monitor and one GC observer (none when an earlier file of this process started them).
    expect(monitors.mock.calls.length).toBeLessThanOrEqual(1);
    expect(gcObservers()).toBeLessThanOrEqual(1);
  });
});
