/**
 * `RUNNEL_PROCESSES`: `npm start` as several server processes on one port
 * (node:cluster), sharing Redis and Postgres. Real processes: both serve, a
 * killed one is replaced while the other keeps answering, SIGTERM drains them
 * all and exits 0, and the embedded defaults are refused with a reason.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { settleWithin } from '../helpers.js';

const root = new URL('../..', import.meta.url).pathname;
const DATABASE_URL = process.env.RUNNEL_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/runnel_test';
const REDIS_URL = process.env.RUNNEL_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

function start(env: Record<string, string>): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server/main.ts'], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', RUNNEL_RUN_NAMESPACE: `cluster-${process.pid}`, ...env },
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return { child, output: () => output };
}

async function until<T>(what: () => T | undefined, ms = 60_000): Promise<T> {
  return settleWithin(
    (async () => {
      for (;;) {
        const value = what();
        if (value !== undefined) return value;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })(),
    ms,
  );
}

/** The pids of the processes that logged that they serve, and the port they share. */
function serving(output: string): { pids: Set<number>; port: number | undefined } {
  const pids = new Set<number>();
  let port: number | undefined;
  for (const line of output.split('\n')) {
    if (!line.includes('"msg":"index: ')) continue;
    const entry = JSON.parse(line) as { pid: number; msg: string };
    pids.add(entry.pid);
    port = Number(/:(\d+)\/$/.exec(entry.msg)?.[1]);
  }
  return { pids, port };
}

