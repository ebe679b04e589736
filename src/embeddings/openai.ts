/** `OpenAIEmbeddings`: the OpenAI (or compatible) embeddings endpoint, in batched requests. */
import type OpenAI from 'openai';
import { openAIClient, providerError } from '../models/index.js';
import type { Embeddings } from './embeddings.js';

/** Options of {@link OpenAIEmbeddings}. */
export interface OpenAIEmbeddingsOptions {
  model?: string;
  /** Vector length; sent to models that can shorten their vectors. */
  dimensions?: number;
  /** Texts per request (default 512). */
  batchSize?: number;
  apiKey?: string;
  baseURL?: string;
  maxRetries?: number;
  timeout?: number;
}

/**
 * Embeddings from OpenAI's `/embeddings`, `batchSize` texts per request.
 *
 * @example
 * new OpenAIEmbeddings({ model: 'text-embedding-3-small', dimensions: 384 });
 */
export class OpenAIEmbeddings implements Embeddings {
  readonly dimensions: number;
  readonly model: string;
  private readonly batchSize: number;
  private readonly options: OpenAIEmbeddingsOptions;
  private client: OpenAI | undefined;

  constructor(options: OpenAIEmbeddingsOptions = {}) {
    this.options = options;
    this.model = options.model ?? 'text-embedding-3-small';
    this.dimensions = options.dimensions ?? 1536;
    this.batchSize = Math.max(1, options.batchSize ?? 512);
  }

  /** Names the vectors: a collection records it, and refuses vectors of another kind. */
  get id(): string {
    return `openai:${this.model}:${this.dimensions}`;
  }

  private getClient(): OpenAI {
    return (this.client ??= openAIClient(this.options, 'OpenAIEmbeddings'));
  }

  async embedDocuments(texts: string[], options: { signal?: AbortSignal } = {}): Promise<number[][]> {
    const out: number[][] = [];
    for (let start = 0; start < texts.length; start += this.batchSize) {
      const batch = texts.slice(start, start + this.batchSize);
      // The provider's failures as Runnel's (a rate limit, an outage, a refusal), as the chat models report them.
      const response = await this.getClient()
        .embeddings.create(
          { model: this.model, input: batch, ...(this.options.dimensions === undefined ? {} : { dimensions: this.options.dimensions }) },
          options.signal === undefined ? {} : { signal: options.signal },
        )
        .catch((error: unknown) => {
          throw providerError('OpenAIEmbeddings', error, options.signal);
        });
      const ordered = [...response.data].sort((a, b) => a.index - b.index);
      out.push(...ordered.map((item) => item.embedding));
    }
    return out;
  }

  async embedQuery(text: string, options: { signal?: AbortSignal } = {}): Promise<number[]> {
    return (await this.embedDocuments([text], options))[0] as number[];
  }
}
