/** The `Embeddings` interface: texts to vectors. */

/** Turns texts into vectors; similar texts get nearby vectors. */
export interface Embeddings {
  /** The length of every vector. */
  readonly dimensions: number;
  embedDocuments(texts: string[], options?: { signal?: AbortSignal }): Promise<number[][]>;
  embedQuery(text: string, options?: { signal?: AbortSignal }): Promise<number[]>;
}
