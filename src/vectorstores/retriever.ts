/** `VectorStoreRetriever`: a vector store search as a runnable of run type `retriever`, with an optional reranking step. */
import { z, type ZodType } from 'zod';
import { Runnable, RunnelError, type Run, type RunType } from '../core/index.js';
import { documentJsonSchema, type Document } from '../documents/index.js';
import { validateFilter, type Filter } from './filter.js';
import { checkFusion, type FusionOptions } from './fusion.js';
import { checkK, checkSearchMode, type SearchMode, type VectorStore } from './vector-store.js';

/** What a reranking step receives: the query and the candidates, best first by the search. */
export interface RerankInput {
  query: string;
  documents: Document[];
}

/**
 * A reranking step: any runnable from `{query, documents}` to the documents
 * in a better order (a cross-encoder, an LLM judge, a rule). The retriever
 * keeps its first `k`.
 */
export type Reranker = Runnable<RerankInput, Document[]>;

/** Options of `asRetriever`. */
export interface RetrieverOptions {
  /** Documents per query (default 4, at most 100). */
  k?: number;
  filter?: Filter;
  /** How documents are ranked: `hybrid` (the default, `dense` on a store without a lexical index), `dense` or `lexical`; see `VectorStore.search`. */
  search?: SearchMode;
  /** For `hybrid`: the weights of the two rankings. */
  fusion?: FusionOptions;
  /** `similarity` (default: ranked by `search`) or `mmr` (relevant and diverse, by vectors). */
  searchType?: 'similarity' | 'mmr';
  /** For `mmr`: candidates fetched; for a reranker, candidates it reorders (default 20, at least `k`). */
  fetchK?: number;
  /** For `mmr`: the relevance/diversity balance. */
  lambda?: number;
  /** A step that reorders the candidates before the first `k` are kept. */
  rerank?: Reranker;
}

/**
 * A retriever's query, which must be a string: a question object (`{question}` piped in whole) would otherwise
 * be searched for as "[object Object]", and the chain answer from whatever matched that. `name`: the retriever's.
 *
 * @example
 * queryText('How is history stored?', 'VectorStoreRetriever') // 'How is history stored?'
 * queryText({ question: 'x' }, 'VectorStoreRetriever') // throws RUNNEL_ERR_INPUT_INVALID
 */
export function queryText(query: unknown, name: string): string {
  if (typeof query === 'string') return query;
  const got = query === null ? 'null' : Array.isArray(query) ? 'an array' : typeof query;
  throw new RunnelError('RUNNEL_ERR_INPUT_INVALID', `${name} expects the query as a string, got ${got} (pick the question out of an object input)`, {
    detail: [{ type: 'string_type', loc: [], msg: 'Input should be a string' }],
  });
}

/** A retriever over a vector store; see `VectorStore.asRetriever`. */
export class VectorStoreRetriever extends Runnable<string, Document[]> {
  readonly name = 'VectorStoreRetriever';
  override readonly runType: RunType = 'retriever';
  readonly store: VectorStore;
  readonly k: number;
  readonly filter: Filter | undefined;
  readonly search: SearchMode | undefined;
  readonly searchType: 'similarity' | 'mmr';
  private readonly fusion: FusionOptions | undefined;
  private readonly fetchK: number | undefined;
  private readonly lambda: number | undefined;
  private readonly rerank: Reranker | undefined;

  constructor(store: VectorStore, options: RetrieverOptions = {}) {
    super();
    this.store = store;
    this.k = checkK(options.k ?? 4);
    if (options.filter !== undefined) validateFilter(options.filter);
    this.filter = options.filter;
    this.search = options.search === undefined ? undefined : checkSearchMode(options.search);
    if (options.fusion !== undefined) checkFusion(options.fusion);
    this.fusion = options.fusion;
    this.searchType = options.searchType ?? 'similarity';
    if (options.fetchK !== undefined) checkK(options.fetchK);
    this.fetchK = options.fetchK;
    this.lambda = options.lambda;
    this.rerank = options.rerank;
    if (this.rerank !== undefined && this.searchType === 'mmr') throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'A retriever reranks similarity searches, not mmr');
  }

  override get inputSchema(): ZodType {
    return z.string();
  }

  override get outputSchema(): ZodType {
    return z.array(documentJsonSchema);
  }

  protected override async _call(query: string, run: Run): Promise<Document[]> {
    const text = queryText(query, this.name);
    if (this.searchType === 'mmr') {
      return this.store.maxMarginalRelevanceSearch(text, {
        k: this.k,
        ...(this.fetchK === undefined ? {} : { fetchK: this.fetchK }),
        ...(this.lambda === undefined ? {} : { lambda: this.lambda }),
        ...(this.filter === undefined ? {} : { filter: this.filter }),
      });
    }
    const candidates = this.rerank === undefined ? this.k : Math.max(this.k, this.fetchK ?? 20);
    const found = await this.store.search(text, {
      k: candidates,
      ...(this.search === undefined ? {} : { search: this.search }),
      ...(this.filter === undefined ? {} : { filter: this.filter }),
      ...(this.fusion === undefined ? {} : { fusion: this.fusion }),
    });
    const documents = found.map((match) => match.document);
    if (this.rerank === undefined) return documents;
    const reranked = await this.rerank._invokeIn({ query: text, documents }, run.scope);
    if (!Array.isArray(reranked)) throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'A reranker returns a list of documents');
    return reranked.slice(0, this.k);
  }
}
