/**
 * The lexical index of the pgvector store: an inverted index in three
 * tables beside the vectors, kept in step with them in the same
 * transaction, so BM25 ranks with the collection's statistics as they are
 * now — updated on every upsert and delete, never rebuilt.
 *
 * - `runnel_lexical_postings` (collection, id, term) → term frequency, the
 *   document's length and the term's weight in it: one row per distinct
 *   term of a document, read by term in weight order.
 * - `runnel_lexical_terms` (collection, term) → document frequency.
 * - `runnel_lexical_stats` (collection) → documents and their total length.
 *
 * Postings are keyed by document, so replacing or deleting one takes back
 * exactly what it added; each embeddings row keeps its length in terms
 * (`lexical_length`, null until it is indexed). Terms come from
 * `countTerms` in JavaScript, so Postgres and PGlite index the same terms
 * as the in-memory store.
 */
import { searchableText, type Document } from '../documents/index.js';
import type { Filter } from './filter.js';
import { BM25, countTerms, termScore, type TermCounts } from './lexical.js';
import { RunnelError } from '../core/index.js';
import { shippedColumns, storedMetadata, type SqlExecutor, type SqlQueryable, type StoreWarn } from './sql.js';
import { compileFilter } from './sql-filter.js';

/** The column an embeddings table gains; added only when missing (ALTER TABLE locks the table even when it changes nothing). */
export const LEXICAL_COLUMN = 'lexical_length';

/** The tables, and the index of an embeddings table's rows not yet indexed (idempotent; the column exists). */
export function lexicalSchema(table: string): string {
  return `
    CREATE INDEX IF NOT EXISTS ${table}_unindexed ON ${table} (collection) WHERE lexical_length IS NULL;
    CREATE TABLE IF NOT EXISTS runnel_lexical_postings (
      collection text NOT NULL,
      id text NOT NULL,
      term text NOT NULL,
      tf integer NOT NULL,
      length integer NOT NULL,
      impact real NOT NULL,
      PRIMARY KEY (collection, id, term)
    );
    CREATE INDEX IF NOT EXISTS runnel_lexical_postings_impact ON runnel_lexical_postings (collection, term, impact DESC) INCLUDE (id, tf, length);
    CREATE TABLE IF NOT EXISTS runnel_lexical_terms (
      collection text NOT NULL,
      term text NOT NULL,
      df integer NOT NULL,
      PRIMARY KEY (collection, term)
    );
    CREATE TABLE IF NOT EXISTS runnel_lexical_stats (
      collection text PRIMARY KEY,
      documents bigint NOT NULL,
      total_length bigint NOT NULL
    );
  `;
}

/**
 * Serialises the writers of one collection until the transaction ends, so
 * each reads the rows it replaces as they are: two replicas upserting the
 * same new id could otherwise both count it.
 */
export async function lockCollection(tx: SqlQueryable, collection: string): Promise<void> {
  await tx.query(`SELECT pg_advisory_xact_lock(hashtext('runnel_lexical'), hashtext($1))`, [collection]);
}

/** A document leaving the index (replaced or deleted): its length in terms, or null when it was never indexed. */
export interface IndexedDocument {
  id: string;
  length: number | null;
}

/** The terms to index for each document. */
export function documentTerms(documents: readonly Document[]): TermCounts[] {
  return documents.map((doc) => countTerms(searchableText(doc)));
}

/**
 * Moves the index from `removed` (documents replaced or deleted) to `added`
 * (documents written), in the caller's transaction. Each posting records
 * its BM25 term weight as the collection stands (`impact`), the order in
 * which a search reads a common term's postings. Document frequencies are
 * updated in term order, so concurrent writers wait for each other instead
 * of deadlocking.
 */
