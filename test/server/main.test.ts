/**
 * Issue 14: `npm start` on a busy port printed an uncaught stack trace. It
 * says what is wrong and what to set, and exits 1.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

const root = new URL('../..', import.meta.url).pathname;
const DATABASE_URL = process.env.RUNNEL_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/runnel_test';

/** Servers a case started: stopped after it, also when it timed out waiting (its `finally` never runs then). */
const started = new Set<ChildProcess>();
afterEach(() => {
  for (const child of started) child.kill('SIGKILL');
  started.clear();
});

/**
 * Starts `npm start`'s entry on a free port of 127.0.0.1, with `env` over the test's defaults; `until` resolves
 * with what it has printed once `found` holds of it (and fails if it exits first). Stopped with `stop()`, or
 * after the case.
 */
function startMain(env: Record<string, string>): { until(found: (stdout: string) => boolean): Promise<string>; stderr(): string; stop(): void } {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server/main.ts'], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', PORT: '0', HOST: '127.0.0.1', DATABASE_URL, LOG_LEVEL: 'info', ...env },
  });
  started.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return {
    until: (found) =>
      new Promise<string>((resolve, reject) => {
        const check = (): void => {
          if (found(stdout)) resolve(stdout);
        };
        check();
        child.stdout.on('data', check);
        child.once('close', () => reject(new Error(`exited first:\n${stdout}\n${stderr}`)));
      }),
    stderr: () => stderr,
    stop: () => void child.kill('SIGKILL'),
  };
}

