/**
 * The `VectorStore` contract, and what every store shares: embedding,
 * validation of `k` and filters, dense, lexical and hybrid search, maximal
 * marginal relevance, and the retriever. A store implements storage,
 * nearest-neighbour search and BM25 over its lexical index only.
 */
import { RunnelError } from '../core/index.js';
import { queryTerms, searchableText, type Document } from '../documents/index.js';
import type { Embeddings } from '../embeddings/index.js';
import { validateFilter, type Filter } from './filter.js';
import { checkFusion, fuseRankings, type FusionOptions, type SearchMatch } from './fusion.js';
import { VectorStoreRetriever, type RetrieverOptions } from './retriever.js';

/** A stored document found by a search, with its similarity (higher is closer) and, when asked for, its vector. */
export interface ScoredMatch {
  document: Document;
  score: number;
  embedding?: number[];
}

/** Options of `searchVectors`. */
export interface VectorSearchOptions {
  /** Return each match's vector too (MMR needs them; reading them back costs a store time). */
  withEmbeddings?: boolean;
}

/** Options of `maxMarginalRelevanceSearch`. */
export interface MmrOptions {
  k?: number;
  /** Candidates fetched before diversifying (default 20). */
  fetchK?: number;
  /** 1 is pure relevance, 0 pure diversity (default 0.5). */
  lambda?: number;
  filter?: Filter;
}

/** The most results one search returns. */
export const MAX_K = 100;

/** How a search ranks: by vectors (`dense`), by words with BM25 (`lexical`), or both fused by rank (`hybrid`). */
export type SearchMode = 'dense' | 'lexical' | 'hybrid';

export const SEARCH_MODES: readonly SearchMode[] = ['dense', 'lexical', 'hybrid'];

/** Options of `VectorStore.search`. */
export interface SearchOptions {
  /** Documents returned (default 4, at most 100). */
  k?: number;
  filter?: Filter;
  /** Default `hybrid` (`dense` for a store without a lexical index). */
  search?: SearchMode;
  /** For `hybrid`: the weights of the two rankings. */
  fusion?: FusionOptions;
  /** For `hybrid`: how many of each ranking are fused (default 20, at least `k`). */
  candidates?: number;
}

/** Checks a search mode. */
export function checkSearchMode(mode: unknown): SearchMode {
  if (!SEARCH_MODES.includes(mode as SearchMode)) {
    throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `search must be one of ${SEARCH_MODES.join(', ')}, got ${JSON.stringify(mode)}`);
  }
  return mode as SearchMode;
}

function cosine(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] as number;
    const y = b[i] as number;
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  // A vector of zeros has no direction, so no angle to another: NaN, as pgvector answers (and searches drop it).
  return na === 0 || nb === 0 ? Number.NaN : dot / Math.sqrt(na * nb);
}

/**
 * Whether a query vector points anywhere. One of zeros — a question with no searchable word (`it's`, `(`, an
 * emoji) under the hashing embeddings — is near nothing: its cosine with every document is undefined, and
 * Postgres ranked every row NaN, in no order (a probe: /rag quoted four arbitrary passages for "(").
 */
const hasDirection = (vector: readonly number[]): boolean => vector.some((value) => value !== 0);

/** Checks `k`: a whole number from 1 to {@link MAX_K}. */
export function checkK(k: number): number {
  if (!Number.isInteger(k) || k < 1 || k > MAX_K) {
    throw new RunnelError('RUNNEL_ERR_INPUT_INVALID', `k must be a whole number from 1 to ${MAX_K}, got ${k}`, {
      detail: [{ type: 'k_range', loc: ['k'], msg: `k must be from 1 to ${MAX_K}` }],
    });
  }
  return k;
}

/**
 * A store of documents searchable by meaning. Implementations provide
 * `addVectors`, `delete` and `searchVectors`; the rest is shared.
 */
export abstract class VectorStore {
  readonly embeddings: Embeddings;

  constructor(embeddings: Embeddings) {
    this.embeddings = embeddings;
  }

  /** Stores documents with their vectors, replacing documents with the same id; returns the ids. */
  abstract addVectors(vectors: number[][], documents: Document[]): Promise<string[]>;

  /** Deletes documents by ids or by filter; returns how many were deleted. */
  abstract delete(options: { ids?: string[]; filter?: Filter }): Promise<number>;

  /** The `k` stored documents closest to `vector` that pass `filter`, closest first. */
  abstract searchVectors(vector: number[], k: number, filter?: Filter, options?: VectorSearchOptions): Promise<ScoredMatch[]>;

