/**
 * `ingestPaths(store, paths)`: loads files and directories (Markdown, text,
 * JSON Lines), splits them — Markdown by its sections, the rest by
 * paragraphs — and upserts the chunks that the store does not hold yet.
 * Chunk ids come from the source and the text, so ingesting again adds
 * nothing twice; with `sync`, chunks of the ingested sources that the files
 * no longer hold are deleted, and those of files gone from a folder given.
 * `npm run ingest` and the `/rag` chain's seeding both use it.
 */
import { createHash } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { relative, resolve, sep } from 'node:path';
import { canonicalJson, isRunnelError, RunnelError } from '../core/index.js';
import { Document, partitionFiles, loadFile, MarkdownTextSplitter, RecursiveCharacterTextSplitter, searchableText } from '../documents/index.js';
import type { PgVectorStore } from './pgvector.js';

/**
 * A chunk's id: the same source and text always give the same id; `repeat` (the text's earlier occurrences
 * in that source: a `### Returns` section under each of three functions) tells the repeats apart.
 */
export function chunkId(doc: Document, repeat = 0): string {
  return createHash('sha256')
    .update(`${String(doc.metadata.source ?? '')}\u0000${doc.pageContent}${repeat === 0 ? '' : `\u0000${repeat}`}`)
    .digest('hex')
    .slice(0, 32);
}

/**
 * The files a path names: itself, or a folder's Markdown, text and JSON Lines files; and the folder's other
 * files, which are not read (hidden files and `node_modules` are neither).
 */
async function filesOf(path: string): Promise<{ folder: boolean; files: string[]; ignored: string[] }> {
  if (!(await stat(path)).isDirectory()) return { folder: false, files: [path], ignored: [] };
  const { matched, others } = await partitionFiles(path, '**/*.{md,markdown,txt,jsonl}');
  return { folder: true, files: matched, ignored: others };
}

/**
 * The `origin` Runnel's docs seed marks its passages with (`metadata.origin`): an ingest without a
 * `metadata` mark of its own never deletes them.
 */
export const SEED_ORIGIN = 'runnel';

/** Text Postgres refuses to store (a NUL character, in the content or in JSON Lines metadata). */
const holdsNul = (doc: Document): boolean => doc.pageContent.includes('\u0000') || JSON.stringify(doc.metadata).includes('\\u0000');

/** Options of {@link ingestPaths}. */
export interface IngestOptions {
  /** The longest chunk in characters (default 1500 for Markdown, 1000 for other text). */
  chunkSize?: number;
  /**
   * Overlap of neighbouring chunks of plain text, and of the parts of an overlong Markdown paragraph (default 150
   * and 100, in proportion for a smaller `chunkSize`).
   */
  overlap?: number;
  /**
   * Delete stale chunks: `true`, the chunks of the ingested sources that the
   * files no longer produce (an edited file leaves no stale passage), and
   * every chunk of a file gone from a folder in `paths` (sources under the
   * folder's name that no file produced this time);
   * `'collection'`, every chunk the input did not produce (for a collection
   * derived from these paths alone, where a removed file's chunks go too).
   */
  sync?: boolean | 'collection';
  /** Chunks per upsert (default 64). */
  batchSize?: number;
  /** The largest file read, in bytes (default `MAX_FILE_BYTES`, 64 MiB); a larger one is a failure of its own, named with its size. */
  maxFileBytes?: number;
  onProgress?: (done: number, total: number) => void;
  /** Record sources relative to this folder (`docs/server.md`, not an absolute path of this machine). */
  sourceRoot?: string;
  /**
   * Entries every chunk's metadata gets (`{origin: 'runnel'}` marks the
   * server's own passages). They scope the run: a chunk already stored
   * without them is stored again with them, and `sync` deletes only chunks
   * that have them, so passages ingested under other entries are left alone.
   */
  metadata?: Record<string, string | number | boolean>;
}

/** What {@link ingestPaths} did. */
export interface IngestResult {
  added: number;
  /**
   * Chunks the store held with other metadata, rewritten: those whose headings changed stored again (what is
   * embedded changed), those that only moved in their file given their new line range.
   */
  updated: number;
  /** Chunks the store held already, as they are. */
  skipped: number;
  /** Stale chunks deleted (with `sync`). */
  removed: number;
  /** Files not stored, each with why; `stopped` when what stopped the run left it unstored (see `stopped`). */
  failed: { source: string; error: string; stopped?: true }[];
  /**
   * Files in the folders named that were not read, being neither Markdown, text nor JSON Lines by their
   * extension (`.md`, `.markdown`, `.txt`, `.jsonl`): an `.html` or `.rst` file, say. Named itself, such a file
   * is read as text.
   */
  ignored?: string[];
  /**
   * What stopped the run before it had stored everything: the database or the embeddings provider out of
   * reach, which every later file would meet too. What was stored stays (each file whole: see
   * {@link ingestPaths}); the sources not stored are in `failed`; stale chunks were not removed.
   */
  stopped?: RunnelError;
}

