/** `MemoryVectorStore`: vectors and a BM25 index in process memory, exact search. The embedded default for tests and small corpora. */
import { randomUUID } from 'node:crypto';
import { Document, searchableText } from '../documents/index.js';
import { RunnelError } from '../core/index.js';
import { matchesFilter, type Filter } from './filter.js';
import type { SearchMatch } from './fusion.js';
import { countTerms, idf, termScore, type TermCounts } from './lexical.js';
import { cosine, VectorStore, type ScoredMatch } from './vector-store.js';

interface Entry {
  document: Document;
  embedding: number[];
  counts: TermCounts;
}

/**
 * A vector store in memory with exact cosine search.
 *
 * @example
 * const store = new MemoryVectorStore(new HashingEmbeddings());
 * await store.addDocuments(docs);
 * await store.similaritySearch('how do I deploy?', 3);
 */
export class MemoryVectorStore extends VectorStore {
  private readonly entries = new Map<string, Entry>();
  /** term → id → term frequency. */
  private readonly postings = new Map<string, Map<string, number>>();
  private totalLength = 0;

  private index(id: string, counts: TermCounts): void {
    counts.terms.forEach((term, i) => {
      let list = this.postings.get(term);
      if (list === undefined) this.postings.set(term, (list = new Map()));
      list.set(id, counts.frequencies[i] as number);
    });
    this.totalLength += counts.length;
  }

  private unindex(id: string): void {
    const entry = this.entries.get(id);
    if (entry === undefined) return;
    for (const term of entry.counts.terms) {
      const list = this.postings.get(term);
      list?.delete(id);
      if (list?.size === 0) this.postings.delete(term);
    }
    this.totalLength -= entry.counts.length;
  }

  async addVectors(vectors: number[][], documents: Document[]): Promise<string[]> {
    if (vectors.length !== documents.length) throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'addVectors needs one vector per document');
    return documents.map((doc, index) => {
      const id = doc.id ?? randomUUID();
      const vector = vectors[index] as number[];
      if (vector.length !== this.embeddings.dimensions) {
        throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Vector of ${vector.length} dimensions for a store of ${this.embeddings.dimensions}`);
      }
      const document = new Document({ id, pageContent: doc.pageContent, metadata: structuredClone(doc.metadata) });
      const counts = countTerms(searchableText(document));
      this.unindex(id);
      this.entries.set(id, { document, embedding: vector, counts });
      this.index(id, counts);
      return id;
    });
  }

  async delete(options: { ids?: string[]; filter?: Filter }): Promise<number> {
    this.checkDelete(options);
    let deleted = 0;
    for (const [id, entry] of this.entries) {
      const byId = options.ids === undefined || options.ids.includes(id);
      const byFilter = options.filter === undefined || matchesFilter(entry.document.metadata, options.filter);
      if (!byId || !byFilter) continue;
      this.unindex(id);
      if (this.entries.delete(id)) deleted++;
    }
    return deleted;
  }

  async searchVectors(vector: number[], k: number, filter?: Filter): Promise<ScoredMatch[]> {
    const matches: ScoredMatch[] = [];
    for (const entry of this.entries.values()) {
      if (filter !== undefined && !matchesFilter(entry.document.metadata, filter)) continue;
      const score = cosine(vector, entry.embedding);
      // A vector of zeros is near nothing (its cosine is NaN), and a NaN would unsettle the sort of the others.
      if (!Number.isNaN(score)) matches.push({ document: entry.document, score, embedding: entry.embedding });
    }
    return matches.sort((a, b) => b.score - a.score).slice(0, k);
  }

  override async searchTerms(terms: string[], k: number, filter?: Filter): Promise<SearchMatch[]> {
    const n = this.entries.size;
    // At least 1, as in Postgres: a collection of nearly empty documents must not divide by a fraction.
    const averageLength = n === 0 ? 1 : Math.max(this.totalLength / n, 1);
    const scores = new Map<string, number>();
    for (const term of new Set(terms)) {
      const list = this.postings.get(term);
      if (list === undefined) continue;
      const termIdf = idf(n, list.size);
      for (const [id, tf] of list) {
        const entry = this.entries.get(id) as Entry;
        if (filter !== undefined && !matchesFilter(entry.document.metadata, filter)) continue;
        scores.set(id, (scores.get(id) ?? 0) + termScore({ idf: termIdf, tf, length: entry.counts.length, averageLength }));
      }
    }
    return [...scores]
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
      .slice(0, k)
      .map(([id, score]) => ({ document: (this.entries.get(id) as Entry).document, score }));
  }

  /** How many documents are stored. */
  get size(): number {
    return this.entries.size;
  }
}
