/**
 * Reciprocal rank fusion (Cormack, Clarke and Büttcher, 2009): each ranking
 * gives a document `weight / (k + rank)`, and the sums order the fused list.
 * Ranks, not scores, are fused, so a cosine similarity and a BM25 score
 * need no common scale.
 */
import { RunnelError } from '../core/index.js';
import type { Document } from '../documents/index.js';

/** How a hybrid search weighs its two rankings. */
export interface FusionOptions {
  /** Weight of the vector ranking (default 1). */
  dense?: number;
  /** Weight of the lexical ranking (default 1). */
  lexical?: number;
  /** RRF's rank constant: larger flattens the difference between the first ranks (default 60). */
  rankConstant?: number;
}

/** A document found by a search, with its score (higher is better) and, for a hybrid search, its rank in each list. */
export interface SearchMatch {
  document: Document;
  score: number;
  ranks?: { dense?: number; lexical?: number };
}

/** The defaults: both rankings weigh the same, and 60 is the rank constant of the RRF paper (no other setting did better in bench:retrieval). */
export const DEFAULT_FUSION: Required<FusionOptions> = { dense: 1, lexical: 1, rankConstant: 60 };

/** Checks fusion options: weights from 0 to 100, a rank constant from 0 to 1000. */
export function checkFusion(options: FusionOptions = {}): Required<FusionOptions> {
  const fusion = { ...DEFAULT_FUSION, ...Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) };
  for (const key of ['dense', 'lexical'] as const) {
    const weight = fusion[key];
    if (typeof weight !== 'number' || !Number.isFinite(weight) || weight < 0 || weight > 100) {
      throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `fusion.${key} must be a number from 0 to 100, got ${String(weight)}`);
    }
  }
  if (typeof fusion.rankConstant !== 'number' || !Number.isFinite(fusion.rankConstant) || fusion.rankConstant < 0 || fusion.rankConstant > 1000) {
    throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `fusion.rankConstant must be a number from 0 to 1000, got ${String(fusion.rankConstant)}`);
  }
  if (fusion.dense === 0 && fusion.lexical === 0) throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'fusion needs a weight above 0');
  return fusion;
}

/**
 * Fuses a vector ranking and a lexical ranking (each best first) into the
 * best `k`. Ties keep the vector ranking's order, then the lexical one's.
 */
export function fuseRankings(dense: readonly SearchMatch[], lexical: readonly SearchMatch[], k: number, options: Required<FusionOptions>): SearchMatch[] {
  const fused = new Map<string, { match: SearchMatch; score: number; order: number; ranks: { dense?: number; lexical?: number } }>();
  const add = (list: readonly SearchMatch[], key: 'dense' | 'lexical', weight: number): void => {
    list.forEach((match, index) => {
      const id = match.document.id ?? `\u0000${key}${index}`;
      const rank = index + 1;
      const entry = fused.get(id) ?? { match, score: 0, order: fused.size, ranks: {} };
      entry.score += weight / (options.rankConstant + rank);
      entry.ranks[key] = rank;
      fused.set(id, entry);
    });
  };
  add(dense, 'dense', options.dense);
  add(lexical, 'lexical', options.lexical);
  return [...fused.values()]
    .sort((a, b) => b.score - a.score || a.order - b.order)
    .slice(0, k)
    .map((entry) => ({ document: entry.match.document, score: entry.score, ranks: entry.ranks }));
}
