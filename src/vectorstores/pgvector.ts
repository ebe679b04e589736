/**
 * `PgVectorStore`: documents and vectors in Postgres with pgvector — or in
 * PGlite with the same extension, embedded, when no database is configured.
 * An idempotent migration at start (the extension, a collections table, one
 * embeddings table per vector length with an HNSW index, the lexical index
 * of `pg-lexical.ts`), batched transactional upserts by id, deletes by ids
 * or filter, nearest-neighbour and BM25 search with scores and filters
 * compiled to parameterised SQL, hybrid search and MMR from the shared base.
 */
import { randomUUID } from 'node:crypto';
import { RunnelError } from '../core/index.js';
import { Document, searchableText } from '../documents/index.js';
import type { Embeddings } from '../embeddings/index.js';
import type { Filter } from './filter.js';
import type { SearchMatch } from './fusion.js';
import { backfill, documentTerms, dropIndex, LEXICAL_COLUMN, lexicalSchema, lexicalSearch, lockCollection, reindex, type IndexedDocument } from './pg-lexical.js';
import { checkStorable, MAX_CONTENT_BYTES, MAX_METADATA_BYTES, METADATA_BYTES_COLUMN, processWarn, shippable, shippedColumns, storedMetadata, type SqlExecutor, type StoreWarn } from './sql.js';
import { compileFilter } from './sql-filter.js';
import { cosine, VectorStore, type ScoredMatch, type VectorSearchOptions } from './vector-store.js';

/** How distance is measured (the HNSW index uses the matching operator class). */
export type Distance = 'cosine' | 'l2' | 'inner_product';

const OPERATORS: Record<Distance, { op: string; ops: string; score: (d: string) => string }> = {
  cosine: { op: '<=>', ops: 'vector_cosine_ops', score: (d) => `1 - (${d})` },
  l2: { op: '<->', ops: 'vector_l2_ops', score: (d) => `-(${d})` },
  inner_product: { op: '<#>', ops: 'vector_ip_ops', score: (d) => `-(${d})` },
};

/** Options of {@link PgVectorStore.create}. */
export interface PgVectorStoreOptions {
  executor: SqlExecutor;
  embeddings: Embeddings;
  /** The collection documents belong to (default `default`). */
  collection?: string;
  distance?: Distance;
  /** Rows per INSERT (default 500). */
  batchSize?: number;
  /**
   * Candidates the HNSW search keeps (pgvector's `hnsw.ef_search`; default
   * 200, at least `k`). At 100,000 documents of clustered text, pgvector's
   * default of 40 finds 0.86 of the true top 10 and 200 finds 0.97, at a p50
   * of 2.5 ms (bench:store); wider costs latency.
   */
  efSearch?: number;
  /**
   * Collections holding fewer documents than this are searched exactly
   * (default 1,000; 0 always uses the HNSW index). The index spans every
   * collection of a vector length, so a small collection's rows are a few
   * among many others' and an approximate scan can meet one of them before
   * the nearest; reading them all costs about what the index does — 1.2 ms
   * at 1,000 rows of 384 dimensions, 1.8 ms at 2,000, 4.6 ms at 5,000
   * (`docs/persistence.md`).
   */
  exactSearchBelow?: number;
  /**
   * Empty the collection when it holds vectors of other embeddings (or of
   * other dimensions, or recorded with another distance), instead of
   * refusing to open it: for collections of derived data that are filled
   * again anyway (the `docs` collection of `/rag`).
   */
  replaceIncompatible?: boolean;
  /**
   * Postings a lexical search reads per query term, highest BM25 weight
   * first (default 2,000). A term in fewer documents is read whole, so
   * rare terms — the ones that decide a ranking — always count exactly; a
   * term in more is cut to its strongest documents, which keeps a search
   * over 100,000 chunks near 10 ms (bench:retrieval).
   */
  lexicalCandidates?: number;
  /**
   * Where a stored row that is not valid — skipped (past the size bounds of `docs/persistence.md`) or repaired
   * (the lexical statistics) — is reported, as `stored record not valid` with the collection and the row's id
   * (default: a process warning).
   */
  warn?: StoreWarn;
}

