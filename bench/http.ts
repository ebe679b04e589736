/**
 * `npm run bench:http`: HTTP throughput on 127.0.0.1, each server in its own
 * process, one after another, bounded in time. Besides requests or events per
 * second, each row has the server's own CPU time per request or event (from
 * /proc, its processes together): the load generator shares this machine's
 * two cores, and CPU per request is what a server costs whoever drives it.
 *
 * /invoke req/s with autocannon (50 connections): (a) a raw Fastify route
 * computing the 3-step chain with plain functions (the floor), (b) Runnel's
 * /invoke, (c) Fastify + @langchain/core, (d) Express + @langchain/core.
 * SSE, 200 small chunks per request through a 3-step generator sequence, 20
 * clients: Runnel's /stream vs a raw Fastify floor (plain async generators) vs
 * Fastify + @langchain/core — events/s and time to first byte.
 * Goals (issues 4 and 19): /invoke ≥ 0.6× the floor and ≥ 4× Fastify+@langchain/core;
 * SSE ≥ 0.5× the floor's events/s and ≥ 5× @langchain/core. Also: /invoke with two
 * processes (RUNNEL_PROCESSES=2) against one; tracing on against off (issue 17;
 * alone with BENCH_ONLY=tracing); a durable /stream's run log against a plain
 * /stream, on Redis (issue 15).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Agent, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import { eventsPerSecond, forgetNamespaces, median, serverCpuSeconds, startRunServer, stopRunServers } from './processes.js';

const DURATION_S = Number(process.env.BENCH_SECONDS ?? 8);
const PORT = 18_411;

/** An OTLP/HTTP sink for the traced server: reads each export and answers 200, as a collector would. */
async function startOtlpSink(): Promise<{ url: string; exports: () => number; close: () => void }> {
  let exports = 0;
  const sink = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      exports++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(sink.address() as AddressInfo).port}`, exports: () => exports, close: () => sink.close() };
}

let otlpUrl = '';

/** CPU seconds (user + system) of a process and its children (the processes of a cluster), from /proc. */
function treeCpuSeconds(pid: number): number {
  const read = (id: number): number => {
    try {
      const fields = readFileSync(`/proc/${id}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
      return (Number(fields[11]) + Number(fields[12])) / 100;
    } catch {
      return 0;
    }
  };
  let children: number[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    children = [];
  }
  return read(pid) + children.reduce((sum, child) => sum + read(child), 0);
}

/**
 * The servers' file, compiled to JavaScript (packages left as imports) and run with plain `node`, as
 * `npm start` runs Runnel: under a dev loader (tsx) every server here spent 5–8 µs more per request, most
 * of it in garbage collection over the loader's larger heap, which hid a third of the serving layer's cost.
 */
const SERVERS = 'node_modules/.cache/runnel-bench/http-servers.mjs';

async function compileServers(): Promise<void> {
  const { build } = await import('esbuild');
  await build({ entryPoints: ['bench/http-servers.ts'], bundle: true, platform: 'node', format: 'esm', target: 'node20', packages: 'external', outfile: SERVERS, logLevel: 'warning' });
}

/** Starts a server kind; resolves once `readies` processes say `ready`. */
async function startServer(kind: string, readies = 1): Promise<ChildProcess> {
  const child = spawn(process.execPath, [SERVERS, kind, String(PORT)], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, BENCH_OTLP_URL: otlpUrl } });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${kind} did not start`)), 20_000);
    let seen = 0;
    child.stdout?.on('data', (chunk: Buffer) => {
      seen += chunk.toString().split('ready').length - 1;
      if (seen >= readies) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on('exit', (code) => reject(new Error(`${kind} exited with ${code}`)));
  });
  return child;
}

async function stopServer(child: ChildProcess): Promise<void> {
  child.removeAllListeners('exit');
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

async function invokeLoad(pid: number, path: string, input: unknown = 1): Promise<{ rps: number; p50: number; p99: number; errors: number; cpuUs: number }> {
  const options = {
    url: `http://127.0.0.1:${PORT}${path}`,
    method: 'POST' as const,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ input }),
    connections: 50,
    pipelining: 1,
  };
  await autocannon({ ...options, duration: 2 }); // warm-up
  const cpu = treeCpuSeconds(pid);
  const result = await autocannon({ ...options, duration: DURATION_S });
  const cpuUs = ((treeCpuSeconds(pid) - cpu) * 1e6) / Math.max(1, result.requests.total);
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, errors: result.errors + result.non2xx, cpuUs };
}

