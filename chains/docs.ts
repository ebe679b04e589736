/**
 * The `docs` collection that `/rag` and `/agent` search: Runnel's own
 * `docs/` and README, split by section, embedded by feature hashing
 * (offline, no key needed) and indexed for BM25 in the pgvector store —
 * Postgres with DATABASE_URL, else PGlite — and searched by both, fused.
 * The store opens on first use and again after a failure, so the server
 * starts, and every other chain answers, while the database is down.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { HashingEmbeddings, ingestPaths, packageRoot, PgVectorStore, queryText, Runnable, RunnelError, searchSharingWords, SEED_ORIGIN, type IngestResult, type RunType } from '../src/index.js';
import type { ChainContext } from './model.js';

/** A retrieved passage, as `/rag` returns it. */
export interface Source {
  id: string;
  content: string;
  /** `source` (the file), `loc.lines` `{from, to}` and `headings` (the section's heading path), and the file's `title`. */
  metadata: Record<string, unknown>;
  /** Relevance to the question, higher is closer: the reciprocal-rank fusion of its BM25 and vector ranks. */
  score: number;
}

export const sourceSchema = z.object({
  id: z.string(),
  content: z.string(),
  metadata: z
    .record(z.string(), z.unknown())
    .describe('source (the file), loc.lines {from, to}, headings (the heading path of its section, e.g. ["# Runnel", "## Persistence"]) and title'),
  score: z.number().describe('Relevance to the question, higher is closer: the reciprocal-rank fusion of its BM25 and vector ranks'),
});

/** What marks the server's own passages in the collection: the seed touches those alone. */
const SEEDED = { origin: SEED_ORIGIN } as const;

/** The `docs` collection, opened lazily. */
export class DocsCollection {
  readonly name = 'docs';
  private opening: Promise<PgVectorStore> | undefined;

  constructor(private readonly context: ChainContext) {}

  /** The store; a failed open is retried at the next call. */
  store(): Promise<PgVectorStore> {
    this.opening ??= (async () => {
      const executor = await this.context.services.sql();
      // The collection is derived from files in the package: vectors of an earlier kind are replaced, not refused.
      const { services } = this.context;
      return PgVectorStore.create({
        executor,
        embeddings: new HashingEmbeddings(),
        collection: this.name,
        replaceIncompatible: true,
        // Read at each warning: the server points it at its log after the chains are made.
        warn: (fields, message) => services.onStoreWarning(fields, message),
      });
    })().catch((error: unknown) => {
      this.opening = undefined;
      throw error;
    });
    return this.opening;
  }

  /**
   * The `k` passages that best answer `query` (hybrid search). A passage
   * sharing no word of the question's content is kept only when no passage
   * does: a vector can be near for reasons a reader would not see.
   */
  async search(query: string, k: number): Promise<Source[]> {
    const store = await this.store();
    // While a seed fills a collection that held none of its passages (a first start, for tens of seconds), an
    // answer could cite nothing, or half: a retryable 503 says so, where a 200 said "no passage found". A seed
    // that brings a filled collection up to date (a restart, another replica) serves it meanwhile.
    if (!this.seeded) {
      for (const filling of this.fillings) {
        if (await filling) throw new RunnelError('RUNNEL_ERR_COLLECTION_NOT_READY', 'The docs collection is still being seeded: retry in a few seconds');
      }
    }
    return (await searchSharingWords(store, query, k)).map(({ document, score }) => ({ id: document.id as string, content: document.pageContent, metadata: document.metadata, score: Number(score.toFixed(6)) }));
  }

  /** True once the collection holds its documents (seeded now or on an earlier start): `/readyz` waits for it. */
  get ready(): boolean {
    return this.seeded;
  }

  private seeded = false;
  /** Per seed under way: whether it fills the collection from empty (known once the collection is read). */
  private readonly fillings = new Set<Promise<boolean>>();

  /**
   * Brings the package's own passages in line with its `docs/` and README:
   * embeds and indexes the passages it lacks, deletes the stale ones (an
   * edited file's old passages, and those of an earlier version's files that
   * are gone), and does nothing more when it is up to date. Its passages
   * carry `metadata.origin: "runnel"`, and it touches no other: what users
   * added with `npm run ingest` is left as it is, whatever its source is
   * named (a user's own `docs/runbook.md` too). Nor does it guess which
   * unmarked passages an earlier version's seed wrote: a collection seeded
   * before passages were marked keeps that seed's passages of sections
   * since changed (docs/persistence.md says how to drop them). Returns
   * undefined when nothing changed.
   */
  async seed(): Promise<IngestResult | undefined> {
    if (this.context.seedDocs === false) return this.leaveOwnOut();
    // Empty of the server's passages: the collection is being filled, and not yet worth a search. Known from
    // the start, so a search that comes meanwhile waits for the answer.
    const known = this.store().then((store) => store.sources(SEEDED));
    // (Never rejected: a failed read fails the seed, through `known`.)
    const filling = known.then((sources) => sources.length === 0, () => false);
    this.fillings.add(filling);
    try {
      return await this.seedInto(await this.store(), await known);
    } finally {
      this.fillings.delete(filling);
    }
  }

  /**
   * With the seed turned off: the passages an earlier start seeded are removed (the users' own are not), and the
   * collection is ready as it is — empty until `npm run ingest` fills it.
   */
  private async leaveOwnOut(): Promise<IngestResult | undefined> {
    const removed = await (await this.store()).delete({ filter: SEEDED });
    this.seeded = true;
    return removed === 0 ? undefined : { added: 0, updated: 0, skipped: 0, removed, failed: [] };
  }

  /** Seeds `store`, which held passages of the files `known` before (the files gone since are removed). */
  private async seedInto(store: PgVectorStore, known: readonly string[]): Promise<IngestResult | undefined> {
    const root = packageRoot();
    const paths = [join(root, 'README.md'), join(root, 'docs')].filter((path) => existsSync(path));
    const result = await ingestPaths(store, paths, { sourceRoot: root, sync: true, metadata: SEEDED });
    // The database went away midway: not seeded, and tried again (what was stored stays, and is skipped then).
    if (result.stopped !== undefined) throw result.stopped;
    if (result.failed.length === 0) {
      // The seed adds passages of files that exist only: those it knew before are all the gone ones there are.
      const gone = known.filter((source) => !existsSync(join(root, source)));
      if (gone.length > 0) result.removed += await store.delete({ filter: { source: { $in: gone }, ...SEEDED } });
    }
    this.seeded = true;
    return result.added === 0 && result.updated === 0 && result.removed === 0 && result.failed.length === 0 ? undefined : result;
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

  /** A retriever over the collection: a question in, the `k` best passages with scores out. */
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
    return this.docs.search(queryText(query, this.name), this.k);
  }
}
