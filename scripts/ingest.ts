/**
 * `npm run ingest -- <paths...> --collection NAME [--chunk-size N] [--overlap N] [--sync] [--max-file-mb N] [--embeddings hashing|hashing-words|openai]`
 * `npm run ingest -- --query "QUESTION" --collection NAME [--search hybrid|dense|lexical] [-k N] [--json]`
 *
 * Loads files and directories (Markdown, text, JSON Lines), splits them,
 * embeds the chunks and upserts them into the pgvector collection —
 * Postgres when DATABASE_URL is set, else PGlite in RUNNEL_DATA_DIR. Chunk
 * ids are derived from the source and the content, so running it again adds
 * nothing twice; `--sync` also deletes the chunks of those files that they
 * no longer hold. Prints what it added, skipped, removed and failed. The
 * query side searches a collection the way `/rag`'s retriever does and
 * prints the passages with their sources, lines and headings. With the embedded
 * database, a running server holds its data directory: ingest then refuses
 * (adding nothing) and says to stop the server or use DATABASE_URL.
 */
import { dirname, resolve, sep } from 'node:path';
import { parseArgs } from 'node:util';
import {
  checkK,
  checkSearchMode,
  connectServices,
  HashingEmbeddings,
  isRunnelError,
  ingestPaths,
  OpenAIEmbeddings,
  PgVectorStore,
  RunnelError,
  searchSharingWords,
  type Embeddings,
  type IngestResult,
  type SearchMatch,
  type SearchMode,
} from '../src/index.js';

/** Whether the progress bar's line is open on stderr (written without its newline). */
let barOpen = false;

function progress(done: number, total: number): void {
  if (!process.stderr.isTTY) return;
  const width = 30;
  const filled = total === 0 ? width : Math.round((done / total) * width);
  process.stderr.write(`\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}`);
  barOpen = done !== total;
  if (!barOpen) process.stderr.write('\n');
}

/** Ends a bar the run left short (it stopped, or failed), so the lines that follow start lines of their own. */
function endProgress(): void {
  if (barOpen) process.stderr.write('\n');
  barOpen = false;
}

/** Ingests `paths` into `collection` on the configured database; returns the counts. */
export async function ingest(options: {
  paths: string[];
  collection: string;
  chunkSize?: number;
  overlap?: number;
  embeddings?: Embeddings;
  databaseUrl?: string | undefined;
  dataDir?: string | undefined;
  batchSize?: number;
  sync?: boolean;
  /** The largest file read, in bytes (default 64 MiB). */
  maxFileBytes?: number;
  /** The folder relative paths start from, and sources are named from (default: the current one). */
  cwd?: string;
}): Promise<IngestResult> {
  const services = await connectServices({ databaseUrl: options.databaseUrl, dataDir: options.dataDir, role: 'ingest' });
  try {
    const store = await PgVectorStore.create({ executor: await services.sql(), embeddings: options.embeddings ?? new HashingEmbeddings(), collection: options.collection });
    // Sources are named relative to the folder the command runs in — `mydocs/zebra.md` whether the folder or the
    // file was named — so one file has one name, and /rag's sources show no more of this machine's paths than
    // that. A path outside it is named from the folder (or file) given on down.
    const base = resolve(options.cwd ?? process.cwd());
    const total: IngestResult = { added: 0, updated: 0, skipped: 0, removed: 0, failed: [], ignored: [] };
    // A folder's file of another type named itself too is read (as text), not ignored.
    const named = new Set(options.paths.map((given) => resolve(base, given)));
    for (const given of options.paths) {
      const path = resolve(base, given);
      const inside = path === base || path.startsWith(base.endsWith(sep) ? base : base + sep);
      const result = await ingestPaths(store, [path], { sourceRoot: inside ? base : dirname(path), ...options, onProgress: progress });
      total.added += result.added;
      total.updated += result.updated;
      total.skipped += result.skipped;
      total.removed += result.removed;
      total.failed.push(...result.failed);
      const root = inside ? base : dirname(path);
      for (const source of result.ignored ?? []) if (!named.has(resolve(root, source))) total.ignored?.push(source);
      if (result.stopped !== undefined) {
        // The paths after it would meet the same: named as not stored, not tried.
        total.stopped = result.stopped;
        const rest = options.paths.slice(options.paths.indexOf(given) + 1);
        for (const path of rest) total.failed.push({ source: path, error: NOT_TRIED, stopped: true });
        break;
      }
    }
    return total;
  } finally {
    endProgress();
    await services.close();
  }
}