  /**
   * The `k` stored documents that pass `filter` with the highest BM25 score
   * for `terms` (distinct query terms, from `queryTerms`), best first;
   * documents sharing no term are not returned. Stores with a lexical index
   * override it and set `lexical`; this one refuses.
   */
  async searchTerms(terms: string[], k: number, filter?: Filter): Promise<SearchMatch[]> {
    void terms;
    void k;
    void filter;
    throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `${this.constructor.name} has no lexical index: search with search: 'dense'`);
  }

  /** True when the store keeps a lexical index (`searchTerms`); a search without a mode is then hybrid, else dense. */
  get lexical(): boolean {
    return this.searchTerms !== VectorStore.prototype.searchTerms;
  }

  /** Embeds and stores documents (upsert by id); the text embedded is `searchableText(doc)`, which leads with the heading path. */
  async addDocuments(documents: Document[]): Promise<string[]> {
    if (documents.length === 0) return [];
    const vectors = await this.embeddings.embedDocuments(documents.map(searchableText));
    return this.addVectors(vectors, documents);
  }

  /**
   * The `k` documents that best answer `query`: by vectors, by words (BM25),
   * or both fused by reciprocal rank (the default).
   *
   * @example
   * await store.search('how is chat history stored?', { k: 4, search: 'hybrid', fusion: { lexical: 2 } });
   */
  async search(query: string, options: SearchOptions = {}): Promise<SearchMatch[]> {
    const k = checkK(options.k ?? 4);
    const mode = checkSearchMode(options.search ?? (this.lexical ? 'hybrid' : 'dense'));
    if (options.filter !== undefined) validateFilter(options.filter);
    const filter = options.filter;
    if (mode === 'lexical') return this.searchTerms(queryTerms(query), k, filter);
    const dense = async (n: number): Promise<SearchMatch[]> => (await this.nearest(await this.embeddings.embedQuery(query), n, filter)).map(({ document, score }) => ({ document, score }));
    if (mode === 'dense') return dense(k);
    const fusion = checkFusion(options.fusion);
    const candidates = checkK(Math.max(k, options.candidates ?? 20));
    const [byVector, byWords] = await Promise.all([
      fusion.dense > 0 ? dense(candidates) : [],
      fusion.lexical > 0 ? this.searchTerms(queryTerms(query), candidates, filter) : [],
    ]);
    return fuseRankings(byVector, byWords, k, fusion);
  }

  /**
   * {@link searchVectors}, for vectors with a direction only: a query or a passage that embeds to zeros (no
   * searchable word, under the hashing embeddings) is near nothing — its cosine is undefined: NaN in Postgres,
   * which ranked such a passage anywhere among a query's matches (a review), and such a query's every row.
   */
  private async nearest(vector: number[], k: number, filter?: Filter, options?: VectorSearchOptions): Promise<ScoredMatch[]> {
    if (!hasDirection(vector)) return [];
    return (await this.searchVectors(vector, k, filter, options)).filter((match) => Number.isFinite(match.score));
  }

  protected checkDelete(options: { ids?: string[]; filter?: Filter }): void {
    if (options.ids === undefined && options.filter === undefined) {
      throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'delete needs ids or a filter (an empty filter {} deletes everything)');
    }
    if (options.filter !== undefined) validateFilter(options.filter);
  }

  /** The `k` documents most similar to `query`, with their similarity. */
  async similaritySearchWithScore(query: string, k = 4, filter?: Filter): Promise<[Document, number][]> {
    checkK(k);
    if (filter !== undefined) validateFilter(filter);
    return (await this.nearest(await this.embeddings.embedQuery(query), k, filter)).map((match) => [match.document, match.score]);
  }

  /** The `k` documents most similar to `query`. */
  async similaritySearch(query: string, k = 4, filter?: Filter): Promise<Document[]> {
    return (await this.similaritySearchWithScore(query, k, filter)).map(([doc]) => doc);
  }

  /** `k` documents relevant to `query` and different from each other (maximal marginal relevance). */
  async maxMarginalRelevanceSearch(query: string, options: MmrOptions = {}): Promise<Document[]> {
    const k = checkK(options.k ?? 4);
    const fetchK = checkK(Math.max(k, options.fetchK ?? 20));
    const lambda = options.lambda ?? 0.5;
    if (options.filter !== undefined) validateFilter(options.filter);
    const queryVector = await this.embeddings.embedQuery(query);
    const candidates = await this.nearest(queryVector, fetchK, options.filter, { withEmbeddings: true });
    const chosen: ScoredMatch[] = [];
    const left = [...candidates];
    while (chosen.length < k && left.length > 0) {
      let best = 0;
      let bestScore = -Infinity;
      left.forEach((candidate, index) => {
        const vector = candidate.embedding ?? [];
        const redundancy = chosen.length === 0 ? 0 : Math.max(...chosen.map((c) => cosine(c.embedding ?? [], vector)));
        const score = lambda * cosine(queryVector, vector) - (1 - lambda) * redundancy;
        if (score > bestScore) {
          bestScore = score;
          best = index;
        }
      });
      chosen.push(left.splice(best, 1)[0] as ScoredMatch);
    }
    return chosen.map((match) => match.document);
  }

  /**
   * A runnable (run type `retriever`) from a query string to documents.
   *
   * @example
   * const retriever = store.asRetriever({ k: 4, filter: { source: 'README.md' } });
   */
  asRetriever(options: RetrieverOptions = {}): VectorStoreRetriever {
    return new VectorStoreRetriever(this, options);
  }
}

export { cosine };
