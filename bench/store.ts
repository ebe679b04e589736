/**
 * `npm run bench:store`:
 *
 * - Cache: `/invoke` latency p50/p99 on a hit vs a miss, Redis cache, a fake
 *   model that takes 200 ms (in-process requests, 20 at a time).
 * - Vectors: N documents (default 100,000; BENCH_DOCS to change), 384
 *   dimensions, on Postgres (DATABASE_URL, default the test database) and on
 *   PGlite: insert throughput, HNSW top-10 query p50/p99, recall@10 against
 *   exact search, on a topical corpus (clustered like real text) and a
 *   uniform one (the worst case); BENCH_CORPUS to choose. Goal: recall ≥ 0.95
 *   with p50 under 10 ms on Postgres.
 */
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import { Redis } from 'ioredis';
import pg from 'pg';
import type { SqlExecutor } from '../src/index.js';
import { runnel } from './runnel.js';
import { percentile, rng } from './stats.js';

const { buildApp, ChatPromptTemplate, defineChain, Document, FakeListChatModel, HashingEmbeddings, PgVectorStore, pgExecutor, pgliteExecutor, RedisCache, StringOutputParser } = runnel;

const DOCS = Number(process.env.BENCH_DOCS ?? 100_000);
const QUERIES = 200;
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/runnel_test';



