/**
 * Postgres stopped and started again, and frozen, on a cluster of our own
 * (initdb on a spare port, with the pgvector the machine has): `/rag`
 * answers 503 with its code while it is down, every other chain is
 * unaffected, `/readyz` says which service is down, and everything recovers
 * when it returns.
 */
import { execFileSync } from 'node:child_process';
import { chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChains } from '../../chains/index.js';
import { buildApp, connectServices, HashingEmbeddings, ingestPaths, PgVectorStore } from '../../src/index.js';
import { freePort, settleWithin } from '../helpers.js';
import { jsonLogLines } from '../support/log-lines.js';

const BIN = '/usr/lib/postgresql/15/bin';
const asRoot = process.getuid?.() === 0;
const dir = mkdtempSync(join(tmpdir(), 'runnel-pg-'));
let port = 0;
let app: FastifyInstance;

/** Runs a PostgreSQL program as the postgres user (the server refuses to run as root). */
function pg(program: string, args: string[]): void {
  const [command, rest] = asRoot ? ['runuser', ['-u', 'postgres', '--', join(BIN, program), ...args]] : [join(BIN, program), args];
  execFileSync(command, rest, { stdio: ['ignore', 'ignore', 'pipe'] });
}
const start = () => pg('pg_ctl', ['-D', join(dir, 'data'), '-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1`, '-l', join(dir, 'log'), '-w', 'start']);
const stop = () => pg('pg_ctl', ['-D', join(dir, 'data'), '-m', 'fast', '-w', 'stop']);

beforeAll(async () => {
  port = await freePort();
  if (asRoot) chownSync(dir, Number(execFileSync('id', ['-u', 'postgres']).toString()), Number(execFileSync('id', ['-g', 'postgres']).toString()));
  pg('initdb', ['-D', join(dir, 'data'), '-A', 'trust', '-U', 'postgres', '--no-sync']);
  start();
  const services = await connectServices({ databaseUrl: `postgres://postgres@127.0.0.1:${port}/postgres` });
  const { chains, docs } = createChains({ services, env: {}, offlineDelayMs: 0 });
  await docs.seed();
  app = await buildApp({ chains, services });
}, 120_000);

afterAll(async () => {
  await app?.close();
  try {
    stop();
  } catch {
    // already stopped
  }
  rmSync(dir, { recursive: true, force: true });
});

const ask = () => app.inject({ method: 'POST', url: '/rag/invoke', payload: { input: { question: 'How is chat history stored?' } } });
const joke = () => app.inject({ method: 'POST', url: '/joke/invoke', payload: { input: { topic: 'outages' } } });

/** The status a request gets once the database is back: asked again (every 100 ms, 50 times at most) until 200. */
async function statusOnceRecovered(request: () => Promise<{ statusCode: number }>): Promise<number> {
  let status = 0;
  for (let i = 0; i < 50 && status !== 200; i++) {
    status = (await request()).statusCode;
    if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return status;
}
describe('Postgres stopped', () => {
  it('/rag answers 503 with its code while other chains answer, then recovers', async () => {
    expect((await ask()).statusCode).toBe(200);
    stop();
    const started = performance.now();
    const down = await ask();
    const elapsed = performance.now() - started;
    expect(down.statusCode).toBe(503);
    expect(down.json()).toMatchObject({ code: 'RUNNEL_ERR_DATABASE_UNAVAILABLE' });
    expect(down.body).not.toMatch(/postgres:\/\/|ECONNREFUSED|stack/);
    // Bounded by the pool's connection timeout (2 s), not by an outage's length; logged for the docs, not asserted.
    console.log(`/rag with Postgres stopped answered 503 in ${elapsed.toFixed(0)} ms`);
    expect((await joke()).statusCode).toBe(200);
    expect((await app.inject({ method: 'POST', url: '/extract/invoke', payload: { input: { text: 'I am Ada' } } })).statusCode).toBe(200);
    const ready = await app.inject({ url: '/readyz' });
    expect(ready.statusCode).toBe(503);
    expect(ready.json()).toMatchObject({ checks: { postgres: false } });

    start();
    expect(await statusOnceRecovered(ask)).toBe(200);
    expect((await app.inject({ url: '/readyz' })).statusCode).toBe(200);
  }, 60_000);

  // A trial: DATABASE_URL naming a database that does not exist answered 500 RUNNEL_ERR_INTERNAL, an unreachable
  // port 503. Both are the database out of reach: 503 with its code, the database's name kept from the client.
  it('a DATABASE_URL naming no database answers 503 with its code, as a stopped server does', async () => {
    const services = await connectServices({ databaseUrl: `postgres://postgres@127.0.0.1:${port}/runnel_no_such_db` });
    const { chains } = createChains({ services, env: {}, offlineDelayMs: 0 });
    const wrong = await buildApp({ chains, services });
    try {
      const response = await wrong.inject({ method: 'POST', url: '/rag/invoke', payload: { input: { question: 'How is chat history stored?' } } });
      expect([response.statusCode, response.json().code]).toEqual([503, 'RUNNEL_ERR_DATABASE_UNAVAILABLE']);
      expect(response.body).not.toContain('runnel_no_such_db');
    } finally {
      await wrong.close();
    }
  }, 60_000);
});

/** The postmaster and its children (the backends holding the pool's connections, the background workers). */
function postgresProcesses(): number[] {
  const postmaster = Number(readFileSync(join(dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);
  const children = execFileSync('pgrep', ['-P', String(postmaster)]).toString().trim().split('\n').map(Number);
  return [postmaster, ...children];
}

describe('Postgres frozen (SIGSTOP)', () => {
  // A trial froze the server: requests that took an open pool connection, and /readyz, got no answer at all
  // (Postgres enforces statement_timeout itself). Each request now ends, with 503, however long it takes.
  it('answers /rag and /readyz 503 on open connections and new ones, serves other chains, then recovers', async () => {
    const services = await connectServices({ databaseUrl: `postgres://postgres@127.0.0.1:${port}/postgres`, statementTimeoutMs: 300 });
    const { chains, docs } = createChains({ services, env: {}, offlineDelayMs: 0 });
    await docs.seed();
    const { lines, stream } = jsonLogLines();
    const frozen = await buildApp({ chains, services, logger: { level: 'warn', stream } });
    const rag = () => frozen.inject({ method: 'POST', url: '/rag/invoke', payload: { input: { question: 'How is chat history stored?' } } });
    try {
      // Connections left open in the pool, for the requests below to take.
      for (const response of await Promise.all([rag(), rag(), rag()])) expect(response.statusCode).toBe(200);
      const processes = postgresProcesses();
      for (const pid of processes) process.kill(pid, 'SIGSTOP');
      try {
        // A hang fails here (and the cluster is woken for the next tests), not at the test's timeout.
        const [ready, ...answers] = await settleWithin(Promise.all([frozen.inject({ url: '/readyz' }), ...Array.from({ length: 6 }, rag)]), 40_000);
        for (const answer of answers) expect([answer.statusCode, answer.json().code]).toEqual([503, 'RUNNEL_ERR_DATABASE_UNAVAILABLE']);
        expect(ready.statusCode).toBe(503);
        expect(ready.json()).toMatchObject({ checks: { postgres: false } });
        expect((await frozen.inject({ method: 'POST', url: '/joke/invoke', payload: { input: { topic: 'ice' } } })).statusCode).toBe(200);
        // Each 503 says why in the log, with the driver's kind of failure and nothing of the connection string.
        const failures = lines.filter((line) => line.msg === 'service unavailable');
        expect(failures).toHaveLength(6);
        for (const line of failures) expect(line).toMatchObject({ level: 40, code: 'RUNNEL_ERR_DATABASE_UNAVAILABLE', service_error: expect.stringMatching(/^(query_timeout|connect_timeout)$/) });
        expect(JSON.stringify(lines)).not.toContain('postgres://');
      } finally {
        for (const pid of processes) process.kill(pid, 'SIGCONT');
      }
      expect(await statusOnceRecovered(rag)).toBe(200);
      expect((await frozen.inject({ url: '/readyz' })).statusCode).toBe(200);
    } finally {
      await frozen.close();
    }
  }, 60_000);
});

describe('Postgres stopped during an ingest', () => {
  // A trial killed Postgres midway through `npm run ingest`: it said "nothing added" with 704 chunks stored,
  // and a slow database left one file with 28 of its 60 chunks.
  it('stops at once, keeps what it stored with every file whole, names the rest, and a second run stores them', async () => {
    const folder = join(dir, 'corpus');
    mkdirSync(folder);
    const section = (file: number, n: number) => `## Part ${n}\n\n${`File ${file} part ${n} holds words of its own, ${'w'.repeat(n + file)}. `.repeat(3)}`;
    for (let file = 1; file <= 6; file++) writeFileSync(join(folder, `f${file}.md`), `# File ${file}\n\n${[1, 2, 3].map((n) => section(file, n)).join('\n\n')}\n`);
    const services = await connectServices({ databaseUrl: `postgres://postgres@127.0.0.1:${port}/postgres` });
    const store = await PgVectorStore.create({ executor: await services.sql(), embeddings: new HashingEmbeddings(), collection: 'ingest_outage' });
    const options = { sourceRoot: folder, batchSize: 4, chunkSize: 200 };
    try {
      let batches = 0;
      const first = await ingestPaths(store, [folder], {
        ...options,
        // Postgres goes away once the first write is done.
        onProgress: (done) => {
          if (done > 0 && ++batches === 1) stop();
        },
      });
      expect(first.stopped).toMatchObject({ code: 'RUNNEL_ERR_DATABASE_UNAVAILABLE' });
      expect(first.added).toBeGreaterThan(0);
      start();
      const counts = async (): Promise<Map<string, number>> => {
        const { rows } = await (await services.sql()).query<{ source: string; n: number }>(
          `SELECT metadata->>'source' AS source, count(*)::int AS n FROM runnel_embeddings_384 WHERE collection = 'ingest_outage' GROUP BY 1`,
        );
        return new Map(rows.map((row) => [row.source, row.n]));
      };
      let stored: Map<string, number> | undefined;
      for (let attempt = 0; attempt < 50 && stored === undefined; attempt++) {
        stored = await counts().catch(async () => void (await new Promise((resolve) => setTimeout(resolve, 100))));
      }
      // What it says it stored is stored.
      expect([...(stored ?? [])].reduce((sum, [, n]) => sum + n, 0)).toBe(first.added);
      const second = await ingestPaths(store, [folder], options);
      expect(second).toMatchObject({ failed: [] });
      expect(second.stopped).toBeUndefined();
      const all = await counts();
      expect(all.size).toBe(6);
      // Several chunks a file, more than a batch holds with its neighbour's: a file could be stored in part.
      expect([...all.values()].every((n) => n > 1)).toBe(true);
      expect(first.added + second.added).toBe([...all.values()].reduce((a, b) => a + b));
      // Each file stored whole by the first run, or not at all; those not stored, and only those, were named.
      for (const [source, n] of stored ?? []) expect([source, n]).toEqual([source, all.get(source)]);
      expect(first.failed.map((failure) => failure.source).sort()).toEqual([...all.keys()].filter((source) => !stored?.has(source)).sort());
    } finally {
      await services.close();
    }
  }, 60_000);
});