export async function reindex(
  tx: SqlQueryable,
  collection: string,
  removed: readonly IndexedDocument[],
  added: readonly { id: string; counts: TermCounts }[],
): Promise<void> {
  const df = new Map<string, number>();
  const gone = removed.filter((doc) => doc.length !== null);
  let documents = -gone.length;
  let totalLength = -gone.reduce((sum, doc) => sum + (doc.length ?? 0), 0);
  // Postings go for every id written or deleted, not only for rows that say they were indexed: postings a
  // writer without the index left behind (a replica of an earlier version, mid-deploy) are cleared, not duplicated.
  const ids = [...new Set([...removed.map((doc) => doc.id), ...added.map((doc) => doc.id)])];
  if (ids.length > 0) {
    const { rows } = await tx.query<{ term: string; n: number }>(
      `WITH gone AS (DELETE FROM runnel_lexical_postings WHERE collection = $1 AND id = ANY($2::text[]) RETURNING term)
       SELECT term, count(*)::integer AS n FROM gone GROUP BY term`,
      [collection, ids],
    );
    for (const row of rows) df.set(row.term, -Number(row.n));
  }
  if (added.length > 0) {
    const { rows } = await tx.query<{ documents: string | number; total_length: string | number }>(
      `SELECT documents, total_length FROM runnel_lexical_stats WHERE collection = $1`,
      [collection],
    );
    const addedLength = added.reduce((sum, doc) => sum + doc.counts.length, 0);
    const n = Number(rows[0]?.documents ?? 0) + documents + added.length;
    const averageLength = n > 0 ? (Number(rows[0]?.total_length ?? 0) + totalLength + addedLength) / n : 1;
    const fresh = { ids: [] as string[], terms: [] as string[], tf: [] as number[], length: [] as number[], impact: [] as number[] };
    for (const { id, counts } of added) {
      counts.terms.forEach((term, i) => {
        const tf = counts.frequencies[i] as number;
        fresh.ids.push(id);
        fresh.terms.push(term);
        fresh.tf.push(tf);
        fresh.length.push(counts.length);
        fresh.impact.push(termScore({ idf: 1, tf, length: counts.length, averageLength }));
        df.set(term, (df.get(term) ?? 0) + 1);
      });
      documents += 1;
      totalLength += counts.length;
    }
    if (fresh.terms.length > 0) {
      await tx.query(
        `INSERT INTO runnel_lexical_postings (collection, id, term, tf, length, impact)
         SELECT $1, * FROM unnest($2::text[], $3::text[], $4::integer[], $5::integer[], $6::real[])`,
        [collection, fresh.ids, fresh.terms, fresh.tf, fresh.length, fresh.impact],
      );
    }
  }
  const changed = [...df].filter(([, delta]) => delta !== 0).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  if (changed.length > 0) {
    await tx.query(
      `INSERT INTO runnel_lexical_terms (collection, term, df) SELECT $1, * FROM unnest($2::text[], $3::integer[])
       ON CONFLICT (collection, term) DO UPDATE SET df = runnel_lexical_terms.df + EXCLUDED.df`,
      [collection, changed.map(([term]) => term), changed.map(([, delta]) => delta)],
    );
    const fallen = changed.filter(([, delta]) => delta < 0).map(([term]) => term);
    if (fallen.length > 0) await tx.query(`DELETE FROM runnel_lexical_terms WHERE collection = $1 AND term = ANY($2::text[]) AND df <= 0`, [collection, fallen]);
  }
  if (documents !== 0 || totalLength !== 0) {
    await tx.query(
      `INSERT INTO runnel_lexical_stats (collection, documents, total_length) VALUES ($1, $2, $3)
       ON CONFLICT (collection) DO UPDATE SET documents = runnel_lexical_stats.documents + EXCLUDED.documents,
         total_length = runnel_lexical_stats.total_length + EXCLUDED.total_length`,
      [collection, documents, totalLength],
    );
  }
}

/** Forgets a collection's whole index, in the caller's transaction (the collection is being emptied). */
export async function dropIndex(tx: SqlQueryable, collection: string): Promise<void> {
  for (const table of ['runnel_lexical_postings', 'runnel_lexical_terms', 'runnel_lexical_stats']) {
    await tx.query(`DELETE FROM ${table} WHERE collection = $1`, [collection]);
  }
}

/**
 * Indexes the rows written before the lexical index existed, a batch at a
 * time (found through a partial index, so a collection with none costs one
 * index probe).
 */
