import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { HashingEmbeddings, PgVectorStore, pgExecutor } from '../../src/index.js';
import { ingest } from '../../scripts/ingest.js';

const DATABASE_URL = process.env.RUNNEL_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/runnel_test';
const collection = `ingest_${process.pid}_${Date.now()}`;
afterAll(async () => {
  const pool = new pg.Pool({ connectionString: DATABASE_URL });
  await pool.query('DELETE FROM runnel_embeddings_384 WHERE collection = $1', [collection]).catch(() => undefined);
  await pool.query('DELETE FROM runnel_collections WHERE name = $1', [collection]).catch(() => undefined);
  await pool.end();
});

describe('npm run ingest', () => {
  it('loads, splits, embeds and upserts; a second run adds nothing; failures are reported', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runnel-ingest-'));
    writeFileSync(join(dir, 'guide.md'), `# Guide\n\n${'Runnel streams tokens over server-sent events. '.repeat(40)}\n\nDeploy with docker compose.`);
    writeFileSync(join(dir, 'facts.jsonl'), '{"text": "Redis keeps chat history."}\n{"text": "Postgres keeps vectors."}\n');
    const first = await ingest({ paths: [dir, join(dir, 'missing.txt')], collection, chunkSize: 300, overlap: 50, databaseUrl: DATABASE_URL });
    expect(first.added).toBeGreaterThan(4);
    expect(first.failed).toEqual([{ source: join(dir, 'missing.txt'), error: expect.stringMatching(/ENOENT/) }]);
    const second = await ingest({ paths: [dir], collection, chunkSize: 300, overlap: 50, databaseUrl: DATABASE_URL });
    expect(second.added).toBe(0);
    // Chunks repeated within the input are skipped too: the second run skips everything the first saw.
    expect(second.skipped).toBe(first.added + first.skipped);
    const pool = new pg.Pool({ connectionString: DATABASE_URL });
    const store = await PgVectorStore.create({ executor: pgExecutor(pool), embeddings: new HashingEmbeddings(), collection });
    expect(await store.count()).toBe(first.added);
    const [top] = await store.similaritySearch('where is chat history kept? redis', 1);
    expect(top?.pageContent).toBe('Redis keeps chat history.');
    // Named from the folder given on down, not by this machine's absolute path.
    expect(top?.metadata.source).toBe(`${basename(dir)}/facts.jsonl`);
    await pool.end();
  });
});
