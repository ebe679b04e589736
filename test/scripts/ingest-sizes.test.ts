/**
 * A new user's probe: `npm run ingest -- mydocs --collection kb --chunk-size 10` (or `--overlap` at least the
 * chunk size) passed the CLI's own check, then the splitter refused it in its option names ("chunkSize must be
 * a whole number of at least 50", "chunkOverlap (200) must be … smaller than chunkSize (100)") after the
 * collection had been made: exit 1, and a later `--query` answered "no passage found" instead of "No
 * collection named kb". Sizes the splitters refuse are now a usage error naming the flag, before anything opens.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ingestCli } from '../support/ingest-cli.js';

const dataDir = mkdtempSync(join(tmpdir(), 'runnel-ingest-sizes-'));
const docs = mkdtempSync(join(tmpdir(), 'runnel-ingest-sizes-docs-'));
writeFileSync(join(docs, 'snap.md'), '# Snapshots\n\nSnapshots are kept for 14 days.\n');
afterAll(() => {
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(docs, { recursive: true, force: true });
});

/** The ingest CLI as a user runs it, on the embedded database of `dataDir`. */
const cli = (args: string[]) => ingestCli(args, { RUNNEL_DATA_DIR: dataDir, DATABASE_URL: '' });

describe('npm run ingest: chunk sizes', () => {
  it('refuses a chunk size or an overlap the splitters would refuse, by its flag, and makes no collection', async () => {
    const small = await cli([docs, '--collection', 'small', '--chunk-size', '10']);
    expect(small.code).toBe(2);
    expect(small.stderr).toContain('ingest: --chunk-size must be a whole number of characters, at least 50 (got "10")');
    const overlap = await cli([docs, '--collection', 'overlap', '--chunk-size', '100', '--overlap', '200']);
    expect(overlap.code).toBe(2);
    expect(overlap.stderr).toContain('ingest: --overlap (200) must be smaller than --chunk-size (100)');
    // Without --chunk-size, plain text is split at 1000 characters: the overlap must be below that.
    const overlapAlone = await cli([docs, '--collection', 'overlap', '--overlap', '1000']);
    expect(overlapAlone.code).toBe(2);
    expect(overlapAlone.stderr).toContain('ingest: --overlap (1000) must be smaller than --chunk-size (1000, the default for text files)');
    for (const name of ['small', 'overlap']) {
      const search = await cli(['--query', 'snapshots', '--collection', name]);
      expect(search.stderr).toContain(`No collection named ${name}`);
    }
    // The smallest sizes allowed work.
    const fine = await cli([docs, '--collection', 'fine', '--chunk-size', '50', '--overlap', '49']);
    expect(fine.stderr).toBe('');
    expect(fine.stdout).toContain('added 1,');
  }, 120_000);

  // The same probe: `-k 8`, `--search` or `--json` beside paths, or `--chunk-size` beside --query, did nothing and
  // said nothing.
  it('refuses a flag of the other mode by name, instead of ignoring it', async () => {
    const ingesting = await cli([docs, '--collection', 'modes', '-k', '8', '--json']);
    expect(ingesting.code).toBe(2);
    expect(ingesting.stderr).toContain('ingest: -k, --json: for --query; ingesting files takes none of them');
    const querying = await cli(['--query', 'snapshots', '--collection', 'modes', '--chunk-size', '500', '--sync']);
    expect(querying.code).toBe(2);
    expect(querying.stderr).toContain('ingest: --chunk-size, --sync: for ingesting files; --query takes none of them');
    const search = await cli(['--query', 'snapshots', '--collection', 'modes']);
    expect(search.stderr).toContain('No collection named modes');
  }, 120_000);
});
