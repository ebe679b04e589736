/**
 * Runnel as the benchmarks load it: the compiled `dist/` (as `npm start`
 * runs it, without a dev transpiler's helpers), typed from the source. The
 * bench scripts build first (`npm run bench:*`).
 */
import type * as Runnel from '../src/index.js';

const compiled = '../dist/src/index.js';
export const runnel = (await import(compiled)) as typeof Runnel;
