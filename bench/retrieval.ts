/**
 * `npm run bench:retrieval`: does retrieval find the right passage, and how fast?
 *
 * - Quality: the 48 questions of `bench/retrieval-qa.json`, written over
 *   pino's Markdown docs (`node_modules/pino/docs`, a corpus Runnel did not
 *   write), each with its file and a phrase of its answer. A question is a
 *   hit when one of the first 4 passages is from that file and holds the
 *   phrase; MRR counts the first such passage in the first 10. Measured for
 *   dense, lexical and hybrid search on Postgres and on PGlite, ingested as
 *   `npm run ingest` does, beside what `/rag` did before (paragraph chunks,
 *   word-hashing vectors, dense search) for reference.
 * - Speed: ingest throughput, and query p50/p99 of each mode at that size
 *   and at BENCH_SCALE chunks (default 100,000; 0 skips) on Postgres: real
 *   Markdown from node_modules split by section, repeated with its
 *   sentences shuffled until the collection is that large.
 *
 * DATABASE_URL chooses the Postgres (default the test database).
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import pg from 'pg';
import type { Document as DocumentType, SearchMatch, SearchMode, SqlExecutor, VectorStore } from '../src/index.js';
import { runnel } from './runnel.js';
import { percentile, rng } from './stats.js';

const { Document, HashingEmbeddings, ingestPaths, MarkdownTextSplitter, MemoryVectorStore, PgVectorStore, pgExecutor, pgliteExecutor, RecursiveCharacterTextSplitter } = runnel;

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/runnel_test';
const SCALE = Number(process.env.BENCH_SCALE ?? 100_000);
const ROOT = new URL('..', import.meta.url).pathname;
const CORPUS = join(ROOT, 'node_modules/pino/docs');
const QA = JSON.parse(readFileSync(join(ROOT, 'bench/retrieval-qa.json'), 'utf8')) as { question: string; file: string; answer: string }[];
const MODES: SearchMode[] = ['dense', 'lexical', 'hybrid'];
const REPEATS = 5;

const normal = (text: string): string => text.replace(/\s+/g, ' ').toLowerCase();


/** The rank (1-based) of the first passage answering `qa`, or 0. */
function rankOf(found: readonly SearchMatch[], qa: (typeof QA)[number]): number {
  const file = (doc: DocumentType): string => String(doc.metadata.source ?? '').split('/').at(-1) as string;
  return found.findIndex((m) => file(m.document) === qa.file && normal(m.document.pageContent).includes(normal(qa.answer))) + 1;
}

interface Quality {
  hit4: number;
  mrr: number;
  p50: number;
  p99: number;
}

/** Hit@4 and MRR@10 of `mode` over the QA set; latencies over REPEATS rounds after a warm-up. */
async function measure(store: VectorStore, mode: SearchMode, filter?: Record<string, unknown>): Promise<Quality> {
  let hits = 0;
  let mrr = 0;
  for (const qa of QA) {
    const rank = rankOf(await store.search(qa.question, { k: 10, search: mode, ...(filter === undefined ? {} : { filter }) }), qa);
    if (rank > 0 && rank <= 4) hits++;
    if (rank > 0) mrr += 1 / rank;
  }
  const times: number[] = [];
  for (let round = 0; round < REPEATS; round++) {
    for (const qa of QA) {
      const start = performance.now();
      await store.search(qa.question, { k: 4, search: mode });
      times.push(performance.now() - start);
    }
  }
  return { hit4: hits / QA.length, mrr: mrr / QA.length, p50: percentile(times, 50), p99: percentile(times, 99) };
}

function corpusDocs(): DocumentType[] {
  return readdirSync(CORPUS)
    .filter((name) => name.endsWith('.md'))
    .map((name) => new Document({ pageContent: readFileSync(join(CORPUS, name), 'utf8'), metadata: { source: name } }));
}

/** What `/rag` did before this round: 1,000-character paragraph chunks, word-hashing vectors, dense search. */
async function before(): Promise<Record<string, Quality>> {
  const chunks = await new RecursiveCharacterTextSplitter({ chunkSize: 1000, chunkOverlap: 150 }).splitDocuments(corpusDocs());
  const store = new MemoryVectorStore(new HashingEmbeddings({ features: 'words' }));
  await store.addDocuments(chunks.map((chunk, i) => new Document({ id: `c${i}`, pageContent: chunk.pageContent, metadata: chunk.metadata })));
  return { dense: await measure(store, 'dense'), lexical: await measure(store, 'lexical'), hybrid: await measure(store, 'hybrid') };
}

