/** `MemoryVectorStore`: vectors in process memory, exact search. The embedded default for tests and small corpora. */
import { randomUUID } from 'node:crypto';
import { Document } from '../documents/index.js';
import { RunnelError } from '../core/index.js';
import { matchesFilter, type Filter } from './filter.js';
import { cosine, VectorStore, type ScoredMatch } from './vector-store.js';

interface Entry {
  document: Document;
  embedding: number[];
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

  async addVectors(vectors: number[][], documents: Document[]): Promise<string[]> {
    if (vectors.length !== documents.length) throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'addVectors needs one vector per document');
    return documents.map((doc, index) => {
      const id = doc.id ?? randomUUID();
      const vector = vectors[index] as number[];
      if (vector.length !== this.embeddings.dimensions) {
        throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Vector of ${vector.length} dimensions for a store of ${this.embeddings.dimensions}`);
      }
      this.entries.set(id, { document: new Document({ id, pageContent: doc.pageContent, metadata: structuredClone(doc.metadata) }), embedding: vector });
      return id;
    });
  }

  async delete(options: { ids?: string[]; filter?: Filter }): Promise<number> {
    this.checkDelete(options);
    let deleted = 0;
    for (const [id, entry] of this.entries) {
      const byId = options.ids === undefined || options.ids.includes(id);
      const byFilter = options.filter === undefined || matchesFilter(entry.document.metadata, options.filter);
      if (byId && byFilter && this.entries.delete(id)) deleted++;
    }
    return deleted;
  }

  async searchVectors(vector: number[], k: number, filter?: Filter): Promise<ScoredMatch[]> {
    const matches: ScoredMatch[] = [];
    for (const entry of this.entries.values()) {
      if (filter !== undefined && !matchesFilter(entry.document.metadata, filter)) continue;
      matches.push({ document: entry.document, score: cosine(vector, entry.embedding), embedding: entry.embedding });
    }
    return matches.sort((a, b) => b.score - a.score).slice(0, k);
  }

  /** How many documents are stored. */
  get size(): number {
    return this.entries.size;
  }
}
