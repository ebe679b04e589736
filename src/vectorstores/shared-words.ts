/**
 * The search `/rag` quotes from, and `npm run ingest -- --query` shows: a
 * hybrid search that keeps only the passages sharing a word of the
 * question's content, when any does — a vector can be near for reasons a
 * reader would not see. One function, so the CLI a user checks a
 * collection with lists what `/rag` would cite, not the raw fused ranking.
 */
import { queryTerms, searchableText, terms } from '../documents/index.js';
import type { SearchMatch } from './fusion.js';
import { MAX_K, type VectorStore } from './vector-store.js';

/** Passages fetched per passage kept: those sharing no word with the question are dropped when others do. */
export const CANDIDATES_PER_PASSAGE = 3;

/**
 * The `k` best passages of a hybrid search for `query`, those sharing none of its words dropped while any shares one.
 *
 * @example
 * const passages = await searchSharingWords(store, 'How is chat history stored?', 4);
 */
export async function searchSharingWords(store: VectorStore, query: string, k: number): Promise<SearchMatch[]> {
  const found = await store.search(query, { k: Math.min(k * CANDIDATES_PER_PASSAGE, MAX_K), search: 'hybrid' });
  const wanted = new Set(queryTerms(query));
  const sharing = found.filter(({ document }) => terms(searchableText(document)).some((term) => wanted.has(term)));
  return (sharing.length > 0 ? sharing : found).slice(0, k);
}
