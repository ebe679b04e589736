/** Response caching in Redis, and the bounded Redis client. */
export { RedisCache, parseCacheEntry, type RedisCacheOptions } from './redis-cache.js';
export { createRedisClient, type RedisClientOptions } from './redis-client.js';
