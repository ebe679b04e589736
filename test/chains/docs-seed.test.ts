/**
 * The README says `npm run ingest` adds more passages to the `docs`
 * collection that /rag searches. A trial found them deleted at the next
 * start: the server's seed synced the whole collection to its own files.
 * It now keeps what users added, and still removes its own stale passages
 * (a docs file an earlier version had).
 */
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DocsCollection } from '../../chains/docs.js';
import { connectServices, Document, ingestPaths, type Services } from '../../src/index.js';

describe('the docs collection at start', () => {
  let dir: string;
  let services: Services;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'runnel-seed-'));
    services = await connectServices({ dataDir: join(dir, 'data') });
  });
  afterAll(async () => {
    await services?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps the passages users ingested, and drops its own of a file that is gone', async () => {
    const docs = new DocsCollection({ services, env: {} });
    await docs.seed();
    const store = await docs.store();
    // What `npm run ingest -- mydocs --collection docs` does, from the user's own folder.
    mkdirSync(join(dir, 'mydocs'));
    writeFileSync(join(dir, 'mydocs', 'espresso.md'), '# Espresso\n\nCrema is the foam of emulsified oils on top of an espresso shot.\n');
    expect((await ingestPaths(store, [join(dir, 'mydocs')], { sourceRoot: dir })).added).toBe(1);
    // A passage of a docs file an earlier version shipped and this one does not.
    await store.addDocuments([new Document({ id: 'stale-1', pageContent: 'The old guide to a removed feature.', metadata: { source: 'docs/removed-feature.md' } })]);

    const again = await docs.seed();
    expect(again?.removed).toBe(1);
    const sources = await store.sources();
    expect(sources).toContain('mydocs/espresso.md');
    expect(sources).not.toContain('docs/removed-feature.md');
    expect(sources).toContain('README.md');
    expect((await docs.search('What is crema on an espresso?', 4)).map((source) => source.metadata.source)).toContain('mydocs/espresso.md');
    // Up to date: a third start changes nothing.
    expect(await docs.seed()).toBeUndefined();
  }, 120_000);
});
