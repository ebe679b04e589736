/**
 * Runnel as the benchmarks load it: the compiled `dist/` (as `npm start`
 * runs it, without a dev transpiler's helpers), typed from the source. The
 * bench scripts build first (`npm run bench:*`) and run from the project's
 * root, which is where `dist/` is found (so a bench compiled elsewhere finds
 * it too).
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type * as Runnel from '../src/index.js';

const compiled = pathToFileURL(resolve(process.cwd(), 'dist/src/index.js')).href;
export const runnel = (await import(compiled)) as typeof Runnel;
