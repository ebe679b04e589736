/** Vector stores: the contract, filters, the in-memory store, the retriever. */
export { VectorStore, MAX_K, SEARCH_MODES, checkK, checkSearchMode, type ScoredMatch, type MmrOptions, type VectorSearchOptions, type SearchMode, type SearchOptions } from './vector-store.js';
export { fuseRankings, checkFusion, DEFAULT_FUSION, type FusionOptions, type SearchMatch } from './fusion.js';
export { countTerms, idf, termScore, BM25, type Bm25Params, type TermCounts } from './lexical.js';
export { MemoryVectorStore } from './memory.js';
export { queryText, VectorStoreRetriever, type RetrieverOptions, type Reranker, type RerankInput } from './retriever.js';
export { validateFilter, matchesFilter, type Filter } from './filter.js';
export { PgVectorStore, type PgVectorStoreOptions, type Distance } from './pgvector.js';
export { databaseError, pgExecutor, pgliteExecutor, processWarn, type SqlExecutor, type SqlQueryable, type StoreWarn } from './sql.js';
export { compileFilter } from './sql-filter.js';
export { searchSharingWords, CANDIDATES_PER_PASSAGE } from './shared-words.js';
export { ingestPaths, chunkId, SEED_ORIGIN, type IngestOptions, type IngestResult } from './ingest.js';