/** Searches `collection` for `query` as `/rag`'s retriever does. */
export async function query(options: {
  query: string;
  collection: string;
  search?: SearchMode;
  k?: number;
  embeddings?: Embeddings;
  databaseUrl?: string | undefined;
  dataDir?: string | undefined;
}): Promise<SearchMatch[]> {
  const services = await connectServices({ databaseUrl: options.databaseUrl, dataDir: options.dataDir, role: 'ingest' });
  try {
    const executor = await services.sql();
    // A search reads: a mistyped name is said, not made into an empty collection that then answers nothing.
    // A database no ingest has written to yet has no runnel_collections table (42P01): no collection either.
    const { rows } = await executor
      .query<{ name: string }>('SELECT name FROM runnel_collections WHERE name = $1', [options.collection])
      .catch((error: unknown) => {
        if ((error as { code?: unknown }).code === '42P01') return { rows: [] as { name: string }[] };
        throw error;
      });
    if (rows.length === 0) throw new RunnelError('RUNNEL_ERR_NOT_FOUND', `No collection named ${options.collection}: ingest into it first`);
    const store = await PgVectorStore.create({ executor, embeddings: options.embeddings ?? new HashingEmbeddings(), collection: options.collection });
    const search = options.search ?? 'hybrid';
    // Hybrid is /rag's search: listed as /rag would cite it (passages without the question's words dropped while
    // any has them), not as the raw fused ranking, whose first passage /rag may never show. The other modes are raw.
    if (search === 'hybrid') return await searchSharingWords(store, options.query, options.k ?? 4);
    return await store.search(options.query, { k: options.k ?? 4, search });
  } finally {
    await services.close();
  }
}

const USAGE = [
  'usage: npm run ingest -- <paths...> --collection NAME [--chunk-size N] [--overlap N] [--sync] [--max-file-mb N] [--embeddings hashing|hashing-words|openai]',
  '       npm run ingest -- --query "QUESTION" --collection NAME [--search hybrid|dense|lexical] [-k N] [--json] [--embeddings ...]',
].join('\n');

function usage(problem?: string): never {
  if (problem !== undefined) console.error(`ingest: ${problem}`);
  console.error(USAGE);
  process.exit(2);
}

// Asked for, the usage is the answer: on stdout, exit 0.
if (process.argv[1]?.endsWith('ingest.ts') && process.argv.slice(2).some((arg) => arg === '--help' || arg === '-h')) {
  console.log(USAGE);
  process.exit(0);
}

/** Why a path given after the one a run stopped in is in `failed`. */
const NOT_TRIED = 'not tried: the run stopped';

/** `a.md, b.md, c.md, d.md, e.md, and 3 more`: the first five names of a list. */
function firstFive(names: readonly string[]): string {
  return names.slice(0, 5).join(', ') + (names.length > 5 ? `, and ${names.length - 5} more` : '');
}

/**
 * What went wrong, for the terminal: the error's message with its cause (the
 * database's refusal, the address it could not reach) and, for a database
 * out of reach, the DATABASE_URL tried, without its credentials.
 */
function explain(error: RunnelError): string {
  const cause = error.cause instanceof Error && error.cause.message !== '' ? `: ${error.cause.message}` : '';
  let target = '';
  if (error.code === 'RUNNEL_ERR_DATABASE_UNAVAILABLE' && process.env.DATABASE_URL) {
    try {
      const url = new URL(process.env.DATABASE_URL);
      target = ` (DATABASE_URL ${url.protocol}//${url.host}${url.pathname})`;
    } catch {
      target = ' (DATABASE_URL is not a URL)';
    }
  }
  return `${error.message}${cause}${target}`;
}

