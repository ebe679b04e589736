/** The `Embeddings` interface: texts to vectors. */

/** Turns texts into vectors; similar texts get nearby vectors. */
export interface Embeddings {
  /** The length of every vector. */
  readonly dimensions: number;
  /** Names the kind of vectors (model and settings), when the embedder can: a store refuses to mix kinds in one collection. */
  readonly id?: string;
  embedDocuments(texts: string[], options?: { signal?: AbortSignal }): Promise<number[][]>;
  embedQuery(text: string, options?: { signal?: AbortSignal }): Promise<number[]>;
}
