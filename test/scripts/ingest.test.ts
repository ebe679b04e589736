import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { HashingEmbeddings, ingestPaths, OpenAIEmbeddings, PgVectorStore, pgExecutor } from '../../src/index.js';
import { freePort } from '../helpers.js';
import { ingestCli } from '../support/ingest-cli.js';
import { startProviderServer } from '../support/provider-server.js';
import { ingest, query } from '../../scripts/ingest.js';
import { dropCollections } from '../vectorstores/databases.js';

/** The ingest CLI as a user runs it, in its own process (`env` adds to the environment; npm sets INIT_CWD to the folder it was run in). */
const cli = (args: string[], env: Record<string, string> = {}) => ingestCli(args, { DATABASE_URL, ...env });

const DATABASE_URL = process.env.RUNNEL_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/runnel_test';
const collection = `ingest_${process.pid}_${Date.now()}`;
const sections = `${collection}_md`;
const mixed = `${collection}_mixed`;
const unembedded = `${collection}_unembedded`;
const refusedKey = `${collection}_refused`;
const moving = `${collection}_moving`;
const words = `${collection}_words`;
const stopping = `${collection}_stopping`;
afterAll(async () => {
  const pool = new pg.Pool({ connectionString: DATABASE_URL });
  for (const name of [collection, sections, mixed, unembedded, refusedKey, moving, `${moving}_seed`, words, stopping]) await dropCollections(pgExecutor(pool), name);
  await pool.end();
});

