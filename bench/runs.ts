/**
 * `npm run bench:runs`: durable runs on one Redis, real server processes on 127.0.0.1.
 *
 * 1. Events per second of `/stream` with `on_disconnect: "continue"` (stored run + Redis Stream log)
 *    against plain `/stream`, on the same chain (200 words, no delay), 20 streams at a time for 4 s each,
 *    alternating (goal ≥ 0.8×); and the server's CPU per event of each.
 * 2. Time from a reconnect with `Last-Event-ID` to the first replayed frame, 300 times (goal p99 ≤ 50 ms).
 * 3. No-op runs through the queue per second, end to end (submitted over HTTP, all ended), with the
 *    workers inside the server and with a separate worker process (goal ≥ 1,000/s); and with the workers
 *    inside the server under `RUNNEL_MAX_RUNS_PER_KEY` (its count in Redis, and the ended runs let go
 *    each time the caller reaches the limit: 2,000, a round's runs).
 *
 * Medians of 3 rounds; the machine is noisy. Traffic only to 127.0.0.1, bounded in count.
 */
import { randomUUID } from 'node:crypto';
import { benchHeaders as headers, eventsPerSecond, forgetNamespaces, median, serverCpuSeconds, startRunServer as start, stopRunServers } from './processes.js';

const percentile = (values: number[], p: number): number => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))] as number;

/**
 * Events per second of `/fast/stream`, plain or durable, and the server's CPU per event (from /proc: the
 * server's own work, which the load generator and Redis on the same cores do not blur as they blur events/s).
 */
async function streamRate(base: string, durable: boolean, seconds?: number): Promise<{ perSecond: number; cpuNs: number }> {
  const before = serverCpuSeconds(base);
  const { perSecond, events } = await eventsPerSecond(`${base}/fast/stream`, () => ({ input: { topic: randomUUID() }, ...(durable ? { on_disconnect: 'continue' } : {}) }), 'event: data', { seconds });
  return { perSecond, cpuNs: ((serverCpuSeconds(base) - before) * 1e9) / Math.max(1, events) };
}

async function reconnectLatencies(base: string, count = 300): Promise<number[]> {
  const submitted = (await (await fetch(`${base}/fast/runs`, { method: 'POST', headers, body: JSON.stringify({ input: { topic: 'replay' } }) })).json()) as { run_id: string };
  await fetch(`${base}/fast/runs/${submitted.run_id}/wait`, { headers });
  const body = await (await fetch(`${base}/fast/runs/${submitted.run_id}/stream`, { headers })).text();
  const ids = [...body.matchAll(/^id: (.*)$/gm)].map((m) => m[1] as string);
  const latencies: number[] = [];
  for (let i = 0; i < count; i++) {
    const after = ids[i % (ids.length - 1)] as string;
    const t0 = performance.now();
    const res = await fetch(`${base}/fast/runs/${submitted.run_id}/stream`, { headers: { ...headers, 'last-event-id': after } });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let seen = '';
    while (!seen.includes('\r\n\r\n')) seen += new TextDecoder().decode((await reader.read()).value);
    latencies.push(performance.now() - t0);
    await reader.cancel();
  }
  return latencies;
}

async function runsPerSecond(base: string, count = 2000, concurrency = 50): Promise<number> {
  const ids: string[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const n = next++;
        const run = (await (await fetch(`${base}/noop/runs`, { method: 'POST', headers, body: JSON.stringify({ input: { n } }) })).json()) as { run_id: string };
        ids.push(run.run_id);
      }
    }),
  );
  let waited = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (waited < ids.length) {
        const id = ids[waited++] as string;
        const record = (await (await fetch(`${base}/noop/runs/${id}/wait?timeout_s=120`, { headers })).json()) as { status: string };
        if (record.status !== 'success') throw new Error(`run ${id} ended ${record.status}`);
      }
    }),
  );
  return count / ((performance.now() - started) / 1000);
}

