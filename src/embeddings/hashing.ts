/**
 * `HashingEmbeddings`: deterministic feature hashing into a fixed number of
 * dimensions, L2-normalised. No model, no network: the offline default.
 *
 * - `terms` (the default): the text's stemmed terms (stop words dropped),
 *   weighted 1 + ln(count), and the character 3- and 4-grams of each term,
 *   so `depth` and `deep`, `serializer` and `serializing` land near each
 *   other — a fuzzy match that complements BM25's exact one.
 * - `words`: lower-cased word unigrams and bigrams, the only features of
 *   earlier versions; kept so collections embedded with them still match.
 */
import { terms } from '../documents/index.js';
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

/** The character 3- and 4-grams of a word. */
function ngrams(word: string): string[] {
  const out: string[] = [];
  for (let n = 3; n <= 4; n++) for (let i = 0; i + n <= word.length; i++) out.push(word.slice(i, i + n));
  return out;
}

/** Lower-cased words: letters and digits of any script. */
export function words(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/** Which features a {@link HashingEmbeddings} hashes. */
export type HashingFeatures = 'terms' | 'words';

/** Options of {@link HashingEmbeddings}. */
export interface HashingEmbeddingsOptions {
  /** Vector length (default 384). */
  dimensions?: number;
  /** Default `terms`. */
  features?: HashingFeatures;
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
  readonly features: HashingFeatures;

  constructor(options: HashingEmbeddingsOptions = {}) {
    this.dimensions = options.dimensions ?? 384;
    this.features = options.features ?? 'terms';
    if (!Number.isInteger(this.dimensions) || this.dimensions < 8) throw new RangeError('HashingEmbeddings needs at least 8 dimensions');
    if (this.features !== 'terms' && this.features !== 'words') throw new RangeError(`HashingEmbeddings features are terms or words, not ${String(this.features)}`);
  }

  /** Names the vectors: a collection records it, and refuses vectors of another kind. */
  get id(): string {
    return `hashing:${this.features}:${this.dimensions}`;
  }

  private embed(text: string): number[] {
    const vector = new Float64Array(this.dimensions);
    const add = (feature: string, weight: number): void => {
      const hash = fnv1a(feature);
      // The sign comes from a second hash, so colliding features cancel out on average instead of piling up.
      const sign = fnv1a(feature, 0x9747b28c) & 1 ? 1 : -1;
      const index = hash % this.dimensions;
      vector[index] = (vector[index] ?? 0) + sign * weight;
    };
    if (this.features === 'words') {
      const tokens = words(text);
      for (let i = 0; i < tokens.length; i++) {
        add(tokens[i] as string, 1);
        if (i + 1 < tokens.length) add(`${tokens[i]} ${tokens[i + 1]}`, 0.5);
      }
    } else {
      const counts = new Map<string, number>();
      for (const term of terms(text)) counts.set(term, (counts.get(term) ?? 0) + 1);
      for (const [term, count] of counts) {
        const weight = 1 + Math.log(count);
        add(term, weight);
        // The n-grams of a term share its weight, spread so a long term does not outweigh a short one.
        const grams = ngrams(`<${term}>`);
        const share = weight / Math.sqrt(grams.length);
        // '#' keeps a gram from colliding with a term of the same letters.
        for (const gram of grams) add(`#${gram}`, share);
      }
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
