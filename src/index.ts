/**
 * Runnel's public API, its one door. Chains, routes and users import from
 * here only.
 */
export * from './core/index.js';
export * from './messages/index.js';
export * from './prompts/index.js';
export * from './parsers/index.js';
export * from './models/index.js';
export * from './embeddings/index.js';
export * from './documents/index.js';
export * from './vectorstores/index.js';
export * from './tools/index.js';
export * from './history/index.js';
export * from './cache/index.js';
export * from './server/index.js';
export * from './client/index.js';
export * from './observability/index.js';
