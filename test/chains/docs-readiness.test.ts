/**
 * Issue 14: `/readyz` said ready before the docs collection was seeded (the
 * first `/rag` found nothing), and with a Postgres lacking pgvector it said
 * ready while every `/rag` answered a generic 500. Readiness now includes the
 * seed, `/rag` asked during the seed is a retryable 503, and a missing
 * pgvector is a 503 with its own code that names it.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createChains } from '../../chains/index.js';
import { buildApp, connectServices, type Services } from '../../src/index.js';

const ADMIN_URL = process.env.RUNNEL_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/runnel_test';
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

/** The shipped chains on `services`, with /readyz waiting for the docs collection as `npm start` sets it up. */
async function serve(services: Services): Promise<{ app: FastifyInstance; docs: ReturnType<typeof createChains>['docs'] }> {
  const { chains, docs } = createChains({ services, env: {}, offlineDelayMs: 0 });
  services.checks.set('docs', async () => docs.ready);
  const app = await buildApp({ chains, services });
  cleanups.push(() => app.close());
  return { app, docs };
}

const ask = (app: FastifyInstance) =>
  app.inject({ method: 'POST', url: '/rag/invoke', headers: { 'content-type': 'application/json' }, payload: { input: { question: 'How is chat history stored?' } } });

describe('readiness and the docs collection', () => {
  it('is not ready on a fresh data directory until the docs collection is seeded; then /rag quotes sources', async () => {
    const services = await connectServices({ dataDir: mkdtempSync(join(tmpdir(), 'runnel-ready-')) });
    const { app, docs } = await serve(services);
    const before = await app.inject('/readyz');
    expect(before.statusCode).toBe(503);
    expect(before.json()).toMatchObject({ status: 'not ready', checks: { docs: false } });
    const seeded = new Promise<void>((resolve, reject) => docs.seedInBackground({ seeded: () => resolve(), failed: reject }));
    // Asked while the seed fills the collection: a retryable 503 that says so (a trial got 200 and "no passage
    // found", which a client cannot tell from a real answer).
    // Read by a real client (Node's fetch) over a socket.
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    const early = await fetch(`${url}/rag/invoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { question: 'How is chat history stored?' } }) });
    expect(early.status).toBe(503);
    expect(await early.json()).toMatchObject({ code: 'RUNNEL_ERR_COLLECTION_NOT_READY' });
    expect(early.headers.get('retry-after')).toBe('1');
    await seeded;
    const after = await app.inject('/readyz');
    expect(after.statusCode).toBe(200);
    expect(after.json()).toMatchObject({ status: 'ready', checks: { docs: true } });
    const answer = (await ask(app)).json() as { output: { sources: unknown[] } };
    expect(answer.output.sources.length).toBeGreaterThan(0);
    // A restart (another process on the filled collection): its seed only brings it up to date, and /rag serves
    // meanwhile (a review: every restart and replica answered 503 for its whole seed).
    const again = await serve(services);
    const resynced = new Promise<void>((resolve, reject) => again.docs.seedInBackground({ seeded: () => resolve(), failed: reject }));
    const during = await ask(again.app);
    expect(during.statusCode).toBe(200);
    expect((during.json() as { output: { sources: unknown[] } }).output.sources.length).toBeGreaterThan(0);
    await resynced;
  }, 60_000);

  it('with a Postgres that lacks pgvector for this user: /rag is 503 RUNNEL_ERR_VECTOR_EXTENSION_MISSING naming it, /readyz is 503', async () => {
    const suffix = `${process.pid}_${Date.now()}`;
    const database = `runnel_novector_${suffix}`;
    const role = `runnel_novector_${suffix}`;
    const admin = new pg.Pool({ connectionString: ADMIN_URL });
    await admin.query(`CREATE ROLE ${role} LOGIN`);
    await admin.query(`CREATE DATABASE ${database} OWNER ${role}`);
    cleanups.push(async () => {
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await admin.query(`DROP ROLE IF EXISTS ${role}`);
      await admin.end();
    });
    const url = new URL(ADMIN_URL);
    url.username = role;
    url.pathname = `/${database}`;
    const services = await connectServices({ databaseUrl: url.toString() });
    cleanups.push(() => services.close());
    const { app, docs } = await serve(services);

    const failed = new Promise<unknown>((resolve) => {
      const seeding = docs.seedInBackground({ seeded: () => resolve(undefined), failed: (error) => resolve(error) }, 60_000);
      cleanups.push(async () => seeding.stop());
    });
    expect(await failed).toMatchObject({ code: 'RUNNEL_ERR_VECTOR_EXTENSION_MISSING' });
    const res = await ask(app);
    expect(res.statusCode).toBe(503);
    const body = res.json() as { code: string; message: string };
    expect(body.code).toBe('RUNNEL_ERR_VECTOR_EXTENSION_MISSING');
    expect(body.message).toMatch(/pgvector/);
    expect(body.message).toMatch(/CREATE EXTENSION vector/);
    const ready = await app.inject('/readyz');
    expect(ready.statusCode).toBe(503);
    expect(ready.json()).toMatchObject({ checks: { postgres: true, docs: false } });
  }, 60_000);
});