function embeddingsNamed(name: string): Embeddings {
  if (name === 'openai') return new OpenAIEmbeddings({ dimensions: 384 });
  if (name === 'hashing-words') return new HashingEmbeddings({ features: 'words' });
  if (name === 'hashing') return new HashingEmbeddings();
  return usage(`unknown embeddings ${JSON.stringify(name)}`);
}

function printMatches(matches: SearchMatch[]): void {
  if (matches.length === 0) console.log('no passage found');
  matches.forEach((match, index) => {
    const { source, loc, headings } = match.document.metadata as { source?: unknown; loc?: { lines?: { from?: number; to?: number } }; headings?: unknown };
    const lines = loc?.lines?.from === undefined ? '' : `:${loc.lines.from}-${String(loc.lines.to)}`;
    console.log(`${index + 1}. ${String(source ?? match.document.id)}${lines}  score ${match.score.toFixed(4)}`);
    if (Array.isArray(headings) && headings.length > 0) console.log(`   ${headings.join(' › ')}`);
    console.log(`   ${match.document.pageContent.replace(/\s+/g, ' ').trim().slice(0, 200)}`);
  });
}

async function main(): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({
      allowPositionals: true,
      options: {
        collection: { type: 'string' },
        'chunk-size': { type: 'string' },
        overlap: { type: 'string' },
        sync: { type: 'boolean' },
        'max-file-mb': { type: 'string' },
        embeddings: { type: 'string', default: 'hashing' },
        query: { type: 'string' },
        search: { type: 'string' },
        k: { type: 'string', short: 'k' },
        json: { type: 'boolean' },
      },
    });
  } catch (error) {
    usage(error instanceof Error ? error.message : String(error));
  }
  const { values, positionals } = parsed;
  if (values.collection === undefined || !/^[A-Za-z0-9_-]{1,64}$/.test(values.collection)) usage('--collection NAME is required (letters, digits, _ and -)');
  const embeddings = embeddingsNamed(values.embeddings);
  // A flag of the other mode would be ignored: said instead (a new user's probe: `-k 8` beside paths did nothing).
  const given = (names: readonly (keyof typeof values)[]) => names.filter((name) => values[name] !== undefined).map((name) => (name === 'k' ? '-k' : `--${name}`));
  if (values.query !== undefined) {
    if (positionals.length > 0) usage('--query searches; it takes no paths');
    const ingesting = given(['chunk-size', 'overlap', 'sync', 'max-file-mb']);
    if (ingesting.length > 0) usage(`${ingesting.join(', ')}: for ingesting files; --query takes none of them`);
    // A probe: an empty question answered four passages, scored.
    if (values.query.trim() === '') usage('--query needs a question');
    let search: SearchMode;
    let k: number;
    try {
      search = checkSearchMode(values.search ?? 'hybrid');
      k = checkK(Number(values.k ?? '4'));
    } catch (error) {
      return usage(error instanceof Error ? error.message : String(error));
    }
    try {
      const matches = await query({ query: values.query, collection: values.collection, search, k, embeddings, databaseUrl: process.env.DATABASE_URL, dataDir: process.env.RUNNEL_DATA_DIR });
      if (values.json === true) console.log(JSON.stringify(matches.map((match) => ({ ...match.document.toJSON(), score: match.score, ranks: match.ranks })), null, 2));
      else printMatches(matches);
    } catch (error) {
      if (isRunnelError(error)) {
        console.error(`ingest: ${explain(error)}`);
        process.exit(1);
      }
      throw error;
    }
    return;
  }
  if (positionals.length === 0) usage('name the files or folders to ingest, or --query');
  const querying = given(['search', 'k', 'json']);
  if (querying.length > 0) usage(`${querying.join(', ')}: for --query; ingesting files takes none of them`);
  // Sizes are checked before anything is opened: a mistyped one creates no collection.
  const size = (name: string, value: string | undefined, least: number): number | undefined => {
    if (value === undefined) return undefined;
    if (!/^\d{1,7}$/.test(value) || Number(value) < least) usage(`--${name} must be a whole number of characters, at least ${least} (got ${JSON.stringify(value)})`);
    return Number(value);
  };
  // The splitters' own limits, said by flag: past this point they would be refused after the collection was made.
  const chunkSize = size('chunk-size', values['chunk-size'], 50);
  const overlap = size('overlap', values.overlap, 0);
  // Plain text is split at the chunk size with the overlap as given (Markdown's overlap is cut to fit).
  if (overlap !== undefined && overlap >= (chunkSize ?? 1000)) {
    usage(`--overlap (${overlap}) must be smaller than --chunk-size (${chunkSize ?? '1000, the default for text files'})`);
  }
  const maxFileMb = values['max-file-mb'];
  if (maxFileMb !== undefined && !(/^\d{1,5}$/.test(maxFileMb) && Number(maxFileMb) >= 1)) usage(`--max-file-mb must be a whole number of MiB, at least 1 (got ${JSON.stringify(maxFileMb)})`);
  let result: IngestResult;
  try {
    result = await ingest({
      sync: values.sync === true,
      paths: positionals,
      collection: values.collection,
      chunkSize,
      overlap,
      maxFileBytes: maxFileMb === undefined ? undefined : Number(maxFileMb) * 1024 * 1024,
      embeddings,
      databaseUrl: process.env.DATABASE_URL,
      dataDir: process.env.RUNNEL_DATA_DIR,
      // npm runs scripts in the package's folder; paths are typed in the one npm was run from.
      cwd: process.env.INIT_CWD,
    });
  } catch (error) {
    // The database could not be opened (unreachable, or embedded and open in a running server): nothing was added.
    if (isRunnelError(error)) {
      console.error(`ingest: nothing added. ${explain(error)}`);
      process.exit(1);
    }
    throw error;
  }
  console.log(`added ${result.added}, ${result.updated > 0 ? `updated ${result.updated} (moved or retitled), ` : ''}skipped ${result.skipped} (already there), ${values.sync === true ? `removed ${result.removed} (stale), ` : ''}failed ${result.failed.length}`);
  for (const failure of result.failed) if (failure.stopped !== true) console.log(`  failed: ${failure.source}: ${failure.error}`);
  // What the stop left unstored shares its reason, said below: one line, not one a file (a probe: 1,397 lines).
  // The paths given after the one it stopped in were not read: each may be a folder.
  const stopped = result.failed.filter((failure) => failure.stopped === true);
  const unstored = stopped.filter((failure) => failure.error !== NOT_TRIED).map((failure) => failure.source);
  const untried = stopped.filter((failure) => failure.error === NOT_TRIED).map((failure) => failure.source);
  if (unstored.length > 0) console.log(`  not stored: ${unstored.length} file${unstored.length === 1 ? '' : 's'} (${firstFive(unstored)}), the run having stopped`);
  if (untried.length > 0) console.log(`  not tried: ${untried.length} path${untried.length === 1 ? '' : 's'} given after (${firstFive(untried)})`);
  // A folder's other files are not read: said, so a folder of .html or .rst files does not answer "added 0" alone.
  const ignored = result.ignored ?? [];
  if (ignored.length > 0) {
    console.log(`  not read: ${ignored.length} file${ignored.length === 1 ? '' : 's'} in the folders named that ${ignored.length === 1 ? 'is' : 'are'} not .md, .markdown, .txt or .jsonl (${firstFive(ignored)}); name a file to read it as text`);
  }
  // What was added stays, each file whole; running the same command again stores the rest.
  if (result.stopped !== undefined) console.error(`ingest: stopped early, ${explain(result.stopped)}; run it again to finish`);
  if (result.failed.length > 0 || result.stopped !== undefined) process.exitCode = 1;
}

if (process.argv[1]?.endsWith('ingest.ts')) await main();
