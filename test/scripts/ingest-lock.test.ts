/**
 * Issue 14: `npm run ingest` against the embedded database while a server has
 * it open used to print "added 3" and lose the documents. One process per
 * data directory: the second is refused with what to do, and what ingest
 * reports as added is there for the server that opens the directory next.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { connectServices, HashingEmbeddings, PgVectorStore } from '../../src/index.js';
import { lockDataDir } from '../../src/server/data-dir-lock.js';
import { ingestCli } from '../support/ingest-cli.js';

/** Runs the ingest CLI as a user would, in its own process. */
const runIngest = (dataDir: string, paths: string[]) => ingestCli([...paths, '--collection', 'docs'], { RUNNEL_DATA_DIR: dataDir, DATABASE_URL: '' });

function corpus(): string {
  const dir = mkdtempSync(join(tmpdir(), 'runnel-kb-'));
  writeFileSync(join(dir, 'a.md'), '# Alpha\n\nThe alpha service keeps its queue in Redis.');
  writeFileSync(join(dir, 'b.md'), '# Beta\n\nThe beta service answers within a second.');
  writeFileSync(join(dir, 'c.md'), '# Gamma\n\nThe gamma service writes its logs as JSON.');
  return dir;
}

describe('the data directory lock', () => {
  it('refuses a second live process, naming it, and takes over a stale lock', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runnel-lock-'));
    const other: ChildProcess = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)']);
    try {
      writeFileSync(join(dir, 'runnel.lock'), JSON.stringify({ pid: other.pid, role: 'server' }));
      expect(() => lockDataDir(dir, 'ingest')).toThrow(new RegExp(`pid ${other.pid}, server\\).*Stop the server`));
    } finally {
      other.kill();
      await new Promise((resolve) => other.once('exit', resolve));
    }
    // Its process is gone now: the lock is stale and taken over.
    const lock = lockDataDir(dir, 'ingest');
    lock.release();
    lockDataDir(dir, 'server').release();
  });

  it('ingest while a server holds the embedded database adds nothing and says what to do; afterwards it adds, and nothing is lost', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'runnel-data-'));
    const kb = corpus();
    const server = await connectServices({ dataDir });
    const open = async () => PgVectorStore.create({ executor: await server.sql(), embeddings: new HashingEmbeddings(), collection: 'docs' });
    expect(await (await open()).count()).toBe(0);

    const refused = await runIngest(dataDir, [kb]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).not.toMatch(/added/);
    expect(refused.stderr).toContain('nothing added');
    expect(refused.stderr).toContain(`pid ${process.pid}, server`);

    await server.close();
    const accepted = await runIngest(dataDir, [kb]);
    expect(accepted.code).toBe(0);
    const added = Number(/added (\d+)/.exec(accepted.stdout)?.[1]);
    expect(added).toBe(3);

    // The next server sees every chunk ingest reported.
    const next = await connectServices({ dataDir });
    try {
      const store = await PgVectorStore.create({ executor: await next.sql(), embeddings: new HashingEmbeddings(), collection: 'docs' });
      expect(await store.count()).toBe(added);
    } finally {
      await next.close();
    }
  }, 120_000);
});
