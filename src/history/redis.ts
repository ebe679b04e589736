/**
 * `RedisChatMessageHistory`: one Redis list per session under a namespaced
 * key, full message JSON (never chunks), appended atomically (RPUSH, LTRIM
 * and EXPIRE in one MULTI), trimmed to `maxMessages`, the TTL refreshed on
 * every write. Read back, each record is parsed and validated; a corrupt one
 * is `RUNNEL_ERR_STORED_RECORD_INVALID`. Redis failures are
 * `RUNNEL_ERR_REDIS_UNAVAILABLE`.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { wrongTypeError } from '../cache/redis-client.js';
import { isRunnelError, RunnelError } from '../core/index.js';
import { coerceMessage, type BaseMessage } from '../messages/index.js';
import { storable, type ChatMessageHistory } from './history.js';

/** Options of {@link RedisChatMessageHistory}. */
export interface RedisHistoryOptions {
  client: Redis;
  sessionId: string;
  /** Key prefix (default `runnel:history`). */
  namespace?: string;
  /** Seconds a conversation lives after its last write (default 7 days). */
  ttlSeconds?: number;
  /** Messages kept, the newest (default 200). */
  maxMessages?: number;
  /**
   * Most bytes of a conversation read back (default 64 MiB, Redis's own count of the list): one larger was
   * not written by Runnel — 200 messages that size would need a third of a megabyte each — and is refused
   * (`RUNNEL_ERR_STORED_RECORD_INVALID`) rather than read into memory at every turn.
   */
  maxBytes?: number;
}

/**
 * Lua: the list KEYS[1] whole, unless Redis counts it larger than ARGV[1] bytes (an error reply then,
 * TOOLARGE, with its size): so a list too large to read is never sent.
 */
const READ_BOUNDED = `
local size = redis.call('MEMORY', 'USAGE', KEYS[1], 'SAMPLES', '0')
if size and size > tonumber(ARGV[1]) then return redis.error_reply('TOOLARGE ' .. size) end
return redis.call('LRANGE', KEYS[1], 0, -1)`;

/** A Redis failure as a Runnel error (other errors pass through). */
export function redisError(error: unknown): RunnelError {
  if (isRunnelError(error)) return error;
  return wrongTypeError(error, 'A stored chat history') ?? new RunnelError('RUNNEL_ERR_REDIS_UNAVAILABLE', 'Redis is unavailable', { cause: error });
}

/** The field of a stored message naming the write that stored it (dropped when read). */
const WRITE_TOKEN = 'runnel_write';

function withoutWriteToken(record: unknown): unknown {
  if (record === null || typeof record !== 'object' || !(WRITE_TOKEN in record)) return record;
  const { [WRITE_TOKEN]: _token, ...message } = record as Record<string, unknown>;
  return message;
}

/**
 * One conversation in Redis.
 *
 * @example
 * const history = new RedisChatMessageHistory({ client: redis, sessionId: 'alice:s1' });
 */
export class RedisChatMessageHistory implements ChatMessageHistory {
  private readonly client: Redis;
  private readonly key: string;
  private readonly ttlSeconds: number;
  private readonly maxMessages: number;
  private readonly maxBytes: number;

  constructor(options: RedisHistoryOptions) {
    this.client = options.client;
    this.key = `${options.namespace ?? 'runnel:history'}:${options.sessionId}`;
    this.ttlSeconds = options.ttlSeconds ?? 7 * 24 * 3600;
    this.maxMessages = options.maxMessages ?? 200;
    this.maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
  }

  async getMessages(): Promise<BaseMessage[]> {
    let records: string[];
    try {
      records = (await this.client.eval(READ_BOUNDED, 1, this.key, this.maxBytes)) as string[];
    } catch (error) {
      const size = error instanceof Error ? /^TOOLARGE (\d+)/.exec(error.message)?.[1] : undefined;
      if (size !== undefined) {
        throw new RunnelError('RUNNEL_ERR_STORED_RECORD_INVALID', `The stored chat history of this session holds ${Math.round(Number(size) / 2 ** 20)} MiB, more than the ${Math.round(this.maxBytes / 2 ** 20)} MiB a history is read up to`);
      }
      throw redisError(error);
    }
    return records.map((record, index) => {
      try {
        return coerceMessage(withoutWriteToken(JSON.parse(record)));
      } catch (error) {
        throw new RunnelError('RUNNEL_ERR_STORED_RECORD_INVALID', `History record ${index} of this session is not a valid message`, { cause: error });
      }
    });
  }

  async addMessages(messages: BaseMessage[]): Promise<void> {
    if (messages.length === 0) return;
    // Each write's records carry a token of their own, so a write whose outcome is unknown can be taken back.
    const token = randomUUID();
    const records = messages.map((message) => JSON.stringify({ ...storable(message).toJSON(), [WRITE_TOKEN]: token }));
    try {
      const results = await this.client
        .multi()
        .rpush(this.key, ...records)
        .ltrim(this.key, -this.maxMessages, -1)
        .expire(this.key, this.ttlSeconds)
        .exec();
      const failed = results?.find(([error]) => error !== null);
      if (results === null || failed !== undefined) throw failed?.[0] ?? new Error('MULTI was aborted');
    } catch (error) {
      // A write that timed out may still be carried out: a frozen Redis runs what its socket holds when it
      // wakes, and the turn its caller was told had failed would be saved (twice, once the client retries).
      // Its removal goes on the same connection right behind it, so Redis runs the two in that order; the
      // token makes it match this write's records alone (an earlier identical turn stays).
      for (const record of records) this.client.lrem(this.key, 0, record).catch(() => undefined);
      throw redisError(error);
    }
  }

  async clear(): Promise<void> {
    try {
      await this.client.del(this.key);
    } catch (error) {
      throw redisError(error);
    }
  }
}