const namespaces = [`bench-${randomUUID()}`, `bench-${randomUUID()}`, `bench-${randomUUID()}`];
try {
  const inProcess = (await start({ RUNNEL_RUN_NAMESPACE: namespaces[0] as string })) as string;
  const separateNs = namespaces[1] as string;
  const httpOnly = (await start({ RUNNEL_RUN_NAMESPACE: separateNs, RUNNEL_WORKER_CONCURRENCY: '0' })) as string;
  await start({ RUNNEL_RUN_NAMESPACE: separateNs, RUNNEL_ROLE: 'worker', RUNNEL_WORKER_CONCURRENCY: '50' });
  const limited = (await start({ RUNNEL_RUN_NAMESPACE: namespaces[2] as string, RUNNEL_MAX_RUNS_PER_KEY: '2000' })) as string;
  await streamRate(inProcess, false, 1);
  await streamRate(inProcess, true, 1);
  const rounds = { plain: [] as number[], durable: [] as number[], plainCpu: [] as number[], durableCpu: [] as number[], p50: [] as number[], p99: [] as number[], inProc: [] as number[], separate: [] as number[], limited: [] as number[] };
  for (let round = 1; round <= 3; round++) {
    const plain = await streamRate(inProcess, false);
    const durable = await streamRate(inProcess, true);
    rounds.plain.push(plain.perSecond);
    rounds.durable.push(durable.perSecond);
    rounds.plainCpu.push(plain.cpuNs);
    rounds.durableCpu.push(durable.cpuNs);
    const latencies = await reconnectLatencies(inProcess);
    rounds.p50.push(percentile(latencies, 0.5));
    rounds.p99.push(percentile(latencies, 0.99));
    rounds.inProc.push(await runsPerSecond(inProcess));
    rounds.separate.push(await runsPerSecond(httpOnly));
    rounds.limited.push(await runsPerSecond(limited));
    console.log(`round ${round}: /stream ${rounds.plain.at(-1)?.toFixed(0)} ev/s (${plain.cpuNs.toFixed(0)} ns CPU/event), durable ${rounds.durable.at(-1)?.toFixed(0)} ev/s (${durable.cpuNs.toFixed(0)} ns), ratio ${(durable.perSecond / plain.perSecond).toFixed(2)}×, reconnect p50 ${rounds.p50.at(-1)?.toFixed(1)} p99 ${rounds.p99.at(-1)?.toFixed(1)} ms, runs/s in-process ${rounds.inProc.at(-1)?.toFixed(0)}, separate ${rounds.separate.at(-1)?.toFixed(0)}, with a per-key limit ${rounds.limited.at(-1)?.toFixed(0)}`);
  }
  const ratio = median(rounds.durable) / median(rounds.plain);
  console.log('\nMedians of 3 rounds:\n');
  console.log('| measure | value | goal |\n|---|---:|---|');
  console.log(`| plain /stream, events/s | ${median(rounds.plain).toFixed(0)} | |`);
  console.log(`| durable /stream (on_disconnect: continue), events/s | ${median(rounds.durable).toFixed(0)} | |`);
  console.log(`| durable / plain | ${ratio.toFixed(2)}× | ≥ 0.8× ${ratio >= 0.8 ? 'met' : 'MISSED'} |`);
  console.log(`| server CPU per event, plain / durable | ${median(rounds.plainCpu).toFixed(0)} / ${median(rounds.durableCpu).toFixed(0)} ns (durable ${(median(rounds.durableCpu) / median(rounds.plainCpu)).toFixed(2)}× plain's) | |`);
  console.log(`| Last-Event-ID reconnect → first frame, p50 / p99 | ${median(rounds.p50).toFixed(1)} / ${median(rounds.p99).toFixed(1)} ms | p99 ≤ 50 ms ${median(rounds.p99) <= 50 ? 'met' : 'MISSED'} |`);
  console.log(`| no-op runs/s end to end, workers in the server | ${median(rounds.inProc).toFixed(0)} | ≥ 1,000 ${median(rounds.inProc) >= 1000 ? 'met' : 'MISSED'} |`);
  console.log(`| no-op runs/s end to end, a separate worker process | ${median(rounds.separate).toFixed(0)} | ≥ 1,000 ${median(rounds.separate) >= 1000 ? 'met' : 'MISSED'} |`);
  console.log(`| no-op runs/s end to end, workers in the server, RUNNEL_MAX_RUNS_PER_KEY=2000 | ${median(rounds.limited).toFixed(0)} (${(median(rounds.limited) / median(rounds.inProc)).toFixed(2)}× without) | |`);
} finally {
  stopRunServers();
  // The runs of this bench (about 12,000, with their logs) would otherwise stay in Redis for their TTL.
  await forgetNamespaces(namespaces);
}
