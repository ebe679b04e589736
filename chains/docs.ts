/**
 * The `docs` collection that `/rag` and `/agent` search: Runnel's own
 * `docs/` and README, embedded by feature hashing (offline, no key needed)
 * into the pgvector store — Postgres with DATABASE_URL, else PGlite. The
 * store opens on first use and again after a failure, so the server starts,
 * and every other chain answers, while the database is down.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { HashingEmbeddings, ingestPaths, packageRoot, PgVectorStore, Runnable, type IngestResult, type RunType } from '../src/index.js';
import type { ChainContext } from './model.js';

/** A retrieved passage, as `/rag` returns it. */
export interface Source {
  id: string;
  content: string;
  metadata: Record<string, unknown>;
  /** Cosine similarity to the question (higher is closer). */
  score: number;
}

export const sourceSchema = z.object({
  id: z.string(),
  content: z.string(),
  metadata: z.record(z.string(), z.unknown()),
  score: z.number().describe('Cosine similarity to the question, higher is closer'),
});

/** The `docs` collection, opened lazily. */
export class DocsCollection {
  readonly name = 'docs';
  private opening: Promise<PgVectorStore> | undefined;

  constructor(private readonly context: ChainContext) {}

  /** The store; a failed open is retried at the next call. */
  store(): Promise<PgVectorStore> {
    this.opening ??= (async () => {
      const executor = await this.context.services.sql();
      return PgVectorStore.create({ executor, embeddings: new HashingEmbeddings(), collection: this.name });
    })().catch((error: unknown) => {
      this.opening = undefined;
      throw error;
    });
    return this.opening;
  }

  async search(query: string, k: number): Promise<Source[]> {
    const found = await (await this.store()).similaritySearchWithScore(query, k);
    return found.map(([doc, score]) => ({ id: doc.id as string, content: doc.pageContent, metadata: doc.metadata, score: Number(score.toFixed(4)) }));
  }

  /** True once the collection holds its documents (seeded now or on an earlier start): `/readyz` waits for it. */
  get ready(): boolean {
    return this.seeded;
  }

  private seeded = false;

  /** Fills an empty collection from the repository's `docs/` and README; does nothing when it holds documents. */
  async seed(): Promise<IngestResult | undefined> {
    const store = await this.store();
    if ((await store.count()) > 0) {
      this.seeded = true;
      return undefined;
    }
    const root = packageRoot();
    const paths = [join(root, 'README.md'), join(root, 'docs')].filter((path) => existsSync(path));
    const result = await ingestPaths(store, paths, { sourceRoot: root, chunkSize: 1000, overlap: 150 });
    this.seeded = true;
    return result;
  }

  /**
   * Seeds in the background, and again after a failure (the database down,
   * pgvector missing, the data directory locked by an ingest): after
   * `firstRetryMs` (default 5 s), doubling to 5 minutes. `report` hears each
   * outcome; `stop()` ends the retries.
   */
  seedInBackground(report: { seeded(result: IngestResult | undefined): void; failed(error: unknown, retryInMs: number): void }, firstRetryMs = 5_000): { stop(): void } {
    let timer: NodeJS.Timeout | undefined;
    let stopped = false;
    const attempt = (delayMs: number): void => {
      this.seed().then(
        (result) => report.seeded(result),
        (error: unknown) => {
          if (stopped) return;
          report.failed(error, delayMs);
          timer = setTimeout(() => attempt(Math.min(delayMs * 2, 300_000)), delayMs).unref();
        },
      );
    };
    attempt(firstRetryMs);
    return {
      stop: () => {
        stopped = true;
        clearTimeout(timer);
      },
    };
  }

  /** A retriever over the collection: a question in, the `k` closest passages with scores out. */
  retriever(k = 4): Runnable<string, Source[]> {
    return new DocsRetriever(this, k);
  }
}

class DocsRetriever extends Runnable<string, Source[]> {
  readonly name = 'DocsRetriever';
  override readonly runType: RunType = 'retriever';

  constructor(
    private readonly docs: DocsCollection,
    private readonly k: number,
  ) {
    super();
  }

  override get inputSchema() {
    return z.string();
  }

  override get outputSchema() {
    return z.array(sourceSchema);
  }

  protected override _call(query: string): Promise<Source[]> {
    return this.docs.search(String(query), this.k);
  }
}
