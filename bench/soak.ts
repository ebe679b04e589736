/**
 * `npm run bench:soak` (127.0.0.1 only, bounded in requests and time): does
 * the server's heap stay flat over a long run?
 *
 * For each model — the offline model (no key: the default; no delay between
 * its tokens) and OpenAI through its real SDK against
 * test/support/provider-server.ts — a server process with the shipped chains
 * (bench/soak-server.ts, started with --expose-gc) takes 100,000
 * `/joke/invoke` and 20,000 `/joke/stream` requests, interleaved, 50 at a
 * time; half of the streams are cut by the client — half of those as soon as
 * the response's head arrives (the run is under way: against the provider
 * server this aborts the model's HTTP request), the others after their first
 * `data` frame. Every 10,000 requests the load pauses (nothing in flight) and the
 * server reports its heap after a full GC. Goal: from the end of a
 * 20,000-request warm-up to the end of the run, the heap grows by less than
 * 5 MB (MB = 2^20 bytes here).
 *
 * Inputs: half of the invokes ask about one of 200 recurring topics (cache
 * hits after their first time); the other invokes and every stream but a
 * quarter ask about a topic never seen before, so the model answers and the
 * in-memory response cache (an LRU of 1,000 entries) evicts — the cache is
 * full from the first few thousand requests on, and its bound is part of
 * what is measured. The remaining quarter of the streams replay a recurring topic.
 *
 * BENCH_SOAK_MODELS (offline,openai), BENCH_SOAK_INVOKES (100000),
 * BENCH_SOAK_STREAMS (20000), BENCH_SOAK_CONCURRENCY (50),
 * BENCH_SOAK_SAMPLE_EVERY (10000), BENCH_SOAK_WARMUP (20000),
 * BENCH_SOAK_MAX_SECONDS (300 per model: the load stops there),
 * BENCH_SOAK_SNAPSHOTS=<dir> (heap snapshots after the warm-up and at the end,
 * to compare in Chrome DevTools' Memory tab).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startProviderServer, type ProviderServer } from '../test/support/provider-server.js';
import { type Cut, KeepAliveClient, openStream, type Target } from './soak-client.js';

const env = process.env;
const MODELS = (env.BENCH_SOAK_MODELS ?? 'offline,openai').split(',') as ('offline' | 'openai')[];
const INVOKES = Number(env.BENCH_SOAK_INVOKES ?? 100_000);
const STREAMS = Number(env.BENCH_SOAK_STREAMS ?? 20_000);
const CONCURRENCY = Number(env.BENCH_SOAK_CONCURRENCY ?? 50);
const SAMPLE_EVERY = Number(env.BENCH_SOAK_SAMPLE_EVERY ?? 10_000);
const WARMUP = Number(env.BENCH_SOAK_WARMUP ?? 20_000);
const MAX_SECONDS = Number(env.BENCH_SOAK_MAX_SECONDS ?? 300);
const SNAPSHOTS = env.BENCH_SOAK_SNAPSHOTS;
const HOT_TOPICS = 200;
const GOAL_MB = 5;
const TOTAL = INVOKES + STREAMS;
const MB = 2 ** 20;

type Reply = { type: 'ready'; port: number } | ({ type: 'heap' } & NodeJS.MemoryUsage) | { type: 'snapshot'; path: string };

/** Sends `message` to the server process and waits for its reply of type `type`. */
function ask<T extends Reply['type']>(child: ChildProcess, type: T, message?: unknown): Promise<Extract<Reply, { type: T }>> {
  return new Promise((resolvePromise, reject) => {
    const onMessage = (reply: Reply): void => {
      if (reply.type !== type) return;
      child.off('message', onMessage);
      child.off('exit', onExit);
      resolvePromise(reply as Extract<Reply, { type: T }>);
    };
    const onExit = (code: number | null): void => reject(new Error(`the server process exited (${code}) before answering ${type}`));
    child.on('message', onMessage);
    child.once('exit', onExit);
    if (message !== undefined) child.send(message as object);
  });
}

/** Request `i` of the run: a stream when the streams' share of the requests so far moves up by one. */
function plan(i: number): { kind: 'invoke'; topic: string } | { kind: 'stream'; topic: string; cut: Cut } {
  const streamsBefore = Math.floor((i * STREAMS) / TOTAL);
  if (Math.floor(((i + 1) * STREAMS) / TOTAL) > streamsBefore) {
    const j = streamsBefore;
    if (j % 2 === 0) return { kind: 'stream', topic: `cut stream ${j}`, cut: j % 4 === 0 ? 'head' : 'data' };
    return { kind: 'stream', topic: j % 4 === 1 ? `hot ${j % HOT_TOPICS}` : `fresh stream ${j}`, cut: 'none' };
  }
  const k = i - streamsBefore;
  return { kind: 'invoke', topic: k % 2 === 0 ? `hot ${(k / 2) % HOT_TOPICS}` : `fresh invoke ${k}` };
}

