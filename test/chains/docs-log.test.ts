/**
 * A probe: a row of the docs collection changed by hand past the size a store reads was skipped with its
 * warning on stderr (a process warning, `(node:123) RunnelWarning: …`), outside the server's JSON log where an
 * operator's log shipper looks. It is now a log line of the server's, as every other stored record is.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, expect, it } from 'vitest';
import { createChains } from '../../chains/index.js';
import { buildApp, connectServices } from '../../src/index.js';
import { jsonLogLines } from '../support/log-lines.js';

const ADMIN_URL = process.env.RUNNEL_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/runnel_test';
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

it("logs a docs passage skipped as oversized in the server's log, not as a process warning", async () => {
  // A database of its own: the docs collection has one name in every deployment.
  const database = `runnel_docs_log_${randomUUID().replaceAll('-', '')}`;
  const admin = new pg.Pool({ connectionString: ADMIN_URL });
  await admin.query(`CREATE DATABASE ${database}`);
  cleanups.push(async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  });
  const url = new URL(ADMIN_URL);
  url.pathname = `/${database}`;
  const services = await connectServices({ databaseUrl: url.toString() });
  const { lines, stream } = jsonLogLines();
  const { chains, docs } = createChains({ services, env: {}, offlineDelayMs: 0 });
  const app = await buildApp({ chains, services, logger: { level: 'warn', stream } });
  cleanups.push(() => app.close());
  await docs.seed();
  const warnings: Error[] = [];
  const onWarning = (warning: Error): void => void warnings.push(warning);
  process.on('warning', onWarning);
  cleanups.push(async () => void process.off('warning', onWarning));

  const ask = async (): Promise<{ id: string }[]> => {
    const res = await app.inject({ method: 'POST', url: '/rag/invoke', payload: { input: { question: 'How is chat history stored?' } } });
    expect(res.statusCode).toBe(200);
    return (res.json() as { output: { sources: { id: string }[] } }).output.sources;
  };
  const [top] = await ask();
  if (top === undefined) throw new Error('no source');
  const db = new pg.Client({ connectionString: url.toString() });
  await db.connect();
  cleanups.push(() => db.end());
  const { rowCount } = await db.query(`UPDATE runnel_embeddings_384 SET metadata = jsonb_build_object('source', repeat('S', 2000000)) WHERE collection = 'docs' AND id = $1`, [top.id]);
  expect(rowCount).toBe(1);

  expect((await ask()).map((source) => source.id)).not.toContain(top.id);
  expect(lines.find((line) => line.msg === 'stored record not valid')).toMatchObject({ level: 40, code: 'RUNNEL_ERR_STORED_RECORD_INVALID', collection: 'docs', ids: [top.id] });
  expect(warnings.filter((warning) => warning.name === 'RunnelWarning')).toEqual([]);
}, 60_000);