describe('npm run ingest', () => {
  // A review: the embeddings provider out of reach failed every file one by one, each after the SDK's retries.
  it('stops at the first batch when the embeddings provider is out of reach, naming every file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runnel-ingest-'));
    for (const name of ['a', 'b', 'c']) writeFileSync(join(dir, `${name}.md`), `# ${name}\n\nSome words about ${name}.\n`);
    const closed = await freePort();
    const pool = new pg.Pool({ connectionString: DATABASE_URL });
    try {
      const embeddings = new OpenAIEmbeddings({ apiKey: 'sk-x', baseURL: `http://127.0.0.1:${closed}/v1`, dimensions: 8, maxRetries: 0 });
      const store = await PgVectorStore.create({ executor: pgExecutor(pool), embeddings, collection: unembedded });
      const result = await ingestPaths(store, [dir], { sourceRoot: dir, batchSize: 1 });
      expect(result.stopped).toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_UNAVAILABLE' });
      expect(result.added).toBe(0);
      expect(result.failed.map((failure) => failure.source).sort()).toEqual(['a.md', 'b.md', 'c.md']);
      // A file size limit that is none is refused once, before anything is read.
      await expect(ingestPaths(store, [dir], { sourceRoot: dir, maxFileBytes: 0 })).rejects.toMatchObject({ code: 'RUNNEL_ERR_INVALID_ARGUMENT', message: expect.stringContaining('maxFileBytes') });
      // A refused key refuses every file: it stops the run too (a refusal of one input would not).
      const provider = await startProviderServer('openai');
      try {
        const refused = await PgVectorStore.create({
          executor: pgExecutor(pool),
          embeddings: new OpenAIEmbeddings({ apiKey: 'sk-x', baseURL: provider.url, model: 'unauthorized', dimensions: 8, maxRetries: 0 }),
          collection: refusedKey,
        });
        const before = provider.requests.length;
        const stopped = await ingestPaths(refused, [dir], { sourceRoot: dir, batchSize: 1 });
        expect(stopped.stopped).toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_REJECTED' });
        expect(provider.requests.length - before).toBe(1);
      } finally {
        await provider.close();
      }
    } finally {
      await pool.end();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // A probe: a run stopped by the database printed a line for each of its 1,397 files, all with one reason.
  it('prints the files a stop left unstored on one line, beside the reason', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runnel-ingest-'));
    for (let i = 0; i < 8; i++) writeFileSync(join(dir, `note-${i}.md`), `# Note ${i}\n\nSome words about ${i}.\n`);
    // A second folder, given after: not read, so named as a path, not counted as a file.
    const after = mkdtempSync(join(tmpdir(), 'runnel-ingest-'));
    writeFileSync(join(after, 'later.md'), '# Later\n\nWords.\n');
    const closed = await freePort();
    try {
      const run = await cli([dir, after, '--collection', stopping, '--embeddings', 'openai'], { OPENAI_API_KEY: 'sk-x', OPENAI_BASE_URL: `http://127.0.0.1:${closed}/v1` });
      expect(run.code).toBe(1);
      expect(run.stdout).not.toContain('failed: ');
      expect(run.stdout).toMatch(/^ {2}not stored: 8 files \(\S+\/note-0\.md, .*, and 3 more\), the run having stopped$/m);
      expect(run.stdout).toContain(`  not tried: 1 path given after (${after})\n`);
      expect(run.stderr).toContain('ingest: stopped early, ');
    } finally {
      rmSync(dir, { recursive: true, force: true });
      rmSync(after, { recursive: true, force: true });
    }
  });

  it('loads, splits, embeds and upserts; a second run adds nothing; failures are reported', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runnel-ingest-'));
    writeFileSync(join(dir, 'guide.md'), `# Guide\n\n${'Runnel streams tokens over server-sent events. '.repeat(40)}\n\nDeploy with docker compose.`);
    writeFileSync(join(dir, 'facts.jsonl'), '{"text": "Redis keeps chat history."}\n{"text": "Postgres keeps vectors."}\n');
    const first = await ingest({ paths: [dir, join(dir, 'missing.txt')], collection, chunkSize: 300, overlap: 50, databaseUrl: DATABASE_URL });
    expect(first.added).toBeGreaterThan(4);
    // Named as its passages would be: from the folder given on down.
    expect(first.failed).toEqual([{ source: 'missing.txt', error: expect.stringMatching(/ENOENT/) }]);
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

  // A probe: --query, said to search "as /rag's retriever does", listed first a passage sharing none of the
  // question's words (a tie its vector won), which /rag drops while another passage has them.
  it("--query lists the passages /rag would cite: none without the question's words while one has them", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runnel-words-'));
    writeFileSync(join(dir, 'zoo.md'), '# Zoo\n\n## Giraffes\n\nGiraffes browse acacia leaves.\n\n## Penguins\n\nPenguins dive for krill.\n');
    expect(await ingest({ paths: [dir], collection: words, databaseUrl: DATABASE_URL, chunkSize: 60 })).toMatchObject({ added: 2, failed: [] });
    const hybrid = await query({ query: 'what do giraffes eat?', collection: words, databaseUrl: DATABASE_URL });
    expect(hybrid.map((match) => match.document.metadata.headings)).toEqual([['# Zoo', '## Giraffes']]);
    // The other modes stay the raw rankings, to look at one alone.
    expect(await query({ query: 'what do giraffes eat?', collection: words, databaseUrl: DATABASE_URL, search: 'dense' })).toHaveLength(2);
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
    const empty = await cli(['--query', ' ', '--collection', sections]);
    expect([empty.code, empty.stdout, empty.stderr]).toEqual([2, '', expect.stringMatching(/--query needs a question[\s\S]*usage:/)]);
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
    // Six processes of the CLI (tsx compiles it at each start): seconds each on a loaded machine, so a bound, not a margin.
  }, 120_000);

  // A trial's folder: one PDF among eight text files failed the whole batch (Postgres refused its NUL bytes, and
  // the PDF was reported twice); a file deleted from the folder kept its passages under --sync; the same file was
  // `oncall.md` or `notes/oncall.md` by how it was typed; a wrong database name ended in pg-pool's stack.
  it('refuses only the file that is not text, names one file one way, and --sync drops a deleted file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runnel-mixed-'));
    const notes = join(dir, 'notes');
    mkdirSync(notes);
    for (const name of ['alerts', 'backups', 'deploys', 'oncall']) writeFileSync(join(notes, `${name}.md`), `# ${name}\n\nThe ${name} runbook: page the owner of ${name} first.\n`);
    writeFileSync(join(notes, 'scan.txt'), Buffer.concat([Buffer.from('%PDF-1.7\n'), Buffer.from([0, 1, 2, 0xff, 0]), Buffer.from('\nstream\n')]));
    writeFileSync(join(notes, 'records.jsonl'), '{"text": "fine record"}\n{"text": "bad\\u0000record"}\n');
    writeFileSync(join(notes, 'latin1.txt'), Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]));

    const first = await cli(['notes', '--collection', mixed], { INIT_CWD: dir });
    expect(first.code).toBe(1);
    expect(first.stdout).toMatch(/^added 4, skipped 0 \(already there\), failed 3\n/);
    expect(first.stdout).toContain('failed: notes/scan.txt: ');
    expect(first.stdout).toMatch(/notes\/scan\.txt is not a text file \(it holds NUL bytes/);
    expect(first.stdout).toMatch(/failed: notes\/records\.jsonl: .*NUL character/);
    expect(first.stdout).toMatch(/failed: notes\/latin1\.txt: .*is not UTF-8 text/);
    expect(first.stdout.match(/failed: /g)).toHaveLength(3);

    // The file named on its own, from the folder above: the same source, so nothing is added twice.
    const again = await cli(['notes/oncall.md', '--collection', mixed], { INIT_CWD: dir });
    expect(again.stdout).toMatch(/^added 0, skipped 1 \(already there\), failed 0\n/);
    const pool = new pg.Pool({ connectionString: DATABASE_URL });
    const store = await PgVectorStore.create({ executor: pgExecutor(pool), embeddings: new HashingEmbeddings(), collection: mixed });
    expect((await store.sources()).sort()).toEqual(['notes/alerts.md', 'notes/backups.md', 'notes/deploys.md', 'notes/oncall.md']);

    rmSync(join(notes, 'deploys.md'));
    const synced = await cli(['notes', '--collection', mixed, '--sync'], { INIT_CWD: dir });
    expect(synced.stdout).toMatch(/^added 0, skipped 3 \(already there\), removed 1 \(stale\), failed 3\n/);
    expect((await store.sources()).sort()).toEqual(['notes/alerts.md', 'notes/backups.md', 'notes/oncall.md']);
    await pool.end();

    // A file over --max-file-mb is that file's failure, named with its size; the others are stored.
    writeFileSync(join(notes, 'huge.txt'), 'log line\n'.repeat(150_000));
    const capped = await cli(['notes', '--collection', mixed, '--max-file-mb', '1'], { INIT_CWD: dir });
    expect(capped.stdout).toMatch(/^added 0, skipped 3 \(already there\), failed 4\n/);
    expect(capped.stdout).toContain('failed: notes/huge.txt: ');
    expect(capped.stdout).toMatch(/huge\.txt is 1\.3 MiB, more than the 1\.0 MiB a file may be/);
    rmSync(join(notes, 'huge.txt'));
    const badCap = await cli(['notes', '--collection', mixed, '--max-file-mb', '0'], { INIT_CWD: dir });
    expect([badCap.code, badCap.stderr]).toEqual([2, expect.stringMatching(/^ingest: --max-file-mb must be a whole number of MiB, at least 1/)]);

    // A mistyped size is refused before anything is opened or created.
    const size = await cli(['notes', '--collection', `${mixed}_never`, '--chunk-size', 'abc'], { INIT_CWD: dir });
    expect([size.code, size.stderr]).toEqual([2, expect.stringMatching(/^ingest: --chunk-size must be a whole number/)]);
    const check = new pg.Pool({ connectionString: DATABASE_URL });
    expect((await check.query(`SELECT 1 FROM runnel_collections WHERE name = $1`, [`${mixed}_never`])).rows).toEqual([]);
    await check.end();

    // A database that does not exist: the reason and where, no stack, for ingest and for a search.
    const nowhere = DATABASE_URL.replace(/\/[^/]*$/, '/runnel_no_such_db');
    for (const args of [['notes', '--collection', mixed], ['--query', 'pager', '--collection', mixed]]) {
      const wrong = await cli(args, { INIT_CWD: dir, DATABASE_URL: nowhere });
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toMatch(/^ingest: (nothing added\. )?The database is unavailable: database "runnel_no_such_db" does not exist \(DATABASE_URL postgres:\/\/127\.0\.0\.1:5432\/runnel_no_such_db\)\n$/);
    }
  }, 120_000);

  // A probe: passages were named by file and text alone. Three functions' identical `### Returns` sections were
  // stored once (the last one's headings and lines); a passage that moved in its file kept its old lines, and
  // /rag cited them; a JSON Lines record's own `source` replaced the file's, mangled, and --sync never found it.
  it('keeps repeated passages apart, gives moved ones their new lines, and names JSON Lines records by their file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runnel-moving-'));
    const api = join(dir, 'api.md');
    const fn = (name: string) => `## ${name}()\n\n${name} does what its name says, and nothing more.\n\n### Returns\n\nNothing.\n`;
    writeFileSync(api, `# API\n\n${fn('alpha')}\n${fn('beta')}\n${fn('gamma')}`);
    writeFileSync(join(dir, 'data.jsonl'), '{"text": "Capybaras are the largest rodents.", "source": "https://example.com/a", "line": 7}\n{"text": "Otters hold hands.\\nThey sleep afloat."}\n');
    try {
      const pool = new pg.Pool({ connectionString: DATABASE_URL });
      try {
        const store = await PgVectorStore.create({ executor: pgExecutor(pool), embeddings: new HashingEmbeddings(), collection: moving });
        const run = (sync = false) => ingest({ paths: [dir], collection: moving, databaseUrl: DATABASE_URL, chunkSize: 80, sync });
        const first = await run();
        expect(first).toMatchObject({ added: 8, updated: 0, skipped: 0, failed: [] });
        const returns = async () =>
          (await store.similaritySearch('Returns Nothing', 20, { source: `${basename(dir)}/api.md` }))
            .filter((doc) => doc.pageContent.includes('Nothing.'))
            .map((doc) => [(doc.metadata.headings as string[])[1], (doc.metadata.loc as { lines: { from: number } }).lines.from])
            .sort();
        expect(await returns()).toEqual([['## alpha()', 7], ['## beta()', 15], ['## gamma()', 23]]);

        // Four lines above: the same passages, each now four lines down; nothing is embedded again.
        writeFileSync(api, `# API\n\nA note.\n\nAnother.\n\n${fn('alpha')}\n${fn('beta')}\n${fn('gamma')}`);
        const again = await run();
        // The new text is added; the passages below it that kept their text are given their lines, not embedded again.
        expect(again.failed).toEqual([]);
        expect(again.updated).toBeGreaterThanOrEqual(5);
        expect(await returns()).toEqual([['## alpha()', 11], ['## beta()', 19], ['## gamma()', 27]]);

        const [capybara] = await store.similaritySearch('largest rodents capybaras', 1);
        expect(capybara?.metadata).toMatchObject({ source: `${basename(dir)}/data.jsonl`, line: 1, record_source: 'https://example.com/a', record_line: 7 });
        // A record's passages are its line of the file, however many lines its text has (a probe: they said
        // 1-1, lines counted within the record's text).
        const [otters] = await store.similaritySearch('otters hold hands', 1);
        expect(otters?.metadata).toMatchObject({ line: 2, loc: { lines: { from: 2, to: 2 } } });
        writeFileSync(join(dir, 'data.jsonl'), '{"text": "Otters hold hands.\\nThey sleep afloat."}\n');
        expect((await run(true)).removed).toBeGreaterThanOrEqual(1);
        expect((await store.similaritySearch('largest rodents capybaras', 5)).map((doc) => doc.pageContent)).not.toContain('Capybaras are the largest rodents.');

        // A review: the seed's passages (marked origin: runnel) met by an ingest without a mark lost their mark.
        const seedDir = mkdtempSync(join(tmpdir(), 'runnel-seeded-'));
        try {
          writeFileSync(join(seedDir, 'seed.md'), '# Seeded\n\nThe seed keeps this passage as its own.\n');
          const seedStore = await PgVectorStore.create({ executor: pgExecutor(pool), embeddings: new HashingEmbeddings(), collection: `${moving}_seed` });
          try {
            expect(await ingestPaths(seedStore, [seedDir], { sourceRoot: seedDir, metadata: { origin: 'runnel' } })).toMatchObject({ added: 1 });
            // Overlapping paths read each file once.
            expect(await ingestPaths(seedStore, [seedDir, join(seedDir, 'seed.md')], { sourceRoot: seedDir })).toMatchObject({ added: 0, updated: 0, skipped: 1 });
            expect((await seedStore.similaritySearch('seed passage', 5)).map((doc) => doc.metadata.origin)).toEqual(['runnel']);
          } finally {
            await seedStore.delete({ filter: {} });
          }
        } finally {
          rmSync(seedDir, { recursive: true, force: true });
        }
      } finally {
        await pool.end();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // A newcomer's probe: a folder holding .md files and an .html page and a binary answered "added 2, skipped 0,
  // failed 0": the two files it passed over were not said, so a folder of .html or .rst files added nothing, unsaid.
  it('says which files of a folder it did not read; one named itself is read as text', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runnel-ingest-'));
    const ignoredIn = `${collection}_ignored`;
    try {
      mkdirSync(join(dir, 'kb', 'deep'), { recursive: true });
      writeFileSync(join(dir, 'kb', 'otter.md'), '# Otters\n\nOtters hold hands.\n');
      writeFileSync(join(dir, 'kb', 'page.html'), '<p>Zebras graze.</p>\n');
      writeFileSync(join(dir, 'kb', 'deep', 'notes.rst'), 'Notes\n=====\n');
      writeFileSync(join(dir, 'kb', '.hidden.html'), 'x\n');
      const first = await cli(['kb', '--collection', ignoredIn], { INIT_CWD: dir });
      expect(first.code).toBe(0);
      expect(first.stdout).toBe(
        'added 1, skipped 0 (already there), failed 0\n' +
          '  not read: 2 files in the folders named that are not .md, .markdown, .txt or .jsonl (kb/deep/notes.rst, kb/page.html); name a file to read it as text\n',
      );
      const named = await cli(['kb', 'kb/page.html', '--collection', ignoredIn], { INIT_CWD: dir });
      expect(named.stdout).toBe(
        'added 1, skipped 1 (already there), failed 0\n' +
          '  not read: 1 file in the folders named that is not .md, .markdown, .txt or .jsonl (kb/deep/notes.rst); name a file to read it as text\n',
      );
    } finally {
      const pool = new pg.Pool({ connectionString: DATABASE_URL });
      await dropCollections(pgExecutor(pool), ignoredIn);
      await pool.end();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