interface Tally {
  invokes: number;
  streamsWhole: number;
  streamsCut: number;
  errors: Map<string, number>;
  firstAnswer: string | undefined;
}

const fail = (tally: Tally, kind: string): void => void tally.errors.set(kind, (tally.errors.get(kind) ?? 0) + 1);

async function request(i: number, client: KeepAliveClient, target: Target, tally: Tally): Promise<void> {
  const step = plan(i);
  const body = JSON.stringify({ input: { topic: step.topic } });
  if (step.kind === 'invoke') {
    const answer = await client.post('/joke/invoke', body).catch((error: Error) => ({ status: 0, body: error.message }));
    if (answer.status !== 200) return fail(tally, `invoke ${answer.status}`);
    tally.firstAnswer ??= answer.body;
    tally.invokes++;
    return;
  }
  const outcome = await openStream(target, '/joke/stream', body, step.cut);
  if (outcome.status !== 200) return fail(tally, `stream ${outcome.status}`);
  if (outcome.failed) return fail(tally, 'stream error frame');
  if (step.cut !== 'none') {
    if (step.cut === 'data' && outcome.frames === 0) return fail(tally, 'cut stream without a data frame');
    tally.streamsCut++;
  } else {
    if (!outcome.ended) return fail(tally, 'stream without an end frame');
    tally.streamsWhole++;
  }
}

interface Sample {
  requests: number;
  heapUsed: number;
  rss: number;
}

/** The least-squares slope of heap over requests, in bytes per request. */
function slope(samples: readonly Sample[]): number {
  const n = samples.length;
  if (n < 2) return NaN;
  const mx = samples.reduce((s, p) => s + p.requests, 0) / n;
  const my = samples.reduce((s, p) => s + p.heapUsed, 0) / n;
  const sxy = samples.reduce((s, p) => s + (p.requests - mx) * (p.heapUsed - my), 0);
  const sxx = samples.reduce((s, p) => s + (p.requests - mx) ** 2, 0);
  return sxy / sxx;
}

