import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { HashingEmbeddings, PgVectorStore, pgExecutor } from '../../src/index.js';
import { ingest, query } from '../../scripts/ingest.js';
import { dropCollections } from '../vectorstores/databases.js';

const root = new URL('../..', import.meta.url).pathname;

/** The ingest CLI as a user runs it, in its own process. */
function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/ingest.ts', ...args], { cwd: root, env: { ...process.env, DATABASE_URL } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const DATABASE_URL = process.env.RUNNEL_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/runnel_test';
const collection = `ingest_${process.pid}_${Date.now()}`;
const sections = `${collection}_md`;
afterAll(async () => {
  const pool = new pg.Pool({ connectionString: DATABASE_URL });
  for (const name of [collection, sections]) await dropCollections(pgExecutor(pool), name);
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

  it('splits Markdown by section, finds passages by hybrid search from the CLI, and --sync removes what an edit took out', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runnel-sections-'));
    const file = join(dir, 'ops.md');
    writeFileSync(file, '# Operations\n\n## Backups\n\nSnapshots run nightly at 02:00 and are kept for 30 days.\n\n## Alerts\n\nPager alerts go to the on-call engineer.\n');
    // Chunks of at most 120 characters: the file as a whole does not fit, so each section is a chunk of its own.
    expect(await ingest({ paths: [dir], collection: sections, databaseUrl: DATABASE_URL, chunkSize: 120 })).toMatchObject({ added: 2, failed: [] });
    const [top] = await query({ query: 'How long are snapshots retained?', collection: sections, databaseUrl: DATABASE_URL });
    expect(top?.document.metadata).toMatchObject({ source: `${basename(dir)}/ops.md`, headings: ['# Operations', '## Backups'], loc: { lines: { from: 1, to: 5 } } });

    const found = await cli(['--query', 'who gets paged?', '--collection', sections, '-k', '1']);
    expect(found.code).toBe(0);
    expect(found.stdout).toMatch(/^1\. .*ops\.md:7-9 {2}score [\d.]+\n {3}# Operations › ## Alerts\n {3}## Alerts Pager alerts go to the on-call engineer\.\n$/);
    const json = await cli(['--query', 'pager alerts', '--collection', sections, '--search', 'lexical', '--json']);
    expect(JSON.parse(json.stdout)[0]).toMatchObject({ type: 'Document', metadata: { headings: ['# Operations', '## Alerts'] }, score: expect.any(Number) });
    const bad = await cli(['--query', 'x', '--collection', sections, '--search', 'fuzzy']);
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringMatching(/search must be one of dense, lexical, hybrid[\s\S]*usage:/)]);
    // A trial: a mistyped collection answered "no passage found", exit 0, and was created empty; --help was an unknown option.
    const typo = `${sections}_typo`;
    const missing = await cli(['--query', 'x', '--collection', typo]);
    expect([missing.code, missing.stderr]).toEqual([1, `ingest: No collection named ${typo}: ingest into it first\n`]);
    await expect(query({ query: 'x', collection: typo, databaseUrl: DATABASE_URL })).rejects.toThrow(`No collection named ${typo}`);
    const help = await cli(['--help']);
    expect([help.code, help.stdout]).toEqual([0, expect.stringMatching(/^usage: npm run ingest/)]);

    // The alerts section is edited: its old passage goes with --sync, and only then.
    writeFileSync(file, '# Operations\n\n## Backups\n\nSnapshots run nightly at 02:00 and are kept for 30 days.\n\n## Alerts\n\nAlerts go to the #ops channel.\n');
    expect(await ingest({ paths: [dir], collection: sections, databaseUrl: DATABASE_URL, chunkSize: 120 })).toMatchObject({ added: 1, removed: 0 });
    const synced = await cli([dir, '--collection', sections, '--chunk-size', '120', '--sync']);
    expect(synced.stdout).toMatch(/added 0, skipped 2 \(already there\), removed 1 \(stale\), failed 0/);
    const left = await query({ query: 'on-call engineer pager', collection: sections, k: 10, databaseUrl: DATABASE_URL });
    expect(left.map((m) => m.document.pageContent).join('\n')).not.toContain('on-call');
    expect(left).toHaveLength(2);
  });
});