const toVector = (vector: readonly number[]): string => `[${vector.join(',')}]`;
const fromVector = (text: string): number[] => text.slice(1, -1).split(',').map(Number);

/** A search's `content`, `metadata` and `oversized` columns (see `shippedColumns`), made once. */
const SHIPPED = shippedColumns();

/**
 * Refuses (rolling back) a write whose stored row a read would skip: the document passed `checkStorable`, but
 * Postgres writes its metadata longer (`{"a": 1}` with spaces; `1e300` as 301 digits).
 */
function refuseOversized(rows: readonly { id: string; oversized: boolean }[]): void {
  const over = rows.find((row) => row.oversized);
  if (over === undefined) return;
  throw new RunnelError(
    'RUNNEL_ERR_INVALID_ARGUMENT',
    `Document ${over.id} would be stored past ${MAX_CONTENT_BYTES} bytes of text or ${MAX_METADATA_BYTES} bytes of metadata as JSON text (as Postgres writes it), which searches skip`,
  );
}

/**
 * Taken first by every migration step: replicas migrating one database at once take turns. A step runs without
 * the connection's statement timeout (the server's pool sets 5 s): adding the generated `metadata_bytes` column
 * rewrites a table and rebuilds its HNSW index, which takes longer on a collection of any size (a review: 30,000
 * rows, canceled at 5 s, every start's try the same, so an upgraded Postgres never searched again).
 */
const MIGRATION_LOCK = "SET LOCAL statement_timeout = 0; SELECT pg_advisory_xact_lock(hashtext('runnel_migrate'));";

/**
 * A pgvector-backed store.
 *
 * @example
 * const store = await PgVectorStore.create({ executor: pgExecutor(pool), embeddings: new HashingEmbeddings(), collection: 'docs' });
 */
export class PgVectorStore extends VectorStore {
  readonly collection: string;
  readonly distance: Distance;
  private readonly executor: SqlExecutor;
  private readonly table: string;
  private readonly batchSize: number;
  private readonly efSearch: number;
  private readonly exactSearchBelow: number;
  private readonly replaceIncompatible: boolean;
  private readonly lexicalCandidates: number;
  private readonly warn: StoreWarn;