/** 20 clients repeatedly POSTing to an SSE route for DURATION_S seconds: data frames per second, median time to first byte, server CPU per event. */
async function sseLoad(pid: number, path: string, input: unknown = 1): Promise<{ eventsPerSecond: number; ttfbMs: number; errors: number; cpuNs: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 20 });
  const ttfb: number[] = [];
  let events = 0;
  let errors = 0;
  const one = (): Promise<void> =>
    new Promise((resolve) => {
      const started = performance.now();
      let first = true;
      let tail = '';
      const req = request(`http://127.0.0.1:${PORT}${path}`, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
        if (res.statusCode !== 200) errors++;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (first) {
            ttfb.push(performance.now() - started);
            first = false;
          }
          const text = tail + chunk;
          events += text.split('event: data').length - 1;
          tail = text.slice(-12);
          if (tail.includes('event: data')) tail = tail.slice(tail.lastIndexOf('event: data') + 1);
        });
        res.on('end', () => resolve());
        res.on('error', () => {
          errors++;
          resolve();
        });
      });
      req.on('error', () => {
        errors++;
        resolve();
      });
      req.end(JSON.stringify({ input }));
    });
  const run = async (seconds: number): Promise<number> => {
    events = 0;
    ttfb.length = 0;
    const until = performance.now() + seconds * 1000;
    const started = performance.now();
    await Promise.all(Array.from({ length: 20 }, async () => {
      while (performance.now() < until) await one();
    }));
    return (performance.now() - started) / 1000;
  };
  await run(2); // warm-up
  const cpu = treeCpuSeconds(pid);
  const elapsed = await run(DURATION_S);
  const cpuNs = ((treeCpuSeconds(pid) - cpu) * 1e9) / Math.max(1, events);
  agent.destroy();
  const sorted = [...ttfb].sort((a, b) => a - b);
  return { eventsPerSecond: events / elapsed, ttfbMs: sorted[Math.floor(sorted.length / 2)] ?? NaN, errors, cpuNs };
}

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');

/** Durable and plain /stream events/s on one run server (test/support/run-server.ts, its /fast chain), alternating. */
async function durableAgainstPlain(): Promise<{ ratio: number } | undefined> {
  let base: string | undefined;
  // A namespace of its own, forgotten afterwards: its thousands of durable runs would stay in Redis for a day.
  const namespace = `bench-http-${randomUUID()}`;
  try {
    base = await Promise.race([startRunServer({ RUNNEL_RUN_NAMESPACE: namespace }), new Promise<undefined>((_, reject) => setTimeout(() => reject(new Error('no run server')), 30_000))]);
  } catch {
    base = undefined;
  }
  if (base === undefined) {
    console.log('\n(durable /stream skipped: the run server did not start; is Redis up on 127.0.0.1:6379?)');
    stopRunServers();
    return undefined;
  }
  const rate = async (durable: boolean) => {
    const before = serverCpuSeconds(base);
    const { perSecond, events } = await eventsPerSecond(`${base}/fast/stream`, () => ({ input: { topic: randomUUID() }, ...(durable ? { on_disconnect: 'continue' } : {}) }), 'event: data', { seconds: 4 });
    return { perSecond, cpuNs: ((serverCpuSeconds(base) - before) * 1e9) / Math.max(1, events) };
  };
  const plain: number[] = [];
  const durable: number[] = [];
  const plainCpu: number[] = [];
  const durableCpu: number[] = [];
  await rate(false); // warm-up
  for (let round = 0; round < 3; round++) {
    const p = await rate(false);
    const d = await rate(true);
    plain.push(p.perSecond);
    plainCpu.push(p.cpuNs);
    durable.push(d.perSecond);
    durableCpu.push(d.cpuNs);
  }
  stopRunServers();
  await forgetNamespaces([namespace]);
  console.log('\n| /stream on Redis (run server, 200 words, 20 clients, medians of 3 rounds) | events/s | server CPU ns/event |');
  console.log('|---|---:|---:|');
  console.log(`| plain | ${fmt(median(plain))} | ${fmt(median(plainCpu))} |`);
  console.log(`| durable (on_disconnect: continue) | ${fmt(median(durable))} | ${fmt(median(durableCpu))} |`);
  return { ratio: median(durable) / median(plain) };
}

