/** Watches what a run hands the model response cache. */
import { AIMessageChunk, type Services } from '../../src/index.js';

/**
 * Records every answer `services`' model caches are given to keep, as text (a partial answer
 * would show here); the cache itself works as before.
 */
export function recordCacheWrites(services: Services): string[] {
  const stored: string[] = [];
  const modelCache = services.modelCache.bind(services);
  services.modelCache = (options) => {
    const cache = modelCache(options);
    return {
      lookup: (key) => cache.lookup(key),
      update: (key, chunks) => {
        stored.push(AIMessageChunk.merge(chunks).text);
        return cache.update(key, chunks);
      },
    };
  };
  return stored;
}
