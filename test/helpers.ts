import { spawn, type ChildProcess } from 'node:child_process';
import { connect, createServer } from 'node:net';
import type { Redis } from 'ioredis';

const ROOT = new URL('..', import.meta.url).pathname;

/** Small helpers shared by tests. */

/** A promise with its resolve and reject exposed. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (error: unknown) => void } {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Resolves after `ms` milliseconds. */
export const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Collects an async iterable into an array. */
export async function toArray<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of iterable) out.push(item);
  return out;
}

/** Rejects when `promise` has not settled within `ms` — a guard against hangs, not a timing assertion. */
export function settleWithin<T>(promise: Promise<T>, ms: number): Promise<T> {
  return Promise.race([
    promise,
    new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`did not settle within ${ms} ms`)), ms)),
  ]);
}

/** A TCP port on 127.0.0.1 that was free a moment ago (for processes the tests start). */
/**
 * Writes `text` to the server at 127.0.0.1:`port` on a connection of its own and resolves with all it sent
 * back, once it has closed the connection (a reset after its answer is ignored).
 */
export function rawExchange(port: number | string, text: string): Promise<string> {
  const socket = connect(Number(port), '127.0.0.1');
  let received = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (received += chunk));
  socket.on('error', () => {});
  const closed = new Promise<string>((resolve) => socket.once('close', () => resolve(received)));
  socket.write(text);
  return closed;
}

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * The keys matching `pattern`, found with SCAN: KEYS walks the whole keyspace in one command, and on a shared
 * Redis holding many keys it outlasts a client's command timeout.
 */
export async function scanKeys(redis: Redis, pattern: string): Promise<string[]> {
  const found = new Set<string>();
  for await (const keys of redis.scanStream({ match: pattern, count: 1000 }) as AsyncIterable<string[]>) for (const key of keys) found.add(key);
  return [...found];
}

/** Resolves once `url` answers 2xx, polling (up to 150 s: two servers starting on a loaded 2-core machine); throws with the process's output when it exits or never answers. */
export async function waitForProcess(url: string, child: ChildProcess, logs: readonly string[]): Promise<void> {
  for (let i = 0; i < 1_500; i++) {
    if (child.exitCode !== null) throw new Error(`process exited (${child.exitCode}):\n${logs.join('')}`);
    if (await fetch(url).then((r) => r.ok, () => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} did not come up:\n${logs.join('')}`);
}

/** A test server script run as its own process (`node --import tsx`), once it has printed "ready <port>". */
export interface ReadyProcess {
  child: ChildProcess;
  /** `http://127.0.0.1:PORT` */
  base: string;
  /** What it has printed to stdout so far. */
  output(): string;
  /** Its exit code, once it exits (listened for from the start). */
  exited: Promise<number | null>;
}

/** Starts `script` (a path from the repository's root) with `env` added, and waits for its "ready <port>" line. */
export async function startReadyProcess(script: string, env: Record<string, string> = {}): Promise<ReadyProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let out = '';
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /ready (\d+)/.exec(out);
      if (match) resolve(Number(match[1]));
    });
    void exited.then((code) => reject(new Error(`${script} exited ${code}:\n${out}`)));
  });
  return { child, base: `http://127.0.0.1:${port}`, output: () => out, exited };
}

/** Stops each process with SIGTERM (its graceful shutdown), then SIGKILL after 10 s; resolves once all exited. */
export async function stopProcesses(children: readonly ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGTERM');
          setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
        }),
    ),
  );
}