/**
 * Tracing on against off (issue 17): the 3-step chain and the LLM chain, each served untraced and traced
 * (OTLP/protobuf, batched, every request sampled, to the sink), alternating, 3 rounds; medians.
 */
async function tracingAgainstOff(): Promise<{ chain: number; llm: number }> {
  const rows: Record<string, { rps: number[]; cpu: number[] }> = {};
  const cases = [
    ['3-step chain, tracing off', 'runnel', '/bench/invoke'],
    ['3-step chain, tracing on', 'runnel-traced', '/bench/invoke'],
    ['LLM chain (a 20 ms model), tracing off', 'runnel', '/llm-paced/invoke'],
    ['LLM chain (a 20 ms model), tracing on', 'runnel-traced', '/llm-paced/invoke'],
  ] as const;
  for (let round = 0; round < 3; round++) {
    for (const [name, kind, path] of cases) {
      const server = await startServer(kind);
      try {
        const r = await invokeLoad(server.pid as number, path, path.startsWith('/llm') ? { topic: 'cats' } : 1);
        const row = (rows[name] ??= { rps: [], cpu: [] });
        row.rps.push(r.rps);
        row.cpu.push(r.cpuUs);
      } finally {
        await stopServer(server);
      }
    }
  }
  console.log('\n| /invoke, tracing off and on, 50 connections (medians of 3 alternating rounds) | req/s | rounds | server CPU µs/request |');
  console.log('|---|---:|---|---:|');
  for (const [name, row] of Object.entries(rows)) {
    console.log(`| ${name} | ${fmt(median(row.rps))} | ${row.rps.map(fmt).join(', ')} | ${median(row.cpu).toFixed(1)} |`);
  }
  const ratio = (on: string, off: string): number => median((rows[on] as { rps: number[] }).rps) / median((rows[off] as { rps: number[] }).rps);
  return { chain: ratio(cases[1][0], cases[0][0]), llm: ratio(cases[3][0], cases[2][0]) };
}