async function cacheBench(): Promise<void> {
  const redis = new Redis('redis://127.0.0.1:6379');
  const namespace = `runnel-bench:${Date.now()}`;
  const model = new FakeListChatModel({ responses: ['Cached?'], sleepMs: 100, cache: new RedisCache({ client: redis, namespace }) });
  const app = await buildApp({ chains: [defineChain({ path: '/joke', runnable: ChatPromptTemplate.fromMessages([['human', 'A joke about {topic}']]).pipe(model).pipe(new StringOutputParser()) })] as never });
  const call = async (topic: string): Promise<number> => {
    const start = performance.now();
    const res = await app.inject({ method: 'POST', url: '/joke/invoke', payload: { input: { topic } } });
    if (res.statusCode !== 200) throw new Error(res.body);
    return performance.now() - start;
  };
  await call('warm-up');
  const run = async (topics: string[]): Promise<number[]> => {
    const times: number[] = [];
    for (let i = 0; i < topics.length; i += 20) times.push(...(await Promise.all(topics.slice(i, i + 20).map(call))));
    return times;
  };
  const misses = await run(Array.from({ length: 200 }, (_, i) => `miss-${i}`));
  const hits = await run(Array.from({ length: 200 }, (_, i) => `miss-${i}`));
  console.log('| /invoke, Redis response cache, model takes 200 ms | p50 ms | p99 ms |');
  console.log('|---|---:|---:|');
  console.log(`| miss (model called) | ${percentile(misses, 50).toFixed(1)} | ${percentile(misses, 99).toFixed(1)} |`);
  console.log(`| hit (from Redis) | ${percentile(hits, 50).toFixed(2)} | ${percentile(hits, 99).toFixed(2)} |`);
  await app.close();
  const keys = await redis.keys(`${namespace}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
}

type Corpus = 'topical' | 'uniform';

/**
 * Texts of 16 words. `uniform`: every word from one 4,000-word vocabulary
 * with a Zipf-like skew — embedded, the vectors scatter almost evenly over
 * the sphere, the hardest case for any graph index. `topical`: like real
 * documents, each is about one of 500 topics (three words in four from that
 * topic's 40-word vocabulary, the rest from the shared one), so neighbours
 * cluster as real embeddings do.
 */
function corpus(kind: Corpus, n: number, seed: number): string[] {
  const random = rng(seed);
  const common = () => `w${Math.floor(4000 * random() ** 2)}`;
  if (kind === 'uniform') return Array.from({ length: n }, () => Array.from({ length: 16 }, common).join(' '));
  return Array.from({ length: n }, () => {
    const topic = Math.floor(500 * random());
    return Array.from({ length: 16 }, () => (random() < 0.75 ? `t${topic}_${Math.floor(40 * random() ** 2)}` : common())).join(' ');
  });
}

async function vectorBench(name: string, executor: SqlExecutor, kind: Corpus, efSearch?: number): Promise<Record<string, string>> {
  const embeddings = new HashingEmbeddings({ dimensions: 384 });
  const collection = `bench_${Date.now()}`;
  const store = await PgVectorStore.create({ executor, embeddings, collection, batchSize: 500, efSearch });
  await executor.exec('VACUUM runnel_embeddings_384');
  const texts = corpus(kind, DOCS, 1);
  const vectors = await embeddings.embedDocuments(texts);
  const docs = texts.map((text, i) => new Document({ id: `d${i}`, pageContent: text, metadata: { i } }));
  const insertStart = performance.now();
  for (let i = 0; i < docs.length; i += 5000) await store.addVectors(vectors.slice(i, i + 5000), docs.slice(i, i + 5000));
  const insertSeconds = (performance.now() - insertStart) / 1000;
  // Fresh statistics, as after ingestion: with the empty table's, the planner sorts every row instead of using HNSW.
  await executor.exec('ANALYZE');
  const queries = corpus(kind, QUERIES, 2);
  const queryVectors = await embeddings.embedDocuments(queries);
  // Every query is timed first; the exact search (large arrays, garbage) runs afterwards, so its
  // collections never land inside a timed query.
  const latencies: number[] = [];
  const results: { id: string | undefined; score: number }[][] = [];
  for (const qv of queryVectors) {
    const start = performance.now();
    const found = await store.searchVectors(qv, 10);
    latencies.push(performance.now() - start);
    results.push(found.map((m) => ({ id: m.document.id, score: m.score })));
  }
  let recall = 0;
  let tieAware = 0;
  for (const [q, qv] of queryVectors.entries()) {
    const found = results[q] ?? [];
    // Exact top-10: cosine over every vector (all are unit length, so a dot product).
    const ranked = vectors
      .map((v, i) => {
        let dot = 0;
        for (let d = 0; d < 384; d++) dot += (v[d] as number) * (qv[d] as number);
        return [i, dot] as const;
      })
      .sort((a, b) => b[1] - a[1]);
    const exact = ranked.slice(0, 10).map(([i]) => `d${i}`);
    const got = new Set(found.map((m) => m.id));
    recall += exact.filter((id) => got.has(id)).length / 10;
    // Ties: a result as close as the exact 10th neighbour is as good as any of them (ann-benchmarks counts it too).
    const tenth = (ranked[9]?.[1] ?? -Infinity) - 1e-6;
    tieAware += found.filter((m) => m.score >= tenth).length / 10;
  }
  // Leave nothing behind: deleted rows stay in the HNSW graph as dead tuples until VACUUM, and would
  // crowd the next run's candidate lists (a 100,000-row leftover halves recall).
  await store.delete({ filter: {} });
  await executor.exec('VACUUM runnel_embeddings_384');
  return {
    store: `${name}, ${kind} corpus`,
    'insert docs/s': Math.round(DOCS / insertSeconds).toLocaleString('en-US'),
    'top-10 p50 ms': percentile(latencies, 50).toFixed(2),
    'top-10 p99 ms': percentile(latencies, 99).toFixed(2),
    'recall@10': `${(recall / QUERIES).toFixed(3)} (with ties: ${(tieAware / QUERIES).toFixed(3)})`,
  };
}

async function main(): Promise<void> {
  console.log(`node ${process.version}; ${DOCS.toLocaleString('en-US')} documents, 384 dimensions, ${QUERIES} queries\n`);
  const stores = (process.env.BENCH_STORES ?? 'cache,postgres-default,postgres,pglite').split(',');
  const corpora = (process.env.BENCH_CORPUS ?? 'topical,uniform').split(',') as Corpus[];
  if (stores.includes('cache')) await cacheBench();
  // Rows print as soon as they are measured: a long run that is cut short keeps what it measured.
  console.log('\n| store | insert docs/s | top-10 p50 ms | top-10 p99 ms | recall@10 |');
  console.log('|---|---:|---:|---:|---:|');
  const print = (row: Record<string, string>) =>
    console.log(`| ${row.store} | ${row['insert docs/s']} | ${row['top-10 p50 ms']} | ${row['top-10 p99 ms']} | ${row['recall@10']} |`);
  if (stores.includes('postgres-default') || stores.includes('postgres')) {
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
    pool.on('error', () => {});
    const postgres = pgExecutor(pool);
    for (const kind of corpora) {
      if (stores.includes('postgres-default')) print(await vectorBench("Postgres 15 + pgvector (ef_search 40, pgvector's default)", postgres, kind, 40));
      if (stores.includes('postgres')) print(await vectorBench("Postgres 15 + pgvector (ef_search 200, Runnel's default)", postgres, kind));
    }
    await postgres.close();
  }
  if (stores.includes('pglite')) {
    const lite = pgliteExecutor(await PGlite.create({ extensions: { vector } }));
    for (const kind of corpora) print(await vectorBench("PGlite + pgvector, in-process (ef_search 200, Runnel's default)", lite, kind));
    await lite.close();
  }
}

await main();