export async function backfill(executor: SqlExecutor, table: string, collection: string, warn: StoreWarn, batchSize = 500): Promise<number> {
  let indexed = 0;
  for (;;) {
    const done = await executor.transaction(async (tx) => {
      await lockCollection(tx, collection);
      type Row = { id: string; content: string | null; metadata: Record<string, unknown> | string | null; oversized: boolean };
      const { rows } = await tx.query<Row>(
        `SELECT id, ${shippedColumns()}
         FROM ${table} WHERE collection = $1 AND lexical_length IS NULL ORDER BY id LIMIT $2 FOR UPDATE`,
        [collection, batchSize],
      );
      if (rows.length === 0) return 0;
      // A row past the size a store writes is indexed without terms (searches skip it anyway), so the backfill ends.
      const oversized = rows.filter((row) => row.oversized).map((row) => row.id);
      if (oversized.length > 0) warn({ code: 'RUNNEL_ERR_STORED_RECORD_INVALID', collection, ids: oversized, reason: 'text or metadata past the size a store writes: indexed without terms' }, 'stored record not valid');
      const added = rows.map((row) => {
        if (row.content === null) return { id: row.id, counts: countTerms('') };
        const metadata = storedMetadata(row.metadata);
        return { id: row.id, counts: countTerms(searchableText({ pageContent: row.content, metadata } as Document)) };
      });
      await tx.query(
        `UPDATE ${table} t SET lexical_length = u.length FROM unnest($2::text[], $3::integer[]) AS u(id, length)
         WHERE t.collection = $1 AND t.id = u.id`,
        [collection, added.map(({ id }) => id), added.map(({ counts }) => counts.length)],
      );
      await reindex(tx, collection, [], added);
      return rows.length;
    });
    if (done === 0) return indexed;
    indexed += done;
  }
}

/** Options of {@link lexicalSearch}. */
export interface LexicalQuery {
  collection: string;
  table: string;
  terms: string[];
  k: number;
  filter?: Filter | undefined;
  /** Postings read per term, highest weight first (see `PgVectorStoreOptions.lexicalCandidates`). */
  perTerm: number;
  /** Where statistics found impossible, and repaired, are reported. */
  warn: StoreWarn;
}

/** One row of a lexical search. */
export interface LexicalRow {
  id: string;
  content: string;
  metadata: Record<string, unknown> | string;
  score: number | string;
  /** Past the size a store writes: its text and metadata were not read (null). */
  oversized: boolean;
}

/**
 * Sets a collection's statistics to what its rows hold — the documents indexed and their total length in terms —
 * under the writers' lock, so no upsert's change is lost or counted twice.
 */
async function repairStats(executor: SqlExecutor, table: string, collection: string): Promise<void> {
  await executor.transaction(async (tx) => {
    await lockCollection(tx, collection);
    await tx.query(
      `INSERT INTO runnel_lexical_stats (collection, documents, total_length)
       SELECT $1, count(*), COALESCE(sum(lexical_length), 0) FROM ${table} WHERE collection = $1 AND lexical_length IS NOT NULL
       ON CONFLICT (collection) DO UPDATE SET documents = EXCLUDED.documents, total_length = EXCLUDED.total_length`,
      [collection],
    );
  });
}

/**
 * BM25 over the index in one statement: the query's terms with their
 * inverse document frequency; for each, its `perTerm` postings of highest
 * weight (all of them for any term rarer than that), of documents passing
 * the filter; their exact scores summed per document with the collection's
 * statistics as they are now; the best `k` with their content.
 */
export async function lexicalSearch(executor: SqlExecutor, query: LexicalQuery): Promise<LexicalRow[]> {
  if (query.terms.length === 0) return [];
  const first = await rankLexical(executor, query);
  if (first.valid) return first.rows;
  // Statistics no writer leaves (changed by hand, or a row deleted): ranking with them would silently change every
  // answer, and with none at all find nothing. Counted again from the rows under the writers' lock, then ranked.
  query.warn(
    { code: 'RUNNEL_ERR_STORED_RECORD_INVALID', collection: query.collection, stats: first.stats, reason: 'lexical statistics impossible for the index: counted again from the rows' },
    'stored record not valid',
  );
  await repairStats(executor, query.table, query.collection);
  const again = await rankLexical(executor, query);
  if (again.valid) return again.rows;
  // Still impossible: postings of documents the collection no longer holds as indexed rows (the index itself changed
  // by hand), which counting the rows cannot mend.
  throw new RunnelError('RUNNEL_ERR_STORED_RECORD_INVALID', `The lexical index of collection ${query.collection} holds postings of no indexed document; its statistics could not be counted again`);
}

