/** `VectorStoreRetriever`: a vector store search as a runnable of run type `retriever`. */
import { z, type ZodType } from 'zod';
import { Runnable, type RunType } from '../core/index.js';
import { documentJsonSchema, type Document } from '../documents/index.js';
import { validateFilter, type Filter } from './filter.js';
import { checkK, type VectorStore } from './vector-store.js';

/** Options of `asRetriever`. */
export interface RetrieverOptions {
  /** Documents per query (default 4, at most 100). */
  k?: number;
  filter?: Filter;
  /** `similarity` (default) or `mmr` (relevant and diverse). */
  searchType?: 'similarity' | 'mmr';
  /** For `mmr`: candidates fetched, and the relevance/diversity balance. */
  fetchK?: number;
  lambda?: number;
}

/** A retriever over a vector store; see `VectorStore.asRetriever`. */
export class VectorStoreRetriever extends Runnable<string, Document[]> {
  readonly name = 'VectorStoreRetriever';
  override readonly runType: RunType = 'retriever';
  readonly store: VectorStore;
  readonly k: number;
  readonly filter: Filter | undefined;
  readonly searchType: 'similarity' | 'mmr';
  private readonly mmr: { fetchK?: number | undefined; lambda?: number | undefined };

  constructor(store: VectorStore, options: RetrieverOptions = {}) {
    super();
    this.store = store;
    this.k = checkK(options.k ?? 4);
    if (options.filter !== undefined) validateFilter(options.filter);
    this.filter = options.filter;
    this.searchType = options.searchType ?? 'similarity';
    this.mmr = { fetchK: options.fetchK, lambda: options.lambda };
  }

  override get inputSchema(): ZodType {
    return z.string();
  }

  override get outputSchema(): ZodType {
    return z.array(documentJsonSchema);
  }

  protected override async _call(query: string): Promise<Document[]> {
    const text = typeof query === 'string' ? query : String(query);
    if (this.searchType === 'mmr') {
      return this.store.maxMarginalRelevanceSearch(text, {
        k: this.k,
        ...(this.mmr.fetchK === undefined ? {} : { fetchK: this.mmr.fetchK }),
        ...(this.mmr.lambda === undefined ? {} : { lambda: this.mmr.lambda }),
        ...(this.filter === undefined ? {} : { filter: this.filter }),
      });
    }
    return this.store.similaritySearch(text, this.k, this.filter);
  }
}
