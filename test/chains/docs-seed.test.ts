/**
 * The README says `npm run ingest` adds more passages to the `docs`
 * collection that /rag searches. A trial found them deleted at the next
 * start: the server's seed synced the whole collection to its own files.
 * It now keeps what users added, and still removes its own stale passages
 * (a docs file an earlier version had). A later trial ingested a folder of
 * its own named `docs` (sources `docs/runbook.md`): the seed took every
 * `docs/…` source for its own and deleted it. The seed now marks its
 * passages (`metadata.origin: "runnel"`) and touches no other.
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
    // An unmarked `docs/…` passage before the first marked seed: a user's, ingested before the server first
    // started (or an earlier version's seed, which nothing can tell apart). The seed leaves it.
    const store = await docs.store();
    await store.addDocuments([new Document({ id: 'early-1', pageContent: 'Our on-call rota, ingested before the first start.', metadata: { source: 'docs/rota.md' } })]);
    expect((await docs.seed())?.removed).toBe(0);
    expect(await store.sources()).toContain('docs/rota.md');
    const seeded = (await store.sources({ origin: 'runnel' })).length;
    expect(seeded).toBeGreaterThan(10);
    // What `npm run ingest -- mydocs --collection docs` does, from the user's own folder.
    mkdirSync(join(dir, 'mydocs'));
    writeFileSync(join(dir, 'mydocs', 'espresso.md'), '# Espresso\n\nCrema is the foam of emulsified oils on top of an espresso shot.\n');
    expect((await ingestPaths(store, [join(dir, 'mydocs')], { sourceRoot: dir })).added).toBe(1);
    // A user's folder that happens to be named docs, and a README of their own: sources `docs/runbook.md`, `README.md`.
    mkdirSync(join(dir, 'team', 'docs'), { recursive: true });
    writeFileSync(join(dir, 'team', 'docs', 'runbook.md'), '# Runbook\n\nRestart the grinder service when the hopper sensor sticks.\n');
    writeFileSync(join(dir, 'team', 'README.md'), '# Team\n\nThe roastery team owns the grinder service.\n');
    expect((await ingestPaths(store, [join(dir, 'team', 'docs')], { sourceRoot: join(dir, 'team') })).added).toBe(1);
    expect((await ingestPaths(store, [join(dir, 'team', 'README.md')], { sourceRoot: join(dir, 'team') })).added).toBe(1);
    // `--sync` of that folder, and of the folder the sources are named from: the user's own passages are synced;
    // the seed's (its docs/…, README.md) and those ingested from another folder (mydocs/espresso.md) are not theirs
    // to drop. (docs/rota.md, unmarked and named as a file of the synced `docs` folder that is not there, goes.)
    await ingestPaths(store, [join(dir, 'team', 'docs')], { sourceRoot: join(dir, 'team'), sync: true });
    await ingestPaths(store, [join(dir, 'team')], { sourceRoot: join(dir, 'team'), sync: true });
    expect((await store.sources({ origin: 'runnel' })).length).toBe(seeded);
    expect(await store.sources()).toEqual(expect.arrayContaining(['mydocs/espresso.md', 'docs/runbook.md', 'README.md']));
    // A passage of a docs file an earlier version shipped and this one does not.
    await store.addDocuments([
      new Document({ id: 'stale-1', pageContent: 'The old guide to a removed feature.', metadata: { source: 'docs/removed-feature.md', origin: 'runnel' } }),
    ]);

    const again = await docs.seed();
    expect(again?.removed).toBe(1);
    const sources = await store.sources();
    expect(sources).toContain('mydocs/espresso.md');
    expect(sources).toContain('docs/runbook.md');
    expect(sources).not.toContain('docs/removed-feature.md');
    expect(sources).toContain('README.md');
    expect((await docs.search('When do I restart the grinder service?', 4)).map((source) => source.metadata.source)).toContain('docs/runbook.md');
    expect((await docs.search('Who owns the grinder service?', 4)).map((source) => source.content)).toContainEqual(expect.stringContaining('roastery team'));
    expect((await docs.search('What is crema on an espresso?', 4)).map((source) => source.metadata.source)).toContain('mydocs/espresso.md');
    // Up to date: a third start changes nothing.
    expect(await docs.seed()).toBeUndefined();

    // A probe: a team serving its own documents always had Runnel's mixed into /rag's sources. With the seed off
    // (RUNNEL_SEED_DOCS=false), a start removes the passages seeded before and keeps the users'.
    const theirs = new DocsCollection({ services, env: {}, seedDocs: false });
    expect(theirs.ready).toBe(false);
    expect((await theirs.seed())?.removed).toBeGreaterThanOrEqual(seeded);
    expect(theirs.ready).toBe(true);
    expect(await store.sources({ origin: 'runnel' })).toEqual([]);
    expect((await store.sources()).sort()).toEqual(['docs/runbook.md', 'mydocs/espresso.md', 'README.md'].sort());
    expect((await theirs.search('How is chat history stored?', 4)).map((source) => source.metadata.origin)).not.toContain('runnel');
    expect(await theirs.seed()).toBeUndefined();
  }, 120_000);
});