/**
 * Failures that are not one file's: every later write would meet them too. (A provider's refusal is one only
 * when it refuses every request, below: a 400 can be the file's own — a chunk over the model's input limit.)
 */
const STOPS = new Set(['RUNNEL_ERR_DATABASE_UNAVAILABLE', 'RUNNEL_ERR_PROVIDER_UNAVAILABLE', 'RUNNEL_ERR_PROVIDER_TIMEOUT', 'RUNNEL_ERR_PROVIDER_RATE_LIMITED']);
/** A refusal of every request, not of one input: the key (401), its rights (403), the model (404). */
const refusesAll = (error: RunnelError): boolean => error.code === 'RUNNEL_ERR_PROVIDER_REJECTED' && [401, 403, 404].includes((error.cause as { status?: unknown } | undefined)?.status as number);
const stopsTheRun = (error: unknown): error is RunnelError => isRunnelError(error) && (STOPS.has(error.code) || refusesAll(error));

/** `items` grouped by `key`, in the order each key first appears. */
function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const name = key(item);
    const group = groups.get(name);
    if (group === undefined) groups.set(name, [item]);
    else group.push(item);
  }
  return groups;
}

const isMarkdown = (doc: Document): boolean => /\.(md|markdown)$/i.test(String(doc.metadata.source ?? ''));

/** Splits documents: Markdown by sections, other text by paragraphs. */
export async function splitForIngest(docs: readonly Document[], options: Pick<IngestOptions, 'chunkSize' | 'overlap'> = {}): Promise<Document[]> {
  // Without an overlap of its own, a smaller chunk size gets a proportionally smaller one (the defaults' share:
  // 150 of 1000, 100 of 1500): an overlap as large as the chunk would be refused.
  const markdownSize = options.chunkSize ?? 1500;
  const textSize = options.chunkSize ?? 1000;
  const markdown = new MarkdownTextSplitter({
    chunkSize: markdownSize,
    chunkOverlap: options.overlap === undefined ? Math.min(100, Math.floor(markdownSize / 15)) : Math.min(options.overlap, markdownSize - 1),
  });
  const text = new RecursiveCharacterTextSplitter({ chunkSize: textSize, chunkOverlap: options.overlap ?? Math.min(150, Math.floor(textSize * 0.15)) });
  const out: Document[] = [];
  for (const doc of docs) {
    const line = recordLine(doc);
    for (const chunk of await (isMarkdown(doc) ? markdown : text).splitDocuments([doc])) {
      // A JSON Lines record is one line of its file, whatever lines its text has once unescaped: its passages
      // are that line (they said 1-1, the lines within the record's own text).
      out.push(line === undefined ? chunk : new Document({ pageContent: chunk.pageContent, metadata: { ...chunk.metadata, loc: { lines: { from: line, to: line } } } }));
    }
  }
  return out;
}

