/**
 * `npm run worker` logs as the server does: pino's JSON lines, at LOG_LEVEL
 * (it printed lines of its own making, and ignored LOG_LEVEL).
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = new URL('../..', import.meta.url).pathname;
const DATABASE_URL = process.env.RUNNEL_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/runnel_test';
const REDIS_URL = process.env.RUNNEL_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** Starts `npm run worker`'s entry with `env`, stops it with SIGTERM once it says it runs: its exit code and log lines. */
async function runWorker(env: Record<string, string>): Promise<{ pid: number | undefined; code: number | null; lines: Record<string, unknown>[] }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server/worker.ts'], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', REDIS_URL, RUNNEL_RUN_NAMESPACE: `test-worker-${randomUUID()}`, LOG_LEVEL: 'info', ...env },
  });
  let stdout = '';
  const started = new Promise<void>((resolve) =>
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (stdout.includes('runs at a time')) resolve();
    }),
  );
  const closed = new Promise<number | null>((resolve) => child.on('close', resolve));
  await Promise.race([started, closed]);
  child.kill('SIGTERM');
  const code = await closed;
  const lines = stdout.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as Record<string, unknown>);
  return { pid: child.pid, code, lines };
}

describe('npm run worker', () => {
  it("logs pino's JSON lines (the server's format), and once it says it runs, SIGTERM drains it (exit 0)", async () => {
    const { pid, code, lines } = await runWorker({ DATABASE_URL });
    expect(code).toBe(0);
    expect(lines.find((line) => String(line.msg).includes('runs at a time'))).toMatchObject({ level: 30, pid, hostname: expect.any(String) });
    expect(lines.every((line) => typeof line.level === 'number' && (line.level as number) >= 30)).toBe(true);
    // With the server's database, nothing to warn about.
    expect(lines.filter((line) => line.level === 40)).toEqual([]);
  }, 60_000);

  it("warns at start when it has no DATABASE_URL (its chains would read an embedded database of their own, not the server's), and of a setting it does not read", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'runnel-worker-'));
    try {
      // A setting misspelt is named too: it changes nothing.
      // RUNNEL_PROCESSES is the server's: a warning, not the server's refusal of many processes without Postgres (a probe).
      const { code, lines } = await runWorker({ RUNNEL_DATA_DIR: dataDir, RUNNEL_WORKER_CONCURENCY: '2', RUNNEL_PROCESSES: '2' });
      expect(code).toBe(0);
      expect(lines.filter((line) => line.level === 40).map((line) => line.msg)).toEqual([
        'runnel worker: RUNNEL_WORKER_CONCURENCY is not a Runnel setting and changes nothing: did you mean RUNNEL_WORKER_CONCURRENCY?',
        expect.stringContaining('RUNNEL_PROCESSES is for the HTTP server'),
        expect.stringContaining('no DATABASE_URL'),
      ]);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);

  it('warns at start of RUNNEL_MODEL naming a provider whose API key is not set, as the server does (a probe: every run it took ended in a 502, and nothing said why at start)', async () => {
    const { code, lines } = await runWorker({ DATABASE_URL, RUNNEL_MODEL: 'openai:gpt-4o-mini' });
    expect(code).toBe(0);
    expect(lines.filter((line) => line.level === 40).map((line) => line.msg)).toEqual([
      expect.stringMatching(/^runnel worker: RUNNEL_MODEL=openai:gpt-4o-mini but OPENAI_API_KEY is not set: the provider will refuse every model call/),
    ]);
  }, 60_000);

  // A probe: ioredis's own `[WARN]` lines (a password Redis does not need) went beside the JSON log.
  it("logs its Redis client's warning as a JSON line", async () => {
    const { code, lines } = await runWorker({ DATABASE_URL, REDIS_URL: 'redis://:not-needed@127.0.0.1:6379' });
    expect(code).toBe(0);
    expect(lines.find((line) => String(line.msg).includes('does not require a password'))).toMatchObject({ level: 40 });
  }, 60_000);
});
