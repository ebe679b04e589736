/** Response caching in Redis, and the bounded Redis client. */
export { DEFAULT_CACHE_TTL_SECONDS, RedisCache, parseCacheEntry, type RedisCacheOptions } from './redis-cache.js';
export { createRedisClient, type RedisClientOptions } from './redis-client.js';