/** The line of its file a JSON Lines record is on (`loadJsonLines` writes it), or undefined for other documents. */
function recordLine(doc: Document): number | undefined {
  const line = doc.metadata.line;
  return /\.jsonl$/i.test(String(doc.metadata.source ?? '')) && typeof line === 'number' && Number.isInteger(line) && line > 0 ? line : undefined;
}

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * Ingests `paths` into `store`. A file that fails — unreadable, not text, a
 * bad JSON Lines record, refused by the database — is reported once with its
 * reason, and the other files go in. A file's new chunks are stored in one
 * write (up to the store's batch size), so a failure never leaves half of
 * one. When the database or the embeddings provider goes out of reach, the
 * run stops there (`stopped`): what was stored stays, the rest is `failed`.
 */
export async function ingestPaths(store: PgVectorStore, paths: readonly string[], options: IngestOptions = {}): Promise<IngestResult> {
  const root = options.sourceRoot;
  // Refused before anything is read: each file would otherwise fail with it, one by one.
  if (options.maxFileBytes !== undefined && !(Number.isSafeInteger(options.maxFileBytes) && options.maxFileBytes > 0)) {
    throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `maxFileBytes must be a whole number of bytes above 0, got ${String(options.maxFileBytes)}`);
  }
  // A file is named as its passages' source is: relative to sourceRoot when given.
  const sourceName = (file: string): string => (root === undefined ? file : relative(root, file).split(sep).join('/'));
  const failures = new Map<string, unknown>();
  const fail = (source: string, error: unknown): void => {
    if (!failures.has(source)) failures.set(source, error);
  };
  const failedAs = (stopped?: RunnelError): IngestResult['failed'] =>
    [...failures].map(([source, error]) => ({ source, error: message(error), ...(error === stopped ? { stopped: true as const } : {}) }));
  const docs: Document[] = [];
  // The source-name prefixes of the folders given: with sync, a file gone from one takes its passages along.
  const folders: string[] = [];
  const read = new Set<string>();
  // The sources of the files that loaded, records or none: a JSON Lines file emptied gives no document, and its
  // passages are stale all the same (a probe: `--sync data.jsonl` after emptying it removed nothing).
  const loaded = new Set<string>();
  const ignored = new Set<string>();
  for (const path of paths) {
    let files: string[];
    try {
      const found = await filesOf(path);
      files = found.files;
      for (const file of found.ignored) ignored.add(sourceName(file));
      // The folder sources are named from (the working directory, or sourceRoot itself) is no prefix: every
      // source of the collection would start with it, those ingested from elsewhere too.
      const prefix = `${sourceName(path)}/`.replace(/^\.?\//, '');
      if (found.folder && prefix !== '') folders.push(prefix);
    } catch (error) {
      fail(sourceName(path), error);
      continue;
    }
    for (const file of files) {
      // A file named twice (a folder and a file in it) is read once: its passages are not repeats of themselves.
      if (read.has(resolve(file))) continue;
      read.add(resolve(file));
      try {
        const fileDocs = await loadFile(file, { maxBytes: options.maxFileBytes });
        if (fileDocs.some(holdsNul)) throw new Error(`${file} holds a NUL character (\\u0000), which the database cannot store`);
        for (const doc of fileDocs) docs.push(doc);
        loaded.add(sourceName(file));
      } catch (error) {
        fail(sourceName(file), error);
      }
    }
  }
  for (const doc of docs) {
    if (typeof doc.metadata.source === 'string') doc.metadata.source = sourceName(doc.metadata.source);
  }
  const mark = options.metadata ?? {};
  // What a sync may delete: passages with this mark; without one, any but those Runnel's docs seed marks
  // as its own (`origin: "runnel"`), which a user's ingest into that collection must leave alone.
  const scope = options.metadata ?? { origin: { $ne: SEED_ORIGIN } };
  // A text that repeats in one source is a passage each time (a probe: three functions' `### Returns\n\nNothing.`
  // were one, stored once with the last one's headings and lines).
  const occurrences = new Map<string, number>();
  const chunks = (await splitForIngest(docs, options)).map((chunk) => {
    const key = `${String(chunk.metadata.source ?? '')}\u0000${chunk.pageContent}`;
    const repeat = occurrences.get(key) ?? 0;
    occurrences.set(key, repeat + 1);
    return new Document({ id: chunkId(chunk, repeat), pageContent: chunk.pageContent, metadata: { ...chunk.metadata, ...mark } });
  });
  const unique = [...new Map(chunks.map((chunk) => [chunk.id, chunk])).values()];
  const sourceOf = (chunk: Document): string => String(chunk.metadata.source ?? chunk.id);
  // What was stored, as it was: new passages, and passages stored again or given their new place.
  let added = 0;
  let updated = 0;
  const count = (part: readonly Document[]): void => {
    for (const chunk of part) {
      if (rewritten.has(chunk.id as string)) updated++;
      else added++;
    }
  };
  const result = (removed: number, stopped?: RunnelError): IngestResult => ({
    added,
    updated,
    skipped: unique.length - fresh.length - moved.length + (chunks.length - unique.length),
    removed,
    failed: failedAs(stopped),
    ignored: [...ignored].filter((source) => !read.has(resolve(root ?? '', source))),
    ...(stopped === undefined ? {} : { stopped }),
  });
  let fresh: Document[] = [];
  // Stored already with other metadata: its headings changed (what is embedded changed: stored again), or only
  // its place in the file (its metadata alone is rewritten: a probe saw /rag cite lines a section had left).
  let moved: Document[] = [];
  let rewritten = new Set<string>();
  try {
    const existing = await store.metadataOf(unique.map((chunk) => chunk.id as string), mark);
    for (const chunk of unique) {
      const stored = existing.get(chunk.id as string);
      if (stored !== undefined && canonicalJson(stored) === canonicalJson(chunk.metadata)) continue;
      // A passage of Runnel's docs seed is the seed's: an ingest without a mark of its own leaves it as it is (a
      // review: its metadata rewritten, the seed's mark was lost, and the seed stored it again at its next run).
      if (stored !== undefined && options.metadata === undefined && stored.origin === SEED_ORIGIN) continue;
      if (stored !== undefined && searchableText({ pageContent: chunk.pageContent, metadata: stored }) === searchableText(chunk)) moved.push(chunk);
      else fresh.push(chunk);
    }
    rewritten = new Set(fresh.filter((chunk) => existing.has(chunk.id as string)).map((chunk) => chunk.id as string));
  } catch (error) {
    if (!stopsTheRun(error)) throw error;
    fresh = unique;
    moved = [];
    for (const source of groupBy(unique, sourceOf).keys()) fail(source, error);
    return result(0, error);
  }
  // Whole files to a batch (one larger than a batch goes alone): a file is stored with one write or not at all.
  const batch = options.batchSize ?? 64;
  const batches: Document[][] = [];
  let filling: Document[] = [];
  for (const own of groupBy(fresh, sourceOf).values()) {
    if (filling.length > 0 && filling.length + own.length > batch) {
      batches.push(filling);
      filling = [];
    }
    filling.push(...own);
  }
  if (filling.length > 0) batches.push(filling);
  let done = 0;
  let stopped: RunnelError | undefined;
  options.onProgress?.(0, fresh.length);
  // Every source not stored yet from batch `from` (of which `stored` are), failed with what stopped the run.
  const stopAt = (from: number, stored: ReadonlySet<string>, error: RunnelError): void => {
    stopped = error;
    for (const part of batches.slice(from)) for (const source of groupBy(part, sourceOf).keys()) if (!stored.has(source)) fail(source, error);
  };
  for (let i = 0; i < batches.length && stopped === undefined; i++) {
    const part = batches[i] as Document[];
    try {
      await store.addDocuments(part);
      count(part);
    } catch (error) {
      if (stopsTheRun(error)) {
        stopAt(i, new Set(), error);
        break;
      }
      // One file's chunks must not fail the others in its batch: each source is stored on its own, and only the
      // one the database refuses is reported.
      const stored = new Set<string>();
      for (const [source, own] of groupBy(part, sourceOf)) {
        try {
          await store.addDocuments(own);
          count(own);
          stored.add(source);
        } catch (sourceError) {
          if (stopsTheRun(sourceError)) {
            stopAt(i, stored, sourceError);
            break;
          }
          fail(source, sourceError);
          stored.add(source);
        }
      }
    }
    done += part.length;
    options.onProgress?.(done, fresh.length);
  }
  if (stopped !== undefined) return result(0, stopped);
  try {
    updated += await store.updateMetadata(moved);
  } catch (error) {
    if (!stopsTheRun(error)) throw error;
    for (const source of groupBy(moved, sourceOf).keys()) fail(source, error);
    return result(0, error);
  }
  const failed = failedAs();
  let removed = 0;
  // Nothing is deleted for a source whose new chunks failed to store: it keeps its old ones until a run succeeds.
  const unstored = new Set(failed.map((failure) => failure.source));
  try {
    if (options.sync === 'collection' && failed.length === 0) {
      removed = await store.deleteExcept(unique.map((chunk) => chunk.id as string), { ...scope });
    } else if (options.sync === true) {
      // The sources that loaded, and those of files gone from a folder given; a file that failed to read keeps its chunks.
      const named = [...loaded, ...docs.map((doc) => doc.metadata.source).filter((source): source is string => typeof source === 'string')];
      const gone = folders.length === 0 ? [] : (await store.sources(scope)).filter((source) => folders.some((folder) => source.startsWith(folder)));
      const sources = [...new Set([...named, ...gone])].filter((source) => !unstored.has(source));
      if (sources.length > 0) removed = await store.deleteExcept(unique.map((chunk) => chunk.id as string), { source: { $in: sources }, ...scope });
    }
    if (added > 0 || updated > 0 || removed > 0) await store.analyze();
  } catch (error) {
    // Everything is stored; what the database did not do for want of being there is to be done by the next run.
    if (!stopsTheRun(error)) throw error;
    return result(removed, error);
  }
  return result(removed);
}
