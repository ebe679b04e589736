/**
 * The model response cache: the interface a chat model's `cache` option
 * takes, an in-memory implementation, and the key. The key covers the
 * provider, the model, every call parameter and the messages, so two calls
 * share an entry only when they would send the same request.
 */
import { createHash } from 'node:crypto';
import { canonicalJson } from '../core/index.js';
import { AIMessageChunk, type BaseMessage } from '../messages/index.js';
import type { CallParams } from './types.js';

/** A store of model answers as the chunks they streamed in. */
export interface ModelCache {
  lookup(key: string): Promise<AIMessageChunk[] | undefined>;
  update(key: string, chunks: AIMessageChunk[]): Promise<void>;
}

/**
 * The cache key of a call: a SHA-256 over provider, its endpoint (the API's
 * base URL, when it has one), parameters and messages in a canonical JSON form — and `partition` (a caller's identity) when entries
 * must not be shared beyond it.
 */
export function cacheKey(provider: string, params: CallParams, messages: readonly BaseMessage[], partition?: string, endpoint?: string): string {
  const canonical = canonicalJson({ provider, endpoint, params, messages: messages.map((m) => m.toJSON()), partition });
  return createHash('sha256').update(canonical).digest('hex');
}

/** Chunks as JSON, for stores that keep text; and back. */
export function chunksToJSON(chunks: readonly AIMessageChunk[]): Record<string, unknown>[] {
  return chunks.map((chunk) => chunk.toJSON());
}

/**
 * An in-process cache holding at most `maxEntries` answers, least recently
 * used first out.
 *
 * @example
 * new ChatOpenAI({ model: 'gpt-4o-mini', cache: new InMemoryCache() });
 */
export class InMemoryCache implements ModelCache {
  private readonly entries = new Map<string, AIMessageChunk[]>();
  private readonly maxEntries: number;

  constructor(options: { maxEntries?: number } = {}) {
    this.maxEntries = options.maxEntries ?? 1000;
  }

  async lookup(key: string): Promise<AIMessageChunk[] | undefined> {
    const hit = this.entries.get(key);
    if (hit === undefined) return undefined;
    this.entries.delete(key);
    this.entries.set(key, hit);
    return hit;
  }

  async update(key: string, chunks: AIMessageChunk[]): Promise<void> {
    this.entries.delete(key);
    this.entries.set(key, chunks.map((chunk) => new AIMessageChunk(chunk)));
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }

  get size(): number {
    return this.entries.size;
  }
}
