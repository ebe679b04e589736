/**
 * `npm run bench:load` (127.0.0.1 only, bounded: about 40 s):
 *
 * 1. 1,000 concurrent SSE streams from the fake model at 20 tokens/s for
 *    15 s each (RUNNEL_MAX_STREAMS 1000): errors, time to first token
 *    p50/p99, the server's event-loop delay p99 — and 50 requests past the
 *    limit, answered 503 (how fast). Goals: zero errors, TTFT p99 ≤ 100 ms,
 *    event-loop delay p99 ≤ 50 ms, 503 in under 100 ms.
 * 2. /invoke on Redis cache hits, 50 connections, 10 s (autocannon), over 500
 *    cached inputs: p99 latency. Goal: ≤ 50 ms.
 *
 * The server runs in this process (its event loop is the one measured); the
 * stream clients run in a child process.
 */
import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import { runnel } from './runnel.js';

const { buildApp, ChatPromptTemplate, defineChain, FakeListChatModel, RedisCache, StringOutputParser } = runnel;

const STREAMS = Number(process.env.BENCH_STREAMS ?? 1000);
const TOKENS = Number(process.env.BENCH_TOKENS ?? 300); // 15 s at 20 tokens/s

async function streams(): Promise<void> {
  const story = Array.from({ length: TOKENS }, (_, i) => `t${i}`).join(' ');
  const model = new FakeListChatModel({ responses: [story], sleepMs: 50 });
  const app = await buildApp({
    chains: [defineChain({ path: '/story', runnable: ChatPromptTemplate.fromMessages([['human', 'A story about {topic}']]).pipe(model).pipe(new StringOutputParser()) })] as never,
    config: { maxStreams: STREAMS, bodyLimit: 1 << 20 },
  });
  // Server-side time to first token: from the request's arrival to the first data frame written to its socket.
  const serverTtft: number[] = [];
  app.addHook('onRequest', (request, reply, done) => {
    const arrived = performance.now();
    const raw = reply.raw;
    const write = raw.write.bind(raw) as (...args: unknown[]) => boolean;
    let seen = false;
    raw.write = ((...args: unknown[]) => {
      if (!seen && typeof args[0] === 'string' && args[0].startsWith('event: data')) {
        seen = true;
        serverTtft.push(performance.now() - arrived);
      }
      return write(...args);
    }) as typeof raw.write;
    done();
  });
  await app.listen({ port: 0, host: '127.0.0.1', backlog: 4096 }); // as npm start listens
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/story/stream`;
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  const started = performance.now();
  // The clients run in BENCH_CLIENTS processes (default 1: on this 2-core machine, two client processes
  // starve the server and measured worse); 50 requests past the limit come from the first.
  const clients = Number(process.env.BENCH_CLIENTS ?? 1);
  const outputs = await Promise.all(
    Array.from({ length: clients }, (_, i) => {
      const share = Math.floor(STREAMS / clients) + (i < STREAMS % clients ? 1 : 0);
      const child = spawn(process.execPath, ['--import', 'tsx', 'bench/load-client.ts', url, String(share), i === 0 ? '50' : '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
      return new Promise<string>((resolve) => child.once('exit', () => resolve(out)));
    }),
  );
  delay.disable();
  const seconds = (performance.now() - started) / 1000;
  await app.close();
  const parts = outputs.map((out) => JSON.parse(out.trim().split('\n').pop() ?? '{}') as Record<string, number | string[]> & { ttft: number[]; overflowMs: number[] });
  const all = (key: 'ttft' | 'overflowMs') => parts.flatMap((p) => p[key]);
  const pct = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((p / 100) * values.length))] ?? NaN;
  const result = {
    errors: parts.reduce((n, p) => n + Number(p.errors), 0),
    errorKinds: [...new Set(parts.flatMap((p) => p.errorKinds as string[]))],
    frames: parts.reduce((n, p) => n + Number(p.frames), 0),
    ttftP50: pct(all('ttft'), 50),
    ttftP99: pct(all('ttft'), 99),
    overflow: parts.reduce((n, p) => n + Number(p.overflow), 0),
    overflow503: parts.reduce((n, p) => n + Number(p.overflow503), 0),
    overflowP50: pct(all('overflowMs'), 50),
    overflowMax: Math.max(...all('overflowMs')),
  };
  console.log(`\n${STREAMS} SSE streams × ${TOKENS} tokens at 20 tokens/s (${seconds.toFixed(1)} s), server on this process, clients in ${clients} others`);
  console.log('| measure | value | goal |');
  console.log('|---|---:|---:|');
  console.log(`| streams with an error | ${result.errors} ${JSON.stringify(result.errorKinds)} | 0 |`);
  console.log(`| data frames received | ${Number(result.frames).toLocaleString('en-US')} | ${(STREAMS * (TOKENS + 0)).toLocaleString('en-US')}+ |`);
  console.log(`| time to first token p50 / p99 | ${Number(result.ttftP50).toFixed(1)} / ${Number(result.ttftP99).toFixed(1)} ms | p99 ≤ 100 ms |`);
  const serverP = (p: number) => [...serverTtft].sort((a, b) => a - b)[Math.min(serverTtft.length - 1, Math.floor((p / 100) * serverTtft.length))] ?? NaN;
  console.log(`| time to first token measured by the server (arrival → first data frame) p50 / p99 | ${serverP(50).toFixed(1)} / ${serverP(99).toFixed(1)} ms | — |`);
  console.log(`| server event-loop delay p50 / p99 / max | ${(delay.percentile(50) / 1e6).toFixed(1)} / ${(delay.percentile(99) / 1e6).toFixed(1)} / ${(delay.max / 1e6).toFixed(1)} ms | p99 ≤ 50 ms |`);
  console.log(`| requests past the limit answered 503 | ${result.overflow503} of ${result.overflow} | all |`);
  console.log(`| their time to 503 p50 / max | ${Number(result.overflowP50).toFixed(1)} / ${Number(result.overflowMax).toFixed(1)} ms | < 100 ms |`);
}

/** How many GETs this Redis has served (INFO commandstats). */
async function redisGets(redis: Redis): Promise<number> {
  const stats = await redis.info('commandstats');
  return Number(/cmdstat_get:calls=(\d+)/.exec(stats)?.[1] ?? 0);
}

async function cacheHits(): Promise<void> {
  const redis = new Redis('redis://127.0.0.1:6379');
  const namespace = `runnel-bench-load:${Date.now()}`;
  const model = new FakeListChatModel({ responses: ['A cached joke.'], sleepMs: 100, cache: new RedisCache({ client: redis, namespace }) });
  const app = await buildApp({
    chains: [defineChain({ path: '/joke', runnable: ChatPromptTemplate.fromMessages([['human', 'A joke about {topic}']]).pipe(model).pipe(new StringOutputParser()) })] as never,
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/joke/invoke`;
  // 500 distinct inputs, all cached first: concurrent requests then mostly ask for different keys, so each is a
  // real Redis lookup (identical concurrent calls would share one lookup, and measure that instead).
  const bodies = Array.from({ length: 500 }, (_, i) => JSON.stringify({ input: { topic: `cache ${i}` } }));
  for (let i = 0; i < bodies.length; i += 100) {
    await Promise.all(bodies.slice(i, i + 100).map((body) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })));
  }
  await new Promise((resolve) => setTimeout(resolve, 200)); // the cache writes are not awaited by the requests
  const lookups = await redisGets(redis);
  let next = 0;
  const result = await autocannon({
    url,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    requests: [{ setupRequest: (request: Record<string, unknown>) => ({ ...request, body: bodies[next++ % bodies.length] }) }],
    connections: 50,
    duration: 10,
  });
  const redisLookups = (await redisGets(redis)) - lookups;
  await app.close();
  const keys = await redis.keys(`${namespace}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
  console.log('\n/invoke on Redis cache hits, 50 connections, 10 s (autocannon)');
  console.log('| measure | value | goal |');
  console.log('|---|---:|---:|');
  console.log(`| requests/s (mean) | ${Math.round(result.requests.average).toLocaleString('en-US')} | — |`);
  console.log(`| latency p50 / p99 | ${result.latency.p50} / ${result.latency.p99} ms | p99 ≤ 50 ms |`);
  console.log(`| non-2xx / errors | ${result.non2xx} / ${result.errors} | 0 |`);
  console.log(`| Redis lookups per request | ${(redisLookups / result.requests.total).toFixed(2)} | — |`);
}

console.log(`node ${process.version}, bench:load`);
const parts = (process.env.BENCH_PARTS ?? 'streams,cache').split(',');
if (parts.includes('streams')) await streams();
if (parts.includes('cache')) await cacheHits();
