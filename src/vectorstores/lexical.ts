/**
 * Okapi BM25 over the terms of `documents/terms.ts`: every store indexes
 * and scores with these same functions, so a lexical search ranks alike in
 * memory, on Postgres and on PGlite.
 */
import { terms } from '../documents/index.js';

/** BM25's parameters: term-frequency saturation `k1` and length normalisation `b`. */
export interface Bm25Params {
  k1: number;
  b: number;
}

/** Robertson's usual values. */
export const BM25: Bm25Params = { k1: 1.2, b: 0.75 };

/** A document's terms as an index stores them: each distinct term with its frequency, and the document's length in terms. */
export interface TermCounts {
  terms: string[];
  frequencies: number[];
  length: number;
}

/** Counts the terms of `text`. */
export function countTerms(text: string): TermCounts {
  const counts = new Map<string, number>();
  const all = terms(text);
  for (const term of all) counts.set(term, (counts.get(term) ?? 0) + 1);
  return { terms: [...counts.keys()], frequencies: [...counts.values()], length: all.length };
}

/** Inverse document frequency of a term found in `df` of `n` documents (BM25's, never negative). */
export function idf(n: number, df: number): number {
  return Math.log(1 + (n - df + 0.5) / (df + 0.5));
}

/** One term's BM25 contribution to a document's score. */
export function termScore(options: { idf: number; tf: number; length: number; averageLength: number; params?: Bm25Params }): number {
  const { k1, b } = options.params ?? BM25;
  const norm = 1 - b + (b * options.length) / (options.averageLength > 0 ? options.averageLength : 1);
  return (options.idf * options.tf * (k1 + 1)) / (options.tf + k1 * norm);
}