describe('npm start', () => {
  it('on a port in use: one line naming the port and PORT, exit 1, no stack trace', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as { port: number };
    try {
      const child = spawn(process.execPath, ['--import', 'tsx', 'src/server/main.ts'], {
        cwd: root,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', PORT: String(port), HOST: '127.0.0.1', DATABASE_URL, LOG_LEVEL: 'warn' },
      });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.stdout.resume();
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      expect(code).toBe(1);
      expect(stderr).toContain(`runnel: cannot listen: port ${port} is in use (set PORT)`);
      expect(stderr).not.toMatch(/\n\s+at /);
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
  }, 60_000);

  // An operator's trial: with DATABASE_URL naming a database that does not exist, the log said only "The
  // database is unavailable", as when Postgres is down.
  it("on a DATABASE_URL whose database does not exist: the seed's warning gives the SQLSTATE (3D000); the start says where state lives", async () => {
    const url = new URL(DATABASE_URL);
    url.pathname = '/runnel_no_such_database';
    const main = startMain({ DATABASE_URL: url.toString() });
    try {
      const stdout = await main.until((out) => out.includes('not seeded'));
      const line = JSON.parse(stdout.split('\n').find((text) => text.includes('not seeded')) ?? '{}') as Record<string, unknown>;
      expect(line).toMatchObject({ code: 'RUNNEL_ERR_DATABASE_UNAVAILABLE', service_error: '3D000' });
      // The start says where each kind of state lives, background runs included (without Redis: in the process).
      expect(stdout).toContain(
        '"msg":"history: in memory (set REDIS_URL for Redis); background runs: in this process, 8 at a time (set REDIS_URL for a queue every replica and worker shares); vectors: Postgres"',
      );
    } finally {
      main.stop();
    }
  }, 60_000);

  // A new user's probe: with RUNNEL_WORKER_CONCURRENCY=0 on Redis the start said "0 at a time in this process",
  // not that separate workers must run the runs.
  it('with RUNNEL_WORKER_CONCURRENCY=0 on Redis: the start says npm run worker processes run the runs', async () => {
    const main = startMain({ REDIS_URL: 'redis://127.0.0.1:6379', RUNNEL_RUN_NAMESPACE: `runnel-test-start-${process.pid}`, RUNNEL_WORKER_CONCURRENCY: '0' });
    try {
      const stdout = await main.until((out) => out.includes('background runs:'));
      expect(stdout.split('\n').find((text) => text.includes('background runs:'))).toContain(
        'background runs: BullMQ on Redis, none in this process (npm run worker processes run them);',
      );
    } finally {
      main.stop();
    }
  }, 60_000);

  // A probe: with a password in REDIS_URL that Redis does not need, ioredis printed `[WARN] …` lines of its own
  // beside the JSON log, once a connection: the lines a log collector could not read.
  it('with a password Redis does not need: its client\'s warning is a JSON line of the log', async () => {
    const main = startMain({ REDIS_URL: 'redis://:not-needed@127.0.0.1:6379', RUNNEL_RUN_NAMESPACE: `runnel-test-start-${process.pid}` });
    try {
      const stdout = await main.until((out) => out.includes('does not require a password') && out.includes('"msg":"index: '));
      const lines = stdout.split('\n').filter((line) => line !== '');
      for (const line of lines) expect(() => JSON.parse(line) as unknown, line).not.toThrow();
      expect(lines.map((line) => JSON.parse(line) as { level: number; msg: string }).find((line) => line.msg.includes('does not require a password'))).toMatchObject({ level: 40 });
      expect(main.stderr()).not.toContain('[WARN]');
      expect(stdout).not.toContain('not-needed');
    } finally {
      main.stop();
    }
  }, 60_000);

  // A probe: with HOST=:: the log gave http://:::8000/ for the index, the docs and every chain — no client reads it.
  it.each([['::1'], ['::']])('with HOST=%s: the URLs the start logs are ones a client can open', async (host) => {
    const main = startMain({ HOST: host });
    try {
      const stdout = await main.until((out) => /"msg":"index: (\S+)"/.test(out));
      const index = /"msg":"index: (\S+)"/.exec(stdout)?.[1] ?? '';
      const response = await fetch(index, { headers: { accept: 'application/json' } });
      const body = (await response.json()) as { chains?: unknown[] };
      expect(response.status).toBe(200);
      expect(Array.isArray(body.chains)).toBe(true);
    } finally {
      main.stop();
    }
  }, 60_000);

  /** Starts `npm start`'s entry with `env`; its exit code and stderr. */
  function start(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
    return run('src/server/main.ts', { HOST: '127.0.0.1', PORT: '0', DATABASE_URL, LOG_LEVEL: 'warn', ...env });
  }

  /** Runs `entry` (a server's or a worker's) with `env` until it exits; its exit code and stderr. */
  async function run(entry: string, env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
    const child = spawn(process.execPath, ['--import', 'tsx', entry], { cwd: root, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env } });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout.resume();
    // One that started would run until stopped: a bounded wait, then it is stopped and the test fails.
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    clearTimeout(timer);
    return { code, stderr };
  }

  it.each([
    ['a port past 65535', { PORT: '99999' }, 'PORT must be a whole number from 0 to 65535, got "99999"'],
    ['an unknown RUNNEL_MODEL', { RUNNEL_MODEL: 'foo:bar' }, 'RUNNEL_MODEL must be openai:<model>, anthropic:<model> or fake'],
    ['a host name that does not resolve', { HOST: 'no-such-host.invalid' }, 'runnel: cannot listen: host no-such-host.invalid'],
    // ioredis sent SELECT NaN and the start died of its ReplyError's stack.
    ['a REDIS_URL whose database is not a number', { REDIS_URL: 'redis://127.0.0.1:6379/abc' }, 'the database (the path of REDIS_URL) must be a number'],
    // ioredis went on in database 0, among another deployment's keys, and /readyz said ready.
    ['a REDIS_URL naming a database Redis does not have', { REDIS_URL: 'redis://127.0.0.1:6379/99999' }, 'REDIS_URL names a database this Redis does not have (ERR DB index is out of range)'],
    // A probe: ioredis's constructor threw "Invalid URL" (and a URIError for the password) with a stack trace.
    ['a REDIS_URL with a port past 65535', { REDIS_URL: 'redis://127.0.0.1:99999' }, 'REDIS_URL is not a URL ioredis can read'],
    ['a REDIS_URL that is not a URL', { REDIS_URL: 'redis://[127.0.0.1:6379' }, 'REDIS_URL is not a URL ioredis can read'],
    ['a REDIS_URL whose password is broken percent-encoding', { REDIS_URL: 'redis://:pw%zzsecret@127.0.0.1:6379' }, 'REDIS_URL is not a URL ioredis can read'],
    // A probe: the server started, and every query (the docs seed's, every /rag) failed "Invalid URL" for good.
    ['a DATABASE_URL with a port past 65535', { DATABASE_URL: 'postgres://postgres@127.0.0.1:99999/runnel_test' }, 'DATABASE_URL is not a URL node-postgres can read'],
    ['a DATABASE_URL whose password holds an unencoded #', { DATABASE_URL: 'postgres://postgres:pw#secret@127.0.0.1:5432/runnel_test' }, 'DATABASE_URL is not a URL node-postgres can read'],
  ])('on %s: says so in a line, exit 1, no stack trace', async (_case, env, says) => {
    const { code, stderr } = await start(env);
    expect(code).toBe(1);
    expect(stderr).toContain(says);
    expect(stderr).not.toMatch(/\n\s+at /);
    expect(stderr).not.toContain('secret');
  }, 60_000);

  // A probe: a RUNNEL_DATA_DIR that is a file (or a volume the process may not write to) started a server that
  // said "not ready" for good, its docs seed retried for ever, and whose every /rag answered 500.
  it.each([
    ['a file', 'server', (file: string) => file],
    ['a folder under a file', 'server', (file: string) => join(file, 'data')],
    // A review: the worker's chains use an embedded database of their own too.
    ['a file', 'worker', (file: string) => file],
    // Left by a probe: Node's recursive mkdir looped for ever there (mkdir answers ENOENT), the start hung.
    ['under /proc', 'server', () => '/proc/runnel-test-data'],
  ])('without DATABASE_URL, on a RUNNEL_DATA_DIR that is %s, the %s: says so in a line, exit 1, no stack trace', async (_case, role, dir) => {
    const folder = mkdtempSync(join(tmpdir(), 'runnel-data-dir-'));
    const file = join(folder, 'not-a-directory');
    writeFileSync(file, 'x');
    try {
      const env = { HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'warn', RUNNEL_DATA_DIR: dir(file) };
      const { code, stderr } = role === 'server' ? await run('src/server/main.ts', env) : await run('src/server/worker.ts', { ...env, REDIS_URL: 'redis://127.0.0.1:6379' });
      expect(code).toBe(1);
      expect(stderr).toContain(`runnel${role === 'worker' ? ' worker' : ''}: RUNNEL_DATA_DIR ${JSON.stringify(dir(file))} cannot hold the embedded database`);
      expect(stderr).not.toMatch(/\n\s+at /);
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  }, 60_000);

  it.each([
    ['no runs at a time', { RUNNEL_WORKER_CONCURRENCY: '0' }, 'RUNNEL_WORKER_CONCURRENCY must be at least 1 in a worker process'],
    ['a REDIS_URL naming a database Redis does not have', { RUNNEL_WORKER_CONCURRENCY: '2', REDIS_URL: 'redis://127.0.0.1:6379/99999' }, 'REDIS_URL names a database this Redis does not have'],
  ])('npm run worker with %s: says so in a line, exit 1, no stack trace', async (_case, env, says) => {
    const { code, stderr } = await run('src/server/worker.ts', { REDIS_URL: 'redis://127.0.0.1:6379', DATABASE_URL, LOG_LEVEL: 'warn', RUNNEL_RUN_NAMESPACE: 'runnel-test-worker-start', ...env });
    expect(code).toBe(1);
    expect(stderr).toContain(says);
    expect(stderr).not.toMatch(/\n\s+at /);
  }, 60_000);
});