async function onDatabase(name: string, executor: SqlExecutor): Promise<{ rows: string[]; ingest: string }> {
  const collection = `bench_retrieval_${process.pid}_${name.toLowerCase()}`;
  const store = await PgVectorStore.create({ executor, embeddings: new HashingEmbeddings(), collection });
  await store.delete({ filter: {} });
  const start = performance.now();
  const result = await ingestPaths(store, [CORPUS], { sourceRoot: CORPUS });
  const seconds = (performance.now() - start) / 1000;
  const rows = [];
  for (const mode of MODES) {
    const q = await measure(store, mode);
    rows.push(`| ${name} | ${mode} | ${q.hit4.toFixed(3)} | ${q.mrr.toFixed(3)} | ${q.p50.toFixed(2)} | ${q.p99.toFixed(2)} |`);
  }
  await store.delete({ filter: {} });
  return { rows, ingest: `| ${name} | ${result.added} chunks of ${readdirSync(CORPUS).length} files | ${seconds.toFixed(2)} s | ${Math.round(result.added / seconds)} chunks/s |` };
}

function markdownFiles(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const info = statSync(path, { throwIfNoEntry: false });
    if (info?.isDirectory()) markdownFiles(path, out);
    else if (info?.isFile() && name.endsWith('.md') && info.size > 1024 && info.size < 2_000_000) out.push(path);
  }
  return out;
}


/**
 * `size` chunks: the pino docs, every other Markdown file of node_modules by
 * section, then chunks of those other files with their sentences shuffled
 * (never pino's: a shuffled copy of an answer would compete with it).
 */
async function scaledCorpus(size: number): Promise<DocumentType[]> {
  const splitter = new MarkdownTextSplitter();
  const pino = await splitter.splitDocuments(corpusDocs());
  const real: DocumentType[] = [];
  const others = markdownFiles(join(ROOT, 'node_modules')).filter((path) => !path.startsWith(CORPUS));
  for (const path of others) real.push(...(await splitter.splitDocuments([new Document({ pageContent: readFileSync(path, 'utf8'), metadata: { source: path.slice(ROOT.length) } })])));
  const random = rng(7);
  const out = [...pino, ...real].slice(0, size).map((doc, i) => new Document({ id: `r${i}`, pageContent: doc.pageContent, metadata: doc.metadata }));
  for (let i = 0; out.length < size; i++) {
    const a = real[i % real.length] as DocumentType;
    const b = real[Math.floor(random() * real.length)] as DocumentType;
    const sentences = `${a.pageContent} ${b.pageContent}`.split(/(?<=[.!?])\s+/);
    for (let j = sentences.length - 1; j > 0; j--) {
      const k = Math.floor(random() * (j + 1));
      [sentences[j], sentences[k]] = [sentences[k] as string, sentences[j] as string];
    }
    out.push(new Document({ id: `s${i}`, pageContent: sentences.join(' ').slice(0, 1500), metadata: { source: `synthetic/${i}.md` } }));
  }
  return out;
}

