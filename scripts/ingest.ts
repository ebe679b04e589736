/**
 * `npm run ingest -- <paths...> --collection NAME [--chunk-size N] [--overlap N] [--embeddings hashing|openai]`
 *
 * Loads files and directories (Markdown, text, JSON Lines), splits them,
 * embeds the chunks and upserts them into the pgvector collection —
 * Postgres when DATABASE_URL is set, else PGlite in RUNNEL_DATA_DIR. Chunk
 * ids are derived from the source and the content, so running it again adds
 * nothing twice. Prints what it added, skipped and failed.
 */
import { createHash } from 'node:crypto';
import { statSync } from 'node:fs';
import { parseArgs } from 'node:util';
import {
  connectServices,
  Document,
  HashingEmbeddings,
  loadDirectory,
  loadJsonLines,
  loadMarkdown,
  loadText,
  OpenAIEmbeddings,
  PgVectorStore,
  RecursiveCharacterTextSplitter,
  type Embeddings,
} from '../src/index.js';

/** A chunk's id: the same source and text always give the same id. */
export function chunkId(doc: Document): string {
  return createHash('sha256').update(`${String(doc.metadata.source ?? '')}\u0000${doc.pageContent}`).digest('hex').slice(0, 32);
}

async function load(path: string): Promise<Document[]> {
  if (statSync(path).isDirectory()) return loadDirectory(path, { glob: '**/*.{md,markdown,txt,jsonl}' });
  if (/\.jsonl$/i.test(path)) return loadJsonLines(path);
  if (/\.(md|markdown)$/i.test(path)) return loadMarkdown(path);
  return loadText(path);
}

function progress(done: number, total: number): void {
  if (!process.stderr.isTTY) return;
  const width = 30;
  const filled = total === 0 ? width : Math.round((done / total) * width);
  process.stderr.write(`\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}`);
  if (done === total) process.stderr.write('\n');
}

/** Ingests `paths` into `collection`; returns the counts. */
export async function ingest(options: {
  paths: string[];
  collection: string;
  chunkSize?: number;
  overlap?: number;
  embeddings?: Embeddings;
  databaseUrl?: string | undefined;
  dataDir?: string | undefined;
  batchSize?: number;
}): Promise<{ added: number; skipped: number; failed: { source: string; error: string }[] }> {
  const failed: { source: string; error: string }[] = [];
  const docs: Document[] = [];
  for (const path of options.paths) {
    try {
      docs.push(...(await load(path)));
    } catch (error) {
      failed.push({ source: path, error: error instanceof Error ? error.message : String(error) });
    }
  }
  const splitter = new RecursiveCharacterTextSplitter({ chunkSize: options.chunkSize ?? 1000, chunkOverlap: options.overlap ?? 150 });
  const chunks = (await splitter.splitDocuments(docs)).map((chunk) => new Document({ id: chunkId(chunk), pageContent: chunk.pageContent, metadata: chunk.metadata }));
  const unique = [...new Map(chunks.map((chunk) => [chunk.id, chunk])).values()];
  const services = await connectServices({ databaseUrl: options.databaseUrl, dataDir: options.dataDir });
  try {
    const store = await PgVectorStore.create({ executor: await services.sql(), embeddings: options.embeddings ?? new HashingEmbeddings(), collection: options.collection });
    const existing = await store.existingIds(unique.map((chunk) => chunk.id as string));
    const fresh = unique.filter((chunk) => !existing.has(chunk.id as string));
    const batch = options.batchSize ?? 64;
    let added = 0;
    progress(0, fresh.length);
    for (let start = 0; start < fresh.length; start += batch) {
      const part = fresh.slice(start, start + batch);
      try {
        await store.addDocuments(part);
        added += part.length;
      } catch (error) {
        for (const chunk of part) failed.push({ source: String(chunk.metadata.source ?? chunk.id), error: error instanceof Error ? error.message : String(error) });
      }
      progress(Math.min(start + batch, fresh.length), fresh.length);
    }
    if (added > 0) await store.analyze();
    return { added, skipped: unique.length - fresh.length + (chunks.length - unique.length), failed };
  } finally {
    await services.close();
  }
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      collection: { type: 'string' },
      'chunk-size': { type: 'string' },
      overlap: { type: 'string' },
      embeddings: { type: 'string', default: 'hashing' },
    },
  });
  if (positionals.length === 0 || values.collection === undefined || !/^[A-Za-z0-9_-]{1,64}$/.test(values.collection)) {
    console.error('usage: npm run ingest -- <paths...> --collection NAME [--chunk-size N] [--overlap N] [--embeddings hashing|openai]');
    process.exit(2);
  }
  const embeddings = values.embeddings === 'openai' ? new OpenAIEmbeddings({ dimensions: 384 }) : new HashingEmbeddings();
  const result = await ingest({
    paths: positionals,
    collection: values.collection,
    chunkSize: values['chunk-size'] === undefined ? undefined : Number(values['chunk-size']),
    overlap: values.overlap === undefined ? undefined : Number(values.overlap),
    embeddings,
    databaseUrl: process.env.DATABASE_URL,
    dataDir: process.env.RUNNEL_DATA_DIR,
  });
  console.log(`added ${result.added}, skipped ${result.skipped} (already there), failed ${result.failed.length}`);
  for (const failure of result.failed) console.log(`  failed: ${failure.source}: ${failure.error}`);
  if (result.failed.length > 0) process.exitCode = 1;
}

if (process.argv[1]?.endsWith('ingest.ts')) await main();
