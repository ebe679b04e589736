/**
 * `RedisCache`: the model response cache in Redis, behind the `ModelCache`
 * interface. An entry is the answer's chunks as JSON under
 * `{namespace}:{key}` with a TTL; read back, it is validated (a corrupt
 * entry is rejected with `RUNNEL_ERR_STORED_RECORD_INVALID` and treated as a
 * miss). When Redis is down the cache fails open: the model is called, the
 * miss is counted. Hits and misses are counted for `/metrics`.
 */
import type { Redis } from 'ioredis';
import { MAX_STORED_JSON_DEPTH, nestedDeeperThan, RunnelError } from '../core/index.js';
import { AIMessageChunk, coerceMessage } from '../messages/index.js';
import type { ModelCache } from '../models/index.js';

/** Seconds an answer stays cached unless a cache is told otherwise: a day. */
export const DEFAULT_CACHE_TTL_SECONDS = 24 * 3600;

/** Options of {@link RedisCache}. */
export interface RedisCacheOptions {
  client: Redis;
  /** Key prefix (default `runnel:cache`). */
  namespace?: string;
  /** Seconds an answer stays cached (default 1 day). */
  ttlSeconds?: number;
  /** Called on every lookup with its result, for metrics. */
  onLookup?: (result: 'hit' | 'miss' | 'error') => void;
}

/** Parses a stored entry: a list of AI message chunks, validated. */
export function parseCacheEntry(raw: string): AIMessageChunk[] {
  if (nestedDeeperThan(raw, MAX_STORED_JSON_DEPTH)) throw new RunnelError('RUNNEL_ERR_STORED_RECORD_INVALID', `A cached answer nests deeper than ${MAX_STORED_JSON_DEPTH} levels`);
  let data: unknown;
  try {
    data = JSON.parse(raw);
  } catch (error) {
    throw new RunnelError('RUNNEL_ERR_STORED_RECORD_INVALID', 'A cached answer is not JSON', { cause: error });
  }
  if (!Array.isArray(data)) throw new RunnelError('RUNNEL_ERR_STORED_RECORD_INVALID', 'A cached answer is not a list of chunks');
  // No answer is stored without a chunk: an empty list served as one was an empty answer, every time, until it expired.
  if (data.length === 0) throw new RunnelError('RUNNEL_ERR_STORED_RECORD_INVALID', 'A cached answer holds no chunk');
  return data.map((item, index) => {
    let message;
    try {
      message = coerceMessage(item);
    } catch (error) {
      throw new RunnelError('RUNNEL_ERR_STORED_RECORD_INVALID', `Chunk ${index} of a cached answer is invalid`, { cause: error });
    }
    if (!(message instanceof AIMessageChunk)) throw new RunnelError('RUNNEL_ERR_STORED_RECORD_INVALID', `Chunk ${index} of a cached answer is not an AI message chunk`);
    return message;
  });
}

/**
 * Model answers cached in Redis.
 *
 * @example
 * const model = new ChatOpenAI({ cache: new RedisCache({ client: redis, ttlSeconds: 3600 }) });
 */
export class RedisCache implements ModelCache {
  private readonly client: Redis;
  private readonly namespace: string;
  private readonly ttlSeconds: number;
  private readonly onLookup: (result: 'hit' | 'miss' | 'error') => void;

  constructor(options: RedisCacheOptions) {
    this.client = options.client;
    this.namespace = options.namespace ?? 'runnel:cache';
    this.ttlSeconds = options.ttlSeconds ?? DEFAULT_CACHE_TTL_SECONDS;
    this.onLookup = options.onLookup ?? (() => {});
  }

  async lookup(key: string): Promise<AIMessageChunk[] | undefined> {
    let raw: string | null;
    try {
      raw = await this.client.get(`${this.namespace}:${key}`);
    } catch {
      this.onLookup('error');
      return undefined; // fail open: the model answers
    }
    if (raw === null) {
      this.onLookup('miss');
      return undefined;
    }
    try {
      const chunks = parseCacheEntry(raw);
      this.onLookup('hit');
      return chunks;
    } catch (error) {
      this.onLookup('error');
      throw error;
    }
  }

  async update(key: string, chunks: AIMessageChunk[]): Promise<void> {
    try {
      const entry = JSON.stringify(chunks);
      // One a lookup would refuse is not written (an answer nested that deep is still an answer, uncached).
      if (nestedDeeperThan(entry, MAX_STORED_JSON_DEPTH)) return;
      await this.client.set(`${this.namespace}:${key}`, entry, 'EX', this.ttlSeconds);
    } catch {
      // Fail open: an answer that could not be cached is still an answer.
    }
  }
}