/** `/metrics` lines of /joke's requests and of the response cache, shortened. */
async function metrics(target: Target): Promise<string[]> {
  const text = await (await fetch(`http://${target.host}:${target.port}/metrics`)).text();
  return text
    .split('\n')
    .filter((line) => /^runnel_requests_total\{chain="\/joke"/.test(line) || line.startsWith('runnel_model_cache_total{'))
    .map((line) => line.replace(/^runnel_requests_total\{chain="\/joke",endpoint="(\w+)",status="(\d+)"\} /, '$1 $2: ').replace(/^runnel_model_cache_total\{result="(\w+)"\} /, 'cache $1: '));
}

interface Result {
  model: string;
  requests: number;
  seconds: number;
  warm: Sample;
  final: Sample;
  slope: number;
  errors: number;
  stoppedEarly: boolean;
}

async function soak(model: 'offline' | 'openai'): Promise<Result> {
  let provider: ProviderServer | undefined;
  const childEnv: NodeJS.ProcessEnv = { ...process.env };
  delete childEnv.SOAK_OPENAI_KEY;
  delete childEnv.SOAK_OPENAI_BASE_URL;
  if (model === 'openai') {
    provider = await startProviderServer('openai');
    Object.assign(childEnv, { SOAK_OPENAI_KEY: 'sk-test-soak', SOAK_OPENAI_BASE_URL: provider.url });
  }
  const script = fileURLToPath(new URL('./soak-server.ts', import.meta.url));
  const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', script], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], env: childEnv });
  const { port } = await ask(child, 'ready');
  const target: Target = { host: '127.0.0.1', port };
  const clients = Array.from({ length: CONCURRENCY }, () => new KeepAliveClient(target));
  const tally: Tally = { invokes: 0, streamsWhole: 0, streamsCut: 0, errors: new Map(), firstAnswer: undefined };
  const samples: Sample[] = [];
  const snapshot = async (label: string): Promise<void> => {
    if (SNAPSHOTS === undefined) return;
    mkdirSync(SNAPSHOTS, { recursive: true });
    const { path } = await ask(child, 'snapshot', { type: 'snapshot', path: resolve(join(SNAPSHOTS, `soak-${model}-${label}.heapsnapshot`)) });
    console.log(`  heap snapshot: ${path}`);
  };

  console.log(`\n${model}: ${INVOKES.toLocaleString('en-US')} invokes + ${STREAMS.toLocaleString('en-US')} streams (half cut), ${CONCURRENCY} at a time; heap after GC every ${SAMPLE_EVERY.toLocaleString('en-US')} requests`);
  console.log('| requests | heap used after GC | rss | since warm-up |');
  console.log('|---:|---:|---:|---:|');
  let next = 0;
  let loadMs = 0;
  const deadline = performance.now() + MAX_SECONDS * 1000;
  let warm: Sample | undefined;
  const sample = async (): Promise<void> => {
    const { heapUsed, rss } = await ask(child, 'heap', { type: 'heap' });
    const point = { requests: next, heapUsed, rss };
    samples.push(point);
    if (warm === undefined && next >= WARMUP) {
      warm = point;
      await snapshot('warm');
    }
    const since = warm === undefined ? '(warming up)' : `${((heapUsed - warm.heapUsed) / MB).toFixed(2)} MB`;
    console.log(`| ${next.toLocaleString('en-US')} | ${(heapUsed / MB).toFixed(2)} MB | ${(rss / MB).toFixed(0)} MB | ${since} |`);
  };

  await sample();
  while (next < TOTAL && performance.now() < deadline) {
    // One phase: up to the next sampling point, with nothing left in flight at its end.
    const until = Math.min(TOTAL, (Math.floor(next / SAMPLE_EVERY) + 1) * SAMPLE_EVERY);
    const started = performance.now();
    await Promise.all(
      clients.map(async (client) => {
        while (next < until && performance.now() < deadline) await request(next++, client, target, tally);
      }),
    );
    loadMs += performance.now() - started;
    // The provider server records every request; the bench has no use for them.
    if (provider !== undefined) provider.requests.length = 0;
    await sample();
  }
  await snapshot('final');
  const lines = await metrics(target);
  for (const client of clients) client.close();
  const exited = new Promise((resolvePromise) => child.once('exit', resolvePromise));
  child.send({ type: 'close' });
  await exited;
  await provider?.close();

  const final = samples.at(-1) as Sample;
  const from = warm ?? final;
  const errors = [...tally.errors.values()].reduce((a, b) => a + b, 0);
  const seconds = loadMs / 1000;
  console.log(`  answered: ${tally.invokes.toLocaleString('en-US')} invokes, ${tally.streamsWhole.toLocaleString('en-US')} whole streams, ${tally.streamsCut.toLocaleString('en-US')} cut streams; errors: ${errors} ${JSON.stringify(Object.fromEntries(tally.errors))}`);
  console.log(`  an answer: ${(tally.firstAnswer ?? '').slice(0, 140)}`);
  console.log(`  server /metrics: ${lines.join('; ')}`);
  console.log(`  ${(next / seconds).toFixed(0)} requests/s over ${seconds.toFixed(1)} s of load${next < TOTAL ? ` — stopped at BENCH_SOAK_MAX_SECONDS after ${next} requests` : ''}`);
  return { model, requests: next, seconds, warm: from, final, slope: slope(samples.filter((s) => s.requests >= from.requests)), errors, stoppedEarly: next < TOTAL };
}

console.log(`node ${process.version}, bench:soak`);
const results: Result[] = [];
for (const model of MODELS) results.push(await soak(model));

console.log('\n| model | requests | requests/s | heap after warm-up | heap at the end | growth | trend | errors | goal: growth < 5 MB |');
console.log('|---|---:|---:|---:|---:|---:|---:|---:|---|');
for (const r of results) {
  const growth = (r.final.heapUsed - r.warm.heapUsed) / MB;
  console.log(
    `| ${r.model} | ${r.requests.toLocaleString('en-US')}${r.stoppedEarly ? ' (time limit)' : ''} | ${(r.requests / r.seconds).toFixed(0)} | ${(r.warm.heapUsed / MB).toFixed(2)} MB (at ${r.warm.requests.toLocaleString('en-US')}) | ${(r.final.heapUsed / MB).toFixed(2)} MB | ${growth.toFixed(2)} MB | ${r.slope.toFixed(1)} B/request | ${r.errors} | ${growth < GOAL_MB && !r.stoppedEarly ? 'met' : 'NOT met'} |`,
  );
}
