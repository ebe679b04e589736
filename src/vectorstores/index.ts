/** Vector stores: the contract, filters, the in-memory store, the retriever. */
export { VectorStore, MAX_K, checkK, type ScoredMatch, type MmrOptions } from './vector-store.js';
export { MemoryVectorStore } from './memory.js';
export { VectorStoreRetriever, type RetrieverOptions } from './retriever.js';
export { validateFilter, matchesFilter, type Filter } from './filter.js';
export { PgVectorStore, type PgVectorStoreOptions, type Distance } from './pgvector.js';
export { databaseError, pgExecutor, pgliteExecutor, type SqlExecutor, type SqlQueryable } from './sql.js';
export { compileFilter } from './sql-filter.js';
export { ingestPaths, chunkId, type IngestOptions, type IngestResult } from './ingest.js';