/** The JSON log line whose message is `msg`; undefined when there is none (or the line is not JSON). */
function logLine(output: string, msg: string): Record<string, unknown> | undefined {
  for (const line of output.split('\n')) {
    if (!line.startsWith('{')) continue;
    const entry = JSON.parse(line) as Record<string, unknown>;
    if (entry.msg === msg) return entry;
  }
  return undefined;
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** The children of `pid` (from /proc). */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

describe('RUNNEL_PROCESSES', () => {
  it('serves one port from two processes, replaces a killed one, and drains them all on SIGTERM', async () => {
    const { child, output } = start({ RUNNEL_PROCESSES: '2', REDIS_URL, DATABASE_URL });
    try {
      const first = await until(() => {
        const state = serving(output());
        return state.pids.size === 2 ? state : undefined;
      });
      const base = `http://127.0.0.1:${first.port}`;
      expect(childrenOf(child.pid as number).sort()).toEqual([...first.pids].sort());
      // New connections are dealt to the processes in turn: both answer (their request logs carry their pids).
      const invoke = () => fetch(`${base}/joke/invoke`, { method: 'POST', headers: { 'content-type': 'application/json', connection: 'close' }, body: JSON.stringify({ input: { topic: 'cats' } }) });
      const answers = await Promise.all(Array.from({ length: 21 }, invoke));
      expect(answers.map((r) => r.status)).toEqual(Array(21).fill(200));
      const answeredBy = new Set(
        output()
          .split('\n')
          .filter((line) => line.includes('"url":"/joke/invoke"'))
          .map((line) => (JSON.parse(line) as { pid: number }).pid),
      );
      expect(answeredBy).toEqual(first.pids);
      // A scrape, whichever process takes it, reads the whole server: the 21 requests of both (it read one
      // process's own, so Prometheus saw the counter jump between the two).
      for (let i = 0; i < 4; i++) {
        const metrics = await (await fetch(`${base}/metrics`, { headers: { connection: 'close' } })).text();
        expect(/^runnel_requests_total\{chain="\/joke",endpoint="invoke",status="200"\} (\d+)$/m.exec(metrics)?.[1]).toBe('21');
        expect(metrics).toMatch(/^process_resident_memory_bytes \d+/m);
        // The newest process's start (prom-client's sum leaves the series out).
        expect(metrics).toMatch(/^process_start_time_seconds \d+/m);
      }

      // A process killed outright is replaced; the other keeps serving meanwhile.
      const [victim, survivor] = [...first.pids] as [number, number];
      process.kill(victim, 'SIGKILL');
      await until(() => (alive(victim) ? undefined : true));
      expect((await invoke()).status).toBe(200);
      const replaced = await until(() => {
        const pids = serving(output()).pids;
        return pids.size === 3 ? pids : undefined;
      });
      // The supervisor's lines are JSON log lines, as the servers' are (one stream for a log collector).
      expect(logLine(output(), `runnel: server process ${victim} stopped (SIGKILL); starting another`)).toMatchObject({ level: 40, pid: child.pid });
      expect(logLine(output(), 'runnel: serving with 2 processes')).toMatchObject({ level: 30, pid: child.pid });
      const replacement = [...replaced].find((pid) => !first.pids.has(pid)) as number;
      expect(childrenOf(child.pid as number).sort()).toEqual([survivor, replacement].sort());
      expect((await invoke()).status).toBe(200);

      const code = new Promise<number | null>((resolve) => child.on('exit', resolve));
      child.kill('SIGTERM');
      expect(await settleWithin(code, 30_000)).toBe(0);
      expect(alive(survivor) || alive(replacement)).toBe(false);
      expect(logLine(output(), 'runnel: SIGTERM: stopping 2 server processes')).toMatchObject({ level: 30 });
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }, 120_000);

  it('stops with exit 0 on SIGTERM while its processes are still starting', async () => {
    const { child, output } = start({ RUNNEL_PROCESSES: '2', REDIS_URL, DATABASE_URL });
    await until(() => (output().includes('runnel: serving with 2 processes') ? true : undefined));
    const code = new Promise<number | null>((resolve) => child.on('exit', resolve));
    child.kill('SIGTERM');
    expect(await settleWithin(code, 30_000)).toBe(0);
  }, 60_000);

  it('refuses several processes on the embedded defaults, naming what they need', async () => {
    const { child, output } = start({ RUNNEL_PROCESSES: '2', DATABASE_URL });
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(1);
    expect(output()).toContain('RUNNEL_PROCESSES: 2 processes need REDIS_URL');
    const bad = start({ RUNNEL_PROCESSES: 'many' });
    expect(await new Promise<number | null>((resolve) => bad.child.on('exit', resolve))).toBe(1);
    expect(bad.output()).toContain('RUNNEL_PROCESSES must be a whole number from 1 to 256, or auto');
  }, 60_000);

  it('stops, exit 1, when a process cannot start (the port is taken)', async () => {
    const { createServer } = await import('node:net');
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as { port: number };
    try {
      const { child, output } = start({ RUNNEL_PROCESSES: '2', REDIS_URL, DATABASE_URL, PORT: String(port) });
      const code = await settleWithin(new Promise<number | null>((resolve) => child.on('exit', resolve)), 60_000);
      expect(code).toBe(1);
      expect(output()).toContain(`runnel: cannot listen: port ${port} is in use (set PORT)`);
      expect(output()).toContain('runnel: a server process failed to start (exit code 1); stopping');
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
  }, 60_000);

  /** test/support/cluster-metrics.ts in `mode`, and what it prints. */
  function metricsCluster(mode: string): { child: ChildProcess; output: () => string } {
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/cluster-metrics.ts'], { cwd: root, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', CLUSTER_MODE: mode } });
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    return { child, output: () => output };
  }

  it('sums no short total: a process that does not hand in its series makes the scrape incomplete', async () => {
    const { child, output } = metricsCluster('slow');
    try {
      expect(await until(() => /sum: (.*)/.exec(output())?.[1])).toBe('incomplete');
    } finally {
      child.kill('SIGKILL');
    }
  }, 60_000);

  it('asks nobody under another cluster manager (processes node:cluster forked directly)', async () => {
    const { child, output } = metricsCluster('foreign');
    try {
      expect(await until(() => /sum: (.*)/.exec(output())?.[1])).toBe('undefined');
      await until(() => (child.exitCode === null ? undefined : true));
      // It asked nothing (before, it asked, and waited 2 s on every scrape for an answer that never came).
      expect(output()).not.toContain('heard');
    } finally {
      child.kill('SIGKILL');
    }
  }, 60_000);

  it('keeps the first process up when a process dies while its metrics are being summed', async () => {
    const { child, output } = metricsCluster('dies');
    try {
      await until(() => (output().includes('stopped (SIGKILL); starting another') ? true : undefined));
      // The sum's wait for the dead process's series ends (2 s) and its answer goes nowhere: the first process
      // stays up (a message to the closed channel was an unhandled 'error' event, and it exited).
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      expect(child.exitCode, output()).toBeNull();
      const code = new Promise<number | null>((resolve) => child.on('exit', resolve));
      child.kill('SIGTERM');
      expect(await settleWithin(code, 30_000)).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }, 60_000);
});
