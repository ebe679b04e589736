/**
 * The model response cache: the interface a chat model's `cache` option
 * takes, an in-memory implementation, and the key. The key covers the
 * provider, the model, every call parameter and the messages, so two calls
 * share an entry only when they would send the same request.
 */
import { createHash } from 'node:crypto';
import { canonicalJson, heldBytes, RunnelError } from '../core/index.js';
import { coerceMessage, type AIMessageChunk, type BaseMessage } from '../messages/index.js';
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

/** One answer held in memory: its chunks' JSON (a token's chunk as an object held ~60 times its text), its size. */
interface MemoryEntry {
  json: string;
  bytes: number;
  /** When it expires (`Date.now()`'s milliseconds), if it does. */
  expires: number | undefined;
}

/**
 * An in-process cache holding at most `maxEntries` answers and `maxBytes` of them (their JSON, at two bytes a
 * character past Latin-1, as V8 keeps it), least recently used first out; an answer larger than `maxBytes` on
 * its own is not kept. Entries are held as JSON and made chunks again on each hit, as Redis's are: the chunks
 * of a streamed answer, one object a token, held 1.4 MB of heap for a 23 KB answer (a probe), so 1,000 of
 * them a cache grew to gigabytes. With `ttlSeconds` an entry is a miss that long after it was written, as a
 * Redis entry expires.
 *
 * @example
 * new ChatOpenAI({ model: 'gpt-4o-mini', cache: new InMemoryCache() });
 */
export class InMemoryCache implements ModelCache {
  private readonly entries = new Map<string, MemoryEntry>();
  private readonly maxEntries: number;
  readonly maxBytes: number;
  readonly ttlSeconds: number | undefined;
  private held = 0;

  constructor(options: { maxEntries?: number; maxBytes?: number; ttlSeconds?: number } = {}) {
    this.maxEntries = options.maxEntries ?? 1000;
    this.maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
    this.ttlSeconds = options.ttlSeconds;
    // A bound that is none (NaN lifts it; a negative count of entries would evict for ever) is refused here.
    const wrong = [['maxEntries', this.maxEntries], ['maxBytes', this.maxBytes], ['ttlSeconds', this.ttlSeconds ?? 1]].find(([, value]) => !(Number.isFinite(value) && (value as number) > 0));
    if (wrong !== undefined) throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `InMemoryCache: ${wrong[0]} must be a number above 0`);
  }

  /** The bytes every entry holds. */
  get bytes(): number {
    return this.held;
  }

  async lookup(key: string): Promise<AIMessageChunk[] | undefined> {
    const hit = this.entries.get(key);
    if (hit === undefined) return undefined;
    if (hit.expires !== undefined && Date.now() >= hit.expires) {
      this.remove(key);
      return undefined;
    }
    this.entries.delete(key);
    this.entries.set(key, hit);
    return (JSON.parse(hit.json) as unknown[]).map((chunk) => coerceMessage(chunk) as AIMessageChunk);
  }

  /** Stores an answer; `ttlSeconds` (default the cache's) is how long it is served. */
  async update(key: string, chunks: AIMessageChunk[], ttlSeconds = this.ttlSeconds): Promise<void> {
    this.remove(key);
    const json = JSON.stringify(chunksToJSON(chunks));
    const bytes = heldBytes(json);
    if (bytes > this.maxBytes) return;
    this.entries.set(key, { json, bytes, expires: ttlSeconds === undefined ? undefined : Date.now() + ttlSeconds * 1000 });
    this.held += bytes;
    while (this.entries.size > this.maxEntries || this.held > this.maxBytes) this.remove(this.entries.keys().next().value as string);
  }

  private remove(key: string): void {
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    this.entries.delete(key);
    this.held -= entry.bytes;
  }

  get size(): number {
    return this.entries.size;
  }
}
