/**
 * What the process benchmarks share (`bench:runs`, `bench:frontends`): real
 * Runnel processes of test/support/run-server.ts on 127.0.0.1, and a client
 * that counts a stream's events over a time window, many streams at a time.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';

const root = new URL('..', import.meta.url).pathname;
export const BENCH_KEY = 'bench-key-0123456789abcdef';
export const benchHeaders = { authorization: `Bearer ${BENCH_KEY}`, 'content-type': 'application/json' };
const children: ChildProcess[] = [];
/** The process id behind each server URL started here. */
const pids = new Map<string, number>();

/** Starts a run-server process (its chains: /story, /long, /noop, /fast); its URL, or undefined for a worker. */
export function startRunServer(env: Record<string, string>): Promise<string | undefined> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/run-server.ts'], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', REDIS_URL: 'redis://127.0.0.1:6379', RUNNEL_API_KEYS: `bench:${BENCH_KEY}`, PORT: '0', LOG_LEVEL: 'warn', RUNNEL_MAX_STREAMS: '5000', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  return new Promise((resolve) => {
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const port = /ready (\d+)/.exec(out)?.[1];
      if (port !== undefined) {
        pids.set(`http://127.0.0.1:${port}`, child.pid as number);
        resolve(`http://127.0.0.1:${port}`);
      }
      else if (out.includes('ready worker')) resolve(undefined);
    });
  });
}

/**
 * Deletes what the run servers of a bench left under `namespaces` (their runs and logs would otherwise stay
 * in Redis for their TTL, a day: hundreds of thousands of keys after a few benches, and every later KEYS on
 * that Redis slow).
 */
export async function forgetNamespaces(namespaces: readonly string[]): Promise<void> {
  const redis = new Redis('redis://127.0.0.1:6379');
  try {
    for (const namespace of namespaces) {
      for await (const keys of redis.scanStream({ match: `${namespace}:*`, count: 1000 }) as AsyncIterable<string[]>) if (keys.length > 0) await redis.unlink(...keys);
    }
  } finally {
    redis.disconnect();
  }
}

/** Stops every process started here. */
export function stopRunServers(): void {
  for (const child of children) child.kill('SIGTERM');
}

/**
 * CPU seconds (user + system) the server behind `url` has used so far, from /proc (Linux): a measure of
 * the server's own work per event that the client sharing the machine does not blur.
 */
export function serverCpuSeconds(url: string): number {
  const fields = readFileSync(`/proc/${pids.get(url)}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

export const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;

/** Counts the occurrences of `marker` in a text (without the substrings a split would make). */
function occurrences(text: string, marker: string): number {
  let count = 0;
  for (let at = text.indexOf(marker); at !== -1; at = text.indexOf(marker, at + marker.length)) count++;
  return count;
}

/**
 * Events per second over a window of `seconds`, `concurrency` streams at a time (long enough to outlast
 * warm-up and tails): each stream POSTs `body()` to `url` and counts `marker` in the whole response.
 */
export async function eventsPerSecond(url: string, body: () => unknown, marker: string, options: { seconds?: number; concurrency?: number } = {}): Promise<{ perSecond: number; events: number }> {
  const { seconds = 4, concurrency = 20 } = options;
  let events = 0;
  const started = performance.now();
  const until = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        const res = await fetch(url, { method: 'POST', headers: benchHeaders, body: JSON.stringify(body()) });
        // Read, then added: `events += await …` would read `events` before the await and lose the others' counts.
        const counted = occurrences(await res.text(), marker);
        events += counted;
      }
    }),
  );
  return { perSecond: events / ((performance.now() - started) / 1000), events };
}