async function atScale(executor: SqlExecutor): Promise<string[]> {
  const collection = `bench_retrieval_scale_${process.pid}`;
  const embeddings = new HashingEmbeddings();
  const store = await PgVectorStore.create({ executor, embeddings, collection });
  const docs = await scaledCorpus(SCALE);
  const embedStart = performance.now();
  const vectors = await embeddings.embedDocuments(docs.map((doc) => runnel.searchableText(doc)));
  const embedSeconds = (performance.now() - embedStart) / 1000;
  // A bulk load, as docs/persistence.md advises: rows and the lexical index first, the HNSW graph built once
  // afterwards (inserting into a graph larger than shared_buffers crawls).
  const index = 'runnel_embeddings_384_hnsw_cosine';
  await executor.exec(`DROP INDEX IF EXISTS ${index}`);
  const buildIndex = () =>
    executor.transaction(async (tx) => {
      await tx.query(`SET LOCAL maintenance_work_mem = '1GB'`);
      await tx.query(`CREATE INDEX IF NOT EXISTS ${index} ON runnel_embeddings_384 USING hnsw (embedding vector_cosine_ops)`);
    });
  const insertStart = performance.now();
  let insertSeconds: number;
  try {
    for (let i = 0; i < docs.length; i += 5000) {
      await store.addVectors(vectors.slice(i, i + 5000), docs.slice(i, i + 5000));
      // Statistics as the collection grows: with those of when it was empty, the planner reads all of its
      // postings to replace a batch's (an index range over the collection instead of a probe per id).
      if (i % 20_000 === 0) await executor.exec('ANALYZE runnel_lexical_postings; ANALYZE runnel_lexical_terms; ANALYZE runnel_embeddings_384');
      if (process.stderr.isTTY) process.stderr.write(`\r${Math.min(i + 5000, docs.length)}/${docs.length}`);
    }
  } finally {
    insertSeconds = (performance.now() - insertStart) / 1000;
    await buildIndex();
  }
  const indexSeconds = (performance.now() - insertStart) / 1000 - insertSeconds;
  // After a bulk load: fresh statistics for the planner, and the visibility map that lets the
  // lexical search read postings from their index alone.
  await executor.exec('VACUUM (ANALYZE) runnel_lexical_postings');
  await store.analyze();
  const rows = [
    `| embedding ${docs.length} chunks (hashing, 384 dimensions) | ${embedSeconds.toFixed(1)} s | ${Math.round(docs.length / embedSeconds)} chunks/s |`,
    `| inserting them with the lexical index | ${insertSeconds.toFixed(1)} s | ${Math.round(docs.length / insertSeconds)} chunks/s |`,
    `| building the HNSW index | ${indexSeconds.toFixed(1)} s | ${Math.round(docs.length / indexSeconds)} chunks/s |`,
  ];
  const quality: string[] = [];
  for (const mode of MODES) {
    const q = await measure(store, mode);
    quality.push(`| ${docs.length} chunks | ${mode} | ${q.hit4.toFixed(3)} | ${q.mrr.toFixed(3)} | ${q.p50.toFixed(2)} | ${q.p99.toFixed(2)} |`);
  }
  const filtered = await measure(store, 'hybrid', { source: { $in: readdirSync(CORPUS) } });
  quality.push(`| ${docs.length} chunks, filter on source | hybrid | ${filtered.hit4.toFixed(3)} | ${filtered.mrr.toFixed(3)} | ${filtered.p50.toFixed(2)} | ${filtered.p99.toFixed(2)} |`);
  if (process.env.BENCH_KEEP === '1') return [...rows, '', `(kept as collection ${collection})`, ...quality];
  await store.delete({ filter: {} });
  await executor.exec('VACUUM runnel_embeddings_384');
  await executor.exec('VACUUM runnel_lexical_postings');
  return [...rows, '', '| collection | search | hit@4 | MRR@10 | p50 ms | p99 ms |', '|---|---|---:|---:|---:|---:|', ...quality];
}

const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
const postgres = pgExecutor(pool);
const pglite = pgliteExecutor(await PGlite.create({ extensions: { vector } }));
try {
  console.log(`# Retrieval: ${QA.length} questions over pino's docs (${readdirSync(CORPUS).length} Markdown files)\n`);
  const old = process.env.BENCH_ONLY_SCALE === '1' ? undefined : await before();
  console.log('| store | search | hit@4 | MRR@10 | p50 ms | p99 ms |');
  console.log('|---|---|---:|---:|---:|---:|');
  for (const mode of old === undefined ? [] : MODES) {
    const q = old?.[mode] as Quality;
    console.log(`| before: paragraph chunks, word hashing (memory) | ${mode} | ${q.hit4.toFixed(3)} | ${q.mrr.toFixed(3)} | ${q.p50.toFixed(2)} | ${q.p99.toFixed(2)} |`);
  }
  const ingests: string[] = [];
  for (const [name, executor] of old === undefined ? [] : ([['Postgres', postgres], ['PGlite', pglite]] as const)) {
    const { rows, ingest } = await onDatabase(name, executor);
    for (const row of rows) console.log(row);
    ingests.push(ingest);
  }
  console.log('\n| ingest (`ingestPaths`) | chunks | time | throughput |\n|---|---|---:|---:|');
  for (const row of ingests) console.log(row);
  if (SCALE > 0) {
    console.log(`\n## Postgres at ${SCALE} chunks\n\n| step | time | throughput |\n|---|---:|---:|`);
    for (const row of await atScale(postgres)) console.log(row);
  }
} finally {
  await postgres.close();
  await pglite.close();
}
