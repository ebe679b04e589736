/**
 * `npm run ingest -- <paths...> --collection NAME [--chunk-size N] [--overlap N] [--embeddings hashing|openai]`
 *
 * Loads files and directories (Markdown, text, JSON Lines), splits them,
 * embeds the chunks and upserts them into the pgvector collection —
 * Postgres when DATABASE_URL is set, else PGlite in RUNNEL_DATA_DIR. Chunk
 * ids are derived from the source and the content, so running it again adds
 * nothing twice. Prints what it added, skipped and failed. With the embedded
 * database, a running server holds its data directory: ingest then refuses
 * (adding nothing) and says to stop the server or use DATABASE_URL.
 */
import { dirname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { connectServices, HashingEmbeddings, isRunnelError, ingestPaths, OpenAIEmbeddings, PgVectorStore, type Embeddings, type IngestResult } from '../src/index.js';

function progress(done: number, total: number): void {
  if (!process.stderr.isTTY) return;
  const width = 30;
  const filled = total === 0 ? width : Math.round((done / total) * width);
  process.stderr.write(`\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}`);
  if (done === total) process.stderr.write('\n');
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
}): Promise<IngestResult> {
  const services = await connectServices({ databaseUrl: options.databaseUrl, dataDir: options.dataDir, role: 'ingest' });
  try {
    const store = await PgVectorStore.create({ executor: await services.sql(), embeddings: options.embeddings ?? new HashingEmbeddings(), collection: options.collection });
    // Each source is named from the folder (or file) given on down — `mydocs/zebra.md` — so /rag's sources
    // show no more of this machine's paths than the user named.
    const total: IngestResult = { added: 0, skipped: 0, failed: [] };
    for (const path of options.paths) {
      const result = await ingestPaths(store, [path], { sourceRoot: dirname(resolve(path)), ...options, onProgress: progress });
      total.added += result.added;
      total.skipped += result.skipped;
      total.failed.push(...result.failed);
    }
    return total;
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
  let result: IngestResult;
  try {
    result = await ingest({
      paths: positionals,
      collection: values.collection,
      chunkSize: values['chunk-size'] === undefined ? undefined : Number(values['chunk-size']),
      overlap: values.overlap === undefined ? undefined : Number(values.overlap),
      embeddings,
      databaseUrl: process.env.DATABASE_URL,
      dataDir: process.env.RUNNEL_DATA_DIR,
    });
  } catch (error) {
    // The embedded database is open in a running server (or another ingest): say so, add nothing.
    if (isRunnelError(error)) {
      console.error(`ingest: nothing added. ${error.message}`);
      process.exit(1);
    }
    throw error;
  }
  console.log(`added ${result.added}, skipped ${result.skipped} (already there), failed ${result.failed.length}`);
  for (const failure of result.failed) console.log(`  failed: ${failure.source}: ${failure.error}`);
  if (result.failed.length > 0) process.exitCode = 1;
}

if (process.argv[1]?.endsWith('ingest.ts')) await main();
