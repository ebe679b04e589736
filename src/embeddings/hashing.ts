/**
 * `HashingEmbeddings`: deterministic feature hashing of word unigrams and
 * bigrams into a fixed number of dimensions, L2-normalised. No model, no
 * network: the offline default. Texts that share words land close together,
 * so lexical overlap ranks first in a similarity search.
 */
import type { Embeddings } from './embeddings.js';

/** FNV-1a, 32 bits: a fast, stable string hash. */
function fnv1a(text: string, seed = 0x811c9dc5): number {
  let hash = seed;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/** Lower-cased words: letters and digits of any script. */
export function words(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/**
 * Feature-hashing embeddings (default 384 dimensions).
 *
 * @example
 * const embeddings = new HashingEmbeddings({ dimensions: 384 });
 * await embeddings.embedQuery('how do I stream events?');
 */
export class HashingEmbeddings implements Embeddings {
  readonly dimensions: number;

  constructor(options: { dimensions?: number } = {}) {
    this.dimensions = options.dimensions ?? 384;
    if (!Number.isInteger(this.dimensions) || this.dimensions < 8) throw new RangeError('HashingEmbeddings needs at least 8 dimensions');
  }

  private embed(text: string): number[] {
    const vector = new Float64Array(this.dimensions);
    const tokens = words(text);
    const add = (feature: string, weight: number): void => {
      const hash = fnv1a(feature);
      // The sign comes from a second hash, so colliding features cancel out on average instead of piling up.
      const sign = fnv1a(feature, 0x9747b28c) & 1 ? 1 : -1;
      const index = hash % this.dimensions;
      vector[index] = (vector[index] ?? 0) + sign * weight;
    };
    for (let i = 0; i < tokens.length; i++) {
      add(tokens[i] as string, 1);
      if (i + 1 < tokens.length) add(`${tokens[i]} ${tokens[i + 1]}`, 0.5);
    }
    let norm = 0;
    for (const value of vector) norm += value * value;
    norm = Math.sqrt(norm);
    return Array.from(vector, (value) => (norm === 0 ? 0 : value / norm));
  }

  async embedDocuments(texts: string[]): Promise<number[][]> {
    return texts.map((text) => this.embed(text));
  }

  async embedQuery(text: string): Promise<number[]> {
    return this.embed(text);
  }
}