  private constructor(options: PgVectorStoreOptions) {
    super(options.embeddings);
    this.executor = options.executor;
    this.collection = options.collection ?? 'default';
    this.distance = options.distance ?? 'cosine';
    this.batchSize = options.batchSize ?? 500;
    this.efSearch = options.efSearch ?? 200;
    this.exactSearchBelow = options.exactSearchBelow ?? 1000;
    this.replaceIncompatible = options.replaceIncompatible ?? false;
    this.lexicalCandidates = options.lexicalCandidates ?? 2000;
    this.warn = options.warn ?? processWarn;
    if (!Number.isInteger(this.lexicalCandidates) || this.lexicalCandidates < 1 || this.lexicalCandidates > 1_000_000) {
      throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `lexicalCandidates must be a whole number from 1 to 1,000,000, got ${this.lexicalCandidates}`);
    }
    if (!Number.isInteger(this.efSearch) || this.efSearch < 1 || this.efSearch > 1000) {
      throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `efSearch must be a whole number from 1 to 1000, got ${this.efSearch}`);
    }
    if (!Number.isInteger(this.exactSearchBelow) || this.exactSearchBelow < 0) {
      throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `exactSearchBelow must be a whole number from 0, got ${this.exactSearchBelow}`);
    }
    const dims = options.embeddings.dimensions;
    if (!Number.isInteger(dims) || dims < 1 || dims > 16_000) throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Unsupported vector length ${dims}`);
    this.table = `runnel_embeddings_${dims}`;
  }

  /** Connects the store, creating what is missing (safe to run at every start, by every replica). */
  static async create(options: PgVectorStoreOptions): Promise<PgVectorStore> {
    const store = new PgVectorStore(options);
    await store.migrate();
    return store;
  }

  private async migrate(): Promise<void> {
    const { ops } = OPERATORS[this.distance];
    const dims = this.embeddings.dimensions;
    // Replicas opening at once take turns (two CREATE EXTENSION or CREATE TABLE IF NOT EXISTS at once collide on
    // Postgres's catalog: "duplicate key value violates unique constraint"): each statement string runs as one
    // transaction, which holds the lock to its end.
    await this.executor.exec(`
      ${MIGRATION_LOCK}
      CREATE EXTENSION IF NOT EXISTS vector;
      CREATE TABLE IF NOT EXISTS runnel_collections (
        name text PRIMARY KEY,
        dimensions integer NOT NULL,
        distance text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE TABLE IF NOT EXISTS ${this.table} (
        collection text NOT NULL,
        id text NOT NULL,
        content text NOT NULL,
        metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
        embedding vector(${dims}) NOT NULL,
        PRIMARY KEY (collection, id)
      );
      CREATE INDEX IF NOT EXISTS ${this.table}_hnsw_${this.distance} ON ${this.table} USING hnsw (embedding ${ops});
    `);
    // Columns added by later versions, only when missing: ALTER TABLE takes the table's strongest lock even
    // when IF NOT EXISTS makes it a no-op, and would queue every search behind a long query at each open.
    const { rows: columns } = await this.executor.query<{ table_name: string; column_name: string }>(
      `SELECT table_name, column_name FROM information_schema.columns
       WHERE table_schema = current_schema() AND table_name = ANY($1::text[]) AND column_name = ANY($2::text[])`,
      [['runnel_collections', this.table], ['embedder', LEXICAL_COLUMN, METADATA_BYTES_COLUMN]],
    );
    const has = (table: string, column: string): boolean => columns.some((c) => c.table_name === table && c.column_name === column);
    if (!has('runnel_collections', 'embedder')) await this.executor.exec(`${MIGRATION_LOCK} ALTER TABLE runnel_collections ADD COLUMN IF NOT EXISTS embedder text`);
    if (!has(this.table, LEXICAL_COLUMN)) await this.executor.exec(`${MIGRATION_LOCK} ALTER TABLE ${this.table} ADD COLUMN IF NOT EXISTS ${LEXICAL_COLUMN} integer`);
    // The metadata's length as JSON text, computed by Postgres at every write (a hand UPDATE too), so a read can
    // skip an oversized row without reading it (sql.ts, shippable). Adding it rewrites the table, once.
    if (!has(this.table, METADATA_BYTES_COLUMN)) {
      await this.executor.exec(
        `${MIGRATION_LOCK} ALTER TABLE ${this.table} ADD COLUMN IF NOT EXISTS ${METADATA_BYTES_COLUMN} integer GENERATED ALWAYS AS (octet_length(metadata::text)) STORED`,
      );
    }
    await this.executor.exec(`${MIGRATION_LOCK} ${lexicalSchema(this.table)}`);
    const { rows } = await this.executor.query<{ dimensions: number; distance: string; embedder: string | null }>(
      `INSERT INTO runnel_collections (name, dimensions, distance) VALUES ($1, $2, $3)
       ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING dimensions, distance, embedder`,
      [this.collection, dims, this.distance],
    );
    let existing = rows[0];
    if (existing !== undefined && (existing.dimensions !== dims || existing.distance !== this.distance) && this.replaceIncompatible) {
      // Derived data: emptied and taken over at these dimensions — whether the embeddings changed or the
      // record was changed by hand (which kept the docs collection unopened, /rag failing and /readyz down).
      existing = await this.replaceCollection();
    }
    if (existing !== undefined && (existing.dimensions !== dims || existing.distance !== this.distance)) {
      throw new RunnelError(
        'RUNNEL_ERR_INVALID_ARGUMENT',
        `Collection ${this.collection} holds ${existing.dimensions}-dimensional ${existing.distance} vectors, not ${dims}-dimensional ${this.distance}`,
      );
    }
    if (existing !== undefined) await this.checkEmbedder(existing.embedder);
    // Rows stored before the lexical index existed join it now.
    await backfill(this.executor, this.table, this.collection, this.warn);
  }

  /**
   * Empties the collection (its rows in its recorded dimensions' table, if that table exists, and in this
   * one, and its lexical index) and records it at this store's dimensions and distance, in one transaction;
   * the record as it then stands. The record is read again under the collection's lock: another replica
   * that opened at the same time may have taken the collection over and filled it already (a review: the
   * second emptied what the first had seeded), and then it is left as it is.
   */
  private async replaceCollection(): Promise<{ dimensions: number; distance: string; embedder: string | null }> {
    return this.executor.transaction(async (tx) => {
      await lockCollection(tx, this.collection);
      const { rows: records } = await tx.query<{ dimensions: number; distance: string; embedder: string | null }>(
        'SELECT dimensions, distance, embedder FROM runnel_collections WHERE name = $1 FOR UPDATE',
        [this.collection],
      );
      const record = records[0];
      if (record !== undefined && record.dimensions === this.embeddings.dimensions && record.distance === this.distance) return record;
      const recordedDimensions = record?.dimensions ?? 0;
      const tables = [this.table];
      if (Number.isInteger(recordedDimensions) && recordedDimensions >= 1 && recordedDimensions <= 16_000 && recordedDimensions !== this.embeddings.dimensions) {
        const old = `runnel_embeddings_${recordedDimensions}`;
        const { rows } = await tx.query<{ found: string | null }>(`SELECT to_regclass($1)::text AS found`, [old]);
        if (rows[0]?.found !== null && rows[0]?.found !== undefined) tables.push(old);
      }
      for (const table of tables) await tx.query(`DELETE FROM ${table} WHERE collection = $1`, [this.collection]);
      await dropIndex(tx, this.collection);
      await tx.query(`UPDATE runnel_collections SET dimensions = $2, distance = $3, embedder = NULL WHERE name = $1`, [this.collection, this.embeddings.dimensions, this.distance]);
      return { dimensions: this.embeddings.dimensions, distance: this.distance, embedder: null };
    });
  }

  /**
   * Records which embeddings fill the collection, and refuses others: a
   * query vector of one kind against stored vectors of another finds noise.
   * A collection from before the record existed is checked by embedding one
   * of its documents again (for offline embeddings, which cost nothing).
   */
  private async checkEmbedder(recorded: string | null): Promise<void> {
    const id = this.embeddings.id;
    if (id === undefined || recorded === id) return;
    let compatible = recorded === null;
    if (recorded === null && id.startsWith('hashing:')) {
      // A few rows, embedded again both ways an earlier version could have (with or without a heading path):
      // one that matches settles it; rows whose text gives no features at all say nothing either way.
      const { rows } = await this.executor.query<{ content: string; metadata: Record<string, unknown> | string; embedding: string }>(
        `SELECT content, metadata, embedding::text AS embedding FROM ${this.table} WHERE collection = $1 AND ${shippable()} ORDER BY id LIMIT 5`,
        [this.collection],
      );
      let informative = false;
      let matched = false;
      for (const row of rows) {
        const metadata = storedMetadata(row.metadata);
        const stored = fromVector(row.embedding);
        const candidates = await this.embeddings.embedDocuments([searchableText({ pageContent: row.content, metadata }), row.content]);
        if (candidates.every((vector) => vector.every((x) => x === 0))) continue;
        informative = true;
        if (candidates.some((vector) => cosine(vector, stored) > 0.999)) {
          matched = true;
          break;
        }
      }
      compatible = !informative || matched;
    }
    if (!compatible) {
      if (!this.replaceIncompatible) {
        throw new RunnelError(
          'RUNNEL_ERR_INVALID_ARGUMENT',
          `Collection ${this.collection} holds vectors of other embeddings (${recorded ?? 'an earlier kind'}), not ${id}: open it with the embeddings it was built with, or ingest into a new collection`,
        );
      }
      await this.delete({ filter: {} });
    }
    await this.executor.query(`UPDATE runnel_collections SET embedder = $2 WHERE name = $1`, [this.collection, id]);
  }

  async addVectors(vectors: number[][], documents: Document[]): Promise<string[]> {
    if (vectors.length !== documents.length) throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'addVectors needs one vector per document');
    const ids = documents.map((doc) => doc.id ?? randomUUID());
    for (const doc of documents) checkStorable(doc);
    for (const vector of vectors) {
      if (vector.length !== this.embeddings.dimensions) {
        throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Vector of ${vector.length} dimensions for a store of ${this.embeddings.dimensions}`);
      }
    }
    for (let start = 0; start < documents.length; start += this.batchSize) {
      const end = Math.min(start + this.batchSize, documents.length);
      // The last of repeated ids wins, as in a sequence of upserts.
      const last = new Map<string, number>();
      for (let i = start; i < end; i++) last.set(ids[i] as string, i);
      const order = [...last.values()].sort((a, b) => a - b);
      const counts = documentTerms(order.map((i) => documents[i] as Document));
      const params: unknown[] = [this.collection];
      const rows = order.map((i, n) => {
        const doc = documents[i] as Document;
        const terms = counts[n] as { length: number };
        params.push(ids[i], doc.pageContent, JSON.stringify(doc.metadata), toVector(vectors[i] as number[]), terms.length);
        const p = params.length;
        return `($1, $${p - 4}, $${p - 3}, $${p - 2}::jsonb, $${p - 1}::vector, $${p}::integer)`;
      });
      // Row, postings and statistics change together: a search never sees a document without its terms.
      await this.executor.transaction(async (tx) => {
        await lockCollection(tx, this.collection);
        const { rows: replaced } = await tx.query<IndexedDocument>(
          `SELECT id, lexical_length AS length FROM ${this.table} WHERE collection = $1 AND id = ANY($2::text[]) ORDER BY id FOR UPDATE`,
          [this.collection, [...last.keys()]],
        );
        const { rows: written } = await tx.query<{ id: string; oversized: boolean }>(
          `INSERT INTO ${this.table} (collection, id, content, metadata, embedding, lexical_length) VALUES ${rows.join(', ')}
           ON CONFLICT (collection, id) DO UPDATE SET content = EXCLUDED.content, metadata = EXCLUDED.metadata, embedding = EXCLUDED.embedding,
             lexical_length = EXCLUDED.lexical_length
           RETURNING id, NOT ${shippable()} AS oversized`,
          params,
        );
        refuseOversized(written);
        await reindex(tx, this.collection, replaced, order.map((i, n) => ({ id: ids[i] as string, counts: counts[n] as (typeof counts)[number] })));
      });
    }
    return ids;
  }

  async delete(options: { ids?: string[]; filter?: Filter }): Promise<number> {
    this.checkDelete(options);
    return this.deleteWhere(options.ids === undefined ? undefined : { ids: options.ids, keep: false }, options.filter);
  }

  /** Deletes the documents that pass `filter` and are not in `ids`; returns how many. */
  async deleteExcept(ids: string[], filter: Filter = {}): Promise<number> {
    this.checkDelete({ filter });
    return this.deleteWhere({ ids, keep: true }, filter);
  }

  private async deleteWhere(byId: { ids: string[]; keep: boolean } | undefined, filter: Filter | undefined): Promise<number> {
    const params: unknown[] = [this.collection];
    let where = 'collection = $1';
    if (byId !== undefined) {
      params.push(byId.ids);
      where += byId.keep ? ` AND NOT (id = ANY($${params.length}::text[]))` : ` AND id = ANY($${params.length}::text[])`;
    }
    if (filter !== undefined) {
      const compiled = compileFilter(filter, 'metadata', params.length + 1);
      params.push(...compiled.params);
      where += ` AND (${compiled.sql})`;
    }
    const everything = byId === undefined && filter !== undefined && Object.keys(filter).length === 0;
    return this.executor.transaction(async (tx) => {
      await lockCollection(tx, this.collection);
      if (everything) {
        // Emptying the collection: its whole index goes, without reading back what each row added.
        const { rows } = await tx.query<{ n: string | number }>(`WITH gone AS (DELETE FROM ${this.table} WHERE collection = $1 RETURNING 1) SELECT count(*) AS n FROM gone`, [this.collection]);
        await dropIndex(tx, this.collection);
        return Number(rows[0]?.n ?? 0);
      }
      const { rows } = await tx.query<IndexedDocument>(
        `DELETE FROM ${this.table} WHERE ${where} RETURNING id, lexical_length AS length`,
        params,
      );
      await reindex(tx, this.collection, rows, []);
      return rows.length;
    });
  }

  async searchVectors(vector: number[], k: number, filter?: Filter, options: VectorSearchOptions = {}): Promise<ScoredMatch[]> {
    const { op, score } = OPERATORS[this.distance];
    const params: unknown[] = [this.collection, toVector(vector), k];
    let where = 'collection = $1';
    if (filter !== undefined) {
      const compiled = compileFilter(filter, 'metadata', params.length + 1);
      params.push(...compiled.params);
      where += ` AND (${compiled.sql})`;
    }
    const distance = `embedding ${op} $2::vector`;
    type Row = { id: string; content: string; metadata: Record<string, unknown>; embedding?: string; score: number; oversized: boolean };
    // Vectors as text cost about 1 ms per row to print and parse: read only when asked for.
    const embedding = options.withEmbeddings === true ? ', embedding::text AS embedding' : '';
    // The settings hold for this transaction only. Iterative scans: collections share one table and filters
    // apply after the index, so the scan goes on until it has k matching rows instead of returning fewer.
    const rows = await this.executor.transaction(async (tx) => {
      const { rows: settings } = await tx.query<{ documents: string | number | null }>(
        `SELECT set_config('hnsw.ef_search', $1, true), set_config('hnsw.iterative_scan', 'relaxed_order', true),
           (SELECT documents FROM runnel_lexical_stats WHERE collection = $2) AS documents`,
        [String(Math.max(this.efSearch, k)), this.collection],
      );
      const select = (order: string): Promise<{ rows: Row[] }> =>
        tx.query<Row>(
          // The sizes are checked on the k rows kept only (a subquery with LIMIT is not flattened into this one).
          `SELECT id, ${SHIPPED}${embedding}, score FROM (
             SELECT id, content, metadata, ${METADATA_BYTES_COLUMN}, embedding, ${score(distance)} AS score FROM ${this.table} WHERE ${where} ORDER BY ${order} LIMIT $3
           ) kept`,
          params,
        );
      // An ordering expression that is not the index's reads this collection's rows through the primary key.
      const exact = `(${distance}) + 0`;
      if (Number(settings[0]?.documents ?? 0) < this.exactSearchBelow) return (await select(exact)).rows;
      const found = (await select(distance)).rows;
      if (found.length >= k) return found;
      // Fewer than k: the collection may hold fewer, or the iterative scan stopped (hnsw.max_scan_tuples) among
      // another collection's rows and dead tuples before it found this one's. An exact search settles it.
      return (await select(exact)).rows;
    });
    // relaxed_order may return neighbours slightly out of order.
    rows.sort((a, b) => Number(b.score) - Number(a.score));
    return this.served(rows).map((row) => ({
      document: new Document({ id: row.id, pageContent: row.content, metadata: storedMetadata(row.metadata) }),
      score: Number(row.score),
      ...(row.embedding === undefined ? {} : { embedding: fromVector(row.embedding) }),
    }));
  }

  override async searchTerms(terms: string[], k: number, filter?: Filter): Promise<SearchMatch[]> {
    const rows = await lexicalSearch(this.executor, { collection: this.collection, table: this.table, terms, k, filter, perTerm: this.lexicalCandidates, warn: this.warn });
    return this.served(rows).map((row) => ({
      document: new Document({ id: row.id, pageContent: row.content, metadata: storedMetadata(row.metadata) }),
      score: Number(row.score),
    }));
  }

  /**
   * The rows a search found less those too large to ship (their text and metadata were not read), reported
   * once per search: the rest are served.
   */
  private served<T extends { id: string; oversized: boolean }>(rows: T[]): T[] {
    const skipped = rows.filter((row) => row.oversized).map((row) => row.id);
    if (skipped.length === 0) return rows;
    this.warn({ code: 'RUNNEL_ERR_STORED_RECORD_INVALID', collection: this.collection, ids: skipped, reason: 'text or metadata past the size a store writes: skipped' }, 'stored record not valid');
    return rows.filter((row) => !row.oversized);
  }

  /** The stored metadata of those of `ids` the collection holds (with `having`, only those whose metadata includes those entries). */
  async metadataOf(ids: string[], having: Record<string, string | number | boolean> = {}): Promise<Map<string, Record<string, unknown>>> {
    if (ids.length === 0) return new Map();
    const { rows } = await this.executor.query<{ id: string; metadata: unknown }>(
      `SELECT id, metadata FROM ${this.table} WHERE collection = $1 AND id = ANY($2::text[]) AND ${shippable()} AND metadata @> $3::jsonb`,
      [this.collection, ids, JSON.stringify(having)],
    );
    return new Map(rows.map((row) => [row.id, storedMetadata(row.metadata)]));
  }

  /**
   * Replaces the metadata of documents the collection holds, leaving their text, vectors and lexical index
   * as they are (a passage that moved in its file: its line range, with the same text and headings).
   */
  async updateMetadata(docs: readonly Document[]): Promise<number> {
    if (docs.length === 0) return 0;
    for (const doc of docs) checkStorable({ id: doc.id, pageContent: '', metadata: doc.metadata });
    const rows = docs.map((doc) => ({ id: doc.id, metadata: doc.metadata }));
    return this.executor.transaction(async (tx) => {
      const { rows: updated } = await tx.query<{ id: string; oversized: boolean }>(
        `UPDATE ${this.table} AS t SET metadata = e.value->'metadata' FROM jsonb_array_elements($2::jsonb) AS e WHERE t.collection = $1 AND t.id = e.value->>'id'
         RETURNING t.id, NOT ${shippable('t')} AS oversized`,
        [this.collection, JSON.stringify(rows)],
      );
      refuseOversized(updated);
      return updated.length;
    });
  }

  /** Which of `ids` the collection already holds (with `having`, only those whose metadata includes those entries). */
  async existingIds(ids: string[], having: Record<string, string | number | boolean> = {}): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const { rows } = await this.executor.query<{ id: string }>(
      `SELECT id FROM ${this.table} WHERE collection = $1 AND id = ANY($2::text[]) AND ${shippable()} AND metadata @> $3::jsonb`,
      [this.collection, ids, JSON.stringify(having)],
    );
    return new Set(rows.map((row) => row.id));
  }

  /**
   * Refreshes the planner's statistics. Run after a bulk load: with the
   * statistics of a small table, Postgres sorts every row instead of using
   * the HNSW index (exact but slow).
   */
  async analyze(): Promise<void> {
    await this.executor.exec(`ANALYZE ${this.table}; ANALYZE runnel_lexical_postings; ANALYZE runnel_lexical_terms;`);
  }

  /** The distinct `metadata.source` values of the collection's documents (those with a string source; with `filter`, of those passing it). */
  async sources(filter?: Filter): Promise<string[]> {
    const params: unknown[] = [this.collection];
    let where = `collection = $1 AND ${shippable()} AND jsonb_typeof(metadata->'source') = 'string'`;
    if (filter !== undefined) {
      const compiled = compileFilter(filter, 'metadata', 2);
      params.push(...compiled.params);
      where += ` AND (${compiled.sql})`;
    }
    const { rows } = await this.executor.query<{ source: string }>(`SELECT DISTINCT metadata->>'source' AS source FROM ${this.table} WHERE ${where}`, params);
    return rows.map((row) => row.source);
  }

  /** How many documents the collection holds. */
  async count(): Promise<number> {
    const { rows } = await this.executor.query<{ n: string | number }>(`SELECT count(*) AS n FROM ${this.table} WHERE collection = $1`, [this.collection]);
    return Number(rows[0]?.n ?? 0);
  }
}
