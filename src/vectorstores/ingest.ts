/**
 * `ingestPaths(store, paths)`: loads files and directories (Markdown, text,
 * JSON Lines), splits them, and upserts the chunks that the store does not
 * hold yet. Chunk ids come from the source and the text, so ingesting again
 * adds nothing twice. `npm run ingest` and the `/rag` chain's first-start
 * seeding both use it.
 */
import { createHash } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { relative, sep } from 'node:path';
import { Document, loadDirectory, loadJsonLines, loadMarkdown, loadText, RecursiveCharacterTextSplitter } from '../documents/index.js';
import type { PgVectorStore } from './pgvector.js';

/** A chunk's id: the same source and text always give the same id. */
export function chunkId(doc: Document): string {
  return createHash('sha256').update(`${String(doc.metadata.source ?? '')}\u0000${doc.pageContent}`).digest('hex').slice(0, 32);
}

async function load(path: string): Promise<Document[]> {
  if ((await stat(path)).isDirectory()) return loadDirectory(path, { glob: '**/*.{md,markdown,txt,jsonl}' });
  if (/\.jsonl$/i.test(path)) return loadJsonLines(path);
  if (/\.(md|markdown)$/i.test(path)) return loadMarkdown(path);
  return loadText(path);
}

/** Options of {@link ingestPaths}. */
export interface IngestOptions {
  chunkSize?: number;
  overlap?: number;
  /** Chunks per upsert (default 64). */
  batchSize?: number;
  onProgress?: (done: number, total: number) => void;
  /** Record sources relative to this folder (`docs/server.md`, not an absolute path of this machine). */
  sourceRoot?: string;
}

/** What {@link ingestPaths} did. */
export interface IngestResult {
  added: number;
  /** Chunks the store held already, or that repeat within the input. */
  skipped: number;
  failed: { source: string; error: string }[];
}

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** Ingests `paths` into `store`; a file that fails is reported, the rest go in. */
export async function ingestPaths(store: PgVectorStore, paths: readonly string[], options: IngestOptions = {}): Promise<IngestResult> {
  const failed: IngestResult['failed'] = [];
  const docs: Document[] = [];
  for (const path of paths) {
    try {
      docs.push(...(await load(path)));
    } catch (error) {
      failed.push({ source: path, error: message(error) });
    }
  }
  if (options.sourceRoot !== undefined) {
    const root = options.sourceRoot;
    for (const doc of docs) {
      if (typeof doc.metadata.source === 'string') doc.metadata.source = relative(root, doc.metadata.source).split(sep).join('/');
    }
  }
  const splitter = new RecursiveCharacterTextSplitter({ chunkSize: options.chunkSize ?? 1000, chunkOverlap: options.overlap ?? 150 });
  const chunks = (await splitter.splitDocuments(docs)).map((chunk) => new Document({ id: chunkId(chunk), pageContent: chunk.pageContent, metadata: chunk.metadata }));
  const unique = [...new Map(chunks.map((chunk) => [chunk.id, chunk])).values()];
  const existing = await store.existingIds(unique.map((chunk) => chunk.id as string));
  const fresh = unique.filter((chunk) => !existing.has(chunk.id as string));
  const batch = options.batchSize ?? 64;
  let added = 0;
  options.onProgress?.(0, fresh.length);
  for (let start = 0; start < fresh.length; start += batch) {
    const part = fresh.slice(start, start + batch);
    try {
      await store.addDocuments(part);
      added += part.length;
    } catch (error) {
      for (const chunk of part) failed.push({ source: String(chunk.metadata.source ?? chunk.id), error: message(error) });
    }
    options.onProgress?.(Math.min(start + batch, fresh.length), fresh.length);
  }
  if (added > 0) await store.analyze();
  return { added, skipped: unique.length - fresh.length + (chunks.length - unique.length), failed };
}