async function rankLexical(executor: SqlQueryable, query: LexicalQuery): Promise<{ valid: boolean; stats?: unknown; rows: LexicalRow[] }> {
  const { k1, b } = BM25;
  const params: unknown[] = [query.collection, query.terms, query.k, query.perTerm];
  let filter = '';
  if (query.filter !== undefined) {
    const compiled = compileFilter(query.filter, 'f.metadata', params.length + 1);
    params.push(...compiled.params);
    filter = `AND EXISTS (SELECT 1 FROM ${query.table} f WHERE f.collection = $1 AND f.id = p.id AND (${compiled.sql}))`;
  }
  const { rows } = await executor.query<LexicalRow>(
    // The statistics are clamped where a count changed by hand (below zero, a term in more documents than the
    // collection holds) would take ln of a negative number or divide by zero and fail every search: with counts
    // Runnel keeps, each clamp is a no-op and the ranking is the memory store's.
    // Statistics are impossible when a query term is indexed (a posting: a document of at least one term) and they
    // are missing, or count no document or no term: then no row ranks, and one row (of nulls and the statistics)
    // says so. (A count merely wrong — a term in more documents than the collection holds — is clamped below, as
    // before: it names no culprit, the term's count or the collection's, to count again.)
    `WITH t AS (
       SELECT t.term, t.df FROM (SELECT DISTINCT unnest($2::text[]) AS term) q
       JOIN runnel_lexical_terms t ON t.collection = $1 AND t.term = q.term
     ), st AS (
       SELECT documents, total_length FROM runnel_lexical_stats WHERE collection = $1
     ), v AS (
       SELECT NOT EXISTS (SELECT 1 FROM t) OR COALESCE((SELECT documents >= 1 AND total_length >= 1 FROM st), false) AS valid
     ), s AS (
       SELECT GREATEST(documents, 0)::float8 AS n, GREATEST(total_length::float8 / GREATEST(documents, 1), 1) AS avgdl
       FROM st, v WHERE v.valid
     ), w AS MATERIALIZED (
       -- (Materialized: the query's few terms with their weights, computed once, not joined again per posting.)
       SELECT t.term, ln(1 + (GREATEST(s.n - GREATEST(t.df, 0), 0) + 0.5::float8) / (GREATEST(t.df, 0) + 0.5::float8)) AS idf, s.avgdl
       FROM t CROSS JOIN s
     ), top AS (
       SELECT p.id, sum(w.idf * p.tf * ${k1 + 1}::float8 / (p.tf + ${k1}::float8 * (${1 - b}::float8 + ${b}::float8 * p.length / w.avgdl))) AS score
       FROM w CROSS JOIN LATERAL (
         SELECT p.id, GREATEST(p.tf, 0) AS tf, GREATEST(p.length, 0) AS length FROM runnel_lexical_postings p
         WHERE p.collection = $1 AND p.term = w.term ${filter}
         ORDER BY p.impact DESC LIMIT $4
       ) p
       GROUP BY p.id ORDER BY score DESC, p.id LIMIT $3
     )
     SELECT e.id, ${shippedColumns('e')}, top.score
     FROM top JOIN ${query.table} e ON e.collection = $1 AND e.id = top.id
     UNION ALL
     SELECT NULL, (SELECT json_build_object('documents', documents, 'total_length', total_length)::text FROM st), NULL, NULL, NULL FROM v WHERE NOT v.valid
     ORDER BY score DESC, id`,
    params,
  );
  const marker = rows[0];
  if (marker !== undefined && marker.id === null) return { valid: false, stats: marker.content === null ? null : (JSON.parse(marker.content) as unknown), rows: [] };
  return { valid: true, rows };
}
