import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { HashingEmbeddings, ingestPaths, PgVectorStore } from '../../src/index.js';
import { testDatabases } from './databases.js';

const dbs = testDatabases('ingest_sync');

describe('ingestPaths with sync', () => {
  // A probe: a JSON Lines file emptied and named itself gave no document, so `--sync data.jsonl` removed none of
  // its records' passages (an emptied Markdown file's went), and /rag went on citing them.
  it('removes the passages of a JSON Lines file that holds no record any more', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runnel-ingest-sync-'));
    const file = join(dir, 'data.jsonl');
    try {
      const store = await PgVectorStore.create({ executor: dbs.pglite, embeddings: new HashingEmbeddings(), collection: dbs.collection() });
      writeFileSync(file, '{"text": "Capybaras are the largest rodents."}\n{"text": "Otters hold hands."}\n');
      expect(await ingestPaths(store, [file], { sourceRoot: dir, sync: true })).toMatchObject({ added: 2, failed: [] });
      for (const emptied of ['', '\n\n']) {
        writeFileSync(file, emptied);
        await ingestPaths(store, [file], { sourceRoot: dir, sync: true });
        expect(await store.search('capybaras otters', { k: 4 })).toEqual([]);
        writeFileSync(file, '{"text": "Capybaras are the largest rodents."}\n');
        expect(await ingestPaths(store, [file], { sourceRoot: dir, sync: true })).toMatchObject({ added: 1 });
      }
      writeFileSync(file, '');
      expect(await ingestPaths(store, [file], { sourceRoot: dir, sync: true })).toMatchObject({ removed: 1, failed: [] });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
