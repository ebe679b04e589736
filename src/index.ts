/**
 * Runnel's public API, its one door. Chains, routes and users import from
 * here only.
 */
export * from './core/index.js';