async function main(): Promise<void> {
  console.log(`node ${process.version}, ${DURATION_S} s per measurement, 127.0.0.1\n`);
  await compileServers();
  const sink = await startOtlpSink();
  otlpUrl = sink.url;
  const goal = (label: string, value: number, target: number) => console.log(`- ${value >= target ? 'met ' : 'MISSED'} ${label}: ${value.toFixed(2)}× (goal ${target}×)`);
  if (process.env.BENCH_ONLY === 'tracing') {
    const tracing = await tracingAgainstOff();
    console.log('\nGoals:');
    goal('Runnel /invoke with tracing on vs off (at most 15% off)', tracing.chain, 0.85);
    goal('Runnel /invoke of an LLM chain with tracing on vs off (at most 15% off)', tracing.llm, 0.85);
    console.log(`  (${sink.exports()} OTLP exports received)`);
    sink.close();
    return;
  }
  const invoke: Record<string, Awaited<ReturnType<typeof invokeLoad>>> = {};
  for (const [name, kind, path] of [
    ['floor (raw Fastify, plain functions)', 'floor', '/invoke'],
    ['Runnel /invoke', 'runnel', '/bench/invoke'],
    ['Runnel /invoke, 2 processes (RUNNEL_PROCESSES=2)', 'runnel-x2', '/bench/invoke'],
    ['Fastify + @langchain/core', 'fastify-lc', '/invoke'],
    ['Express + @langchain/core', 'express-lc', '/invoke'],
  ] as const) {
    const server = await startServer(kind, kind === 'runnel-x2' ? 2 : 1);
    try {
      invoke[name] = await invokeLoad(server.pid as number, path, path.startsWith('/llm') ? { topic: 'cats' } : 1);
    } finally {
      await stopServer(server);
    }
  }
  console.log('| /invoke, 3-step chain, 50 connections | req/s | p50 ms | p99 ms | server CPU µs/request | errors |');
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const [name, r] of Object.entries(invoke)) console.log(`| ${name} | ${fmt(r.rps)} | ${r.p50} | ${r.p99} | ${r.cpuUs.toFixed(1)} | ${r.errors} |`);

  const sse: Record<string, Awaited<ReturnType<typeof sseLoad>>> = {};
  for (const [name, kind, path] of [
    ['floor (raw Fastify SSE)', 'floor', '/stream'],
    ['Runnel /stream', 'runnel', '/chunks/stream'],
    ['Fastify + @langchain/core', 'fastify-lc', '/stream'],
    ['Runnel /stream, prompt ▸ model ▸ parser (20 tokens)', 'runnel', '/llm/stream'],
  ] as const) {
    const server = await startServer(kind);
    try {
      sse[name] = await sseLoad(server.pid as number, path, path.startsWith('/llm') ? { topic: 'cats' } : 1);
    } finally {
      await stopServer(server);
    }
  }
  console.log('\n| SSE, 200 chunks through a 3-step generator sequence, 20 clients | events/s | median TTFB ms | server CPU ns/event | errors |');
  console.log('|---|---:|---:|---:|---:|');
  for (const [name, r] of Object.entries(sse)) console.log(`| ${name} | ${fmt(r.eventsPerSecond)} | ${r.ttfbMs.toFixed(2)} | ${fmt(r.cpuNs)} | ${r.errors} |`);

  // A durable stream (on_disconnect: continue: queue, Redis Stream log, follow) against a plain one, same
  // process and chain (200 words), alternating, 3 rounds; needs Redis on 127.0.0.1:6379.
  const durable = await durableAgainstPlain();
  const tracing = await tracingAgainstOff();

  const floor = invoke['floor (raw Fastify, plain functions)']!.rps;
  const ours = invoke['Runnel /invoke']!.rps;
  const lc = invoke['Fastify + @langchain/core']!.rps;
  const sseFloor = sse['floor (raw Fastify SSE)']!.eventsPerSecond;
  const sseOurs = sse['Runnel /stream']!.eventsPerSecond;
  const sseLc = sse['Fastify + @langchain/core']!.eventsPerSecond;
  console.log('\nGoals:');
  goal('Runnel /invoke vs the floor', ours / floor, 0.6);
  goal('Runnel /invoke vs Fastify + @langchain/core', ours / lc, 4);
  goal('Runnel SSE events/s vs the floor', sseOurs / sseFloor, 0.5);
  goal('Runnel SSE events/s vs @langchain/core', sseOurs / sseLc, 5);
  const cpuRatio = sse['Fastify + @langchain/core']!.cpuNs / sse['Runnel /stream']!.cpuNs;
  console.log(`  (server CPU per event: @langchain/core ${cpuRatio.toFixed(2)}× Runnel's; the floor ${(sse['floor (raw Fastify SSE)']!.cpuNs / sse['Runnel /stream']!.cpuNs).toFixed(2)}×)`);
  const two = invoke['Runnel /invoke, 2 processes (RUNNEL_PROCESSES=2)']!.rps;
  console.log(`- Runnel /invoke with 2 processes vs 1: ${(two / ours).toFixed(2)}× (the load generator shares the 2 cores)`);
  if (durable !== undefined) goal('durable /stream vs plain /stream on Redis (run-log overhead)', durable.ratio, 0.8);
  goal('Runnel /invoke with tracing on vs off (at most 15% off)', tracing.chain, 0.85);
  goal('Runnel /invoke of an LLM chain with tracing on vs off (at most 15% off)', tracing.llm, 0.85);
  console.log(`  (${sink.exports()} OTLP exports received)`);
  sink.close();
}

await main();
