/**
 * The in-memory response cache is bounded by bytes, not only by entries: a streamed answer is cached as one
 * chunk a token, and 1,000 of them (the entry bound) held gigabytes of heap. The server's chains share one
 * such store (`connectServices` without Redis), so the bound is the process's, not one per chain.
 */
import { describe, expect, it } from 'vitest';
import { AIMessageChunk, connectServices, InMemoryCache } from '../../src/index.js';

/** An answer streamed a word at a time, as the providers send it, ending as a finished one does. */
function streamed(words: number, tag: string): AIMessageChunk[] {
  const chunks = Array.from({ length: words }, (_, i) => new AIMessageChunk({ content: ` ${tag}${i}`, id: 'chatcmpl-1' }));
  chunks.push(new AIMessageChunk({ content: '', id: 'chatcmpl-1', response_metadata: { finish_reason: 'stop' } }));
  return chunks;
}

describe('InMemoryCache', () => {
  it('holds at most maxBytes of answers, the least recently used out first', async () => {
    const cache = new InMemoryCache({ maxBytes: 200_000 });
    for (let i = 0; i < 100; i++) await cache.update(`k${i}`, streamed(200, `a${i}-`));
    expect(cache.bytes).toBeGreaterThan(0);
    expect(cache.bytes).toBeLessThanOrEqual(200_000);
    expect(cache.size).toBeLessThan(100);
    // The newest is kept whole, token by token; the oldest went.
    const newest = await cache.lookup('k99');
    expect(newest?.map((chunk) => chunk.text).join('')).toBe(streamed(200, 'a99-').map((chunk) => chunk.text).join(''));
    expect(newest).toHaveLength(201);
    expect(newest?.at(-1)?.response_metadata.finish_reason).toBe('stop');
    expect(await cache.lookup('k0')).toBeUndefined();
  });

  it('keeps no answer larger than maxBytes on its own, and drops the entry it replaces', async () => {
    const cache = new InMemoryCache({ maxBytes: 10_000 });
    await cache.update('k', streamed(5, 'small'));
    await cache.update('k', streamed(2_000, 'big'));
    expect(await cache.lookup('k')).toBeUndefined();
    expect(cache.size).toBe(0);
    expect(cache.bytes).toBe(0);
  });

  it('hands each hit chunks of its own: a caller that changes them does not change the entry', async () => {
    const cache = new InMemoryCache();
    await cache.update('k', streamed(3, 'w'));
    const first = await cache.lookup('k');
    (first as AIMessageChunk[]).length = 0;
    expect(await cache.lookup('k')).toHaveLength(4);
  });
});

describe("the services' in-memory model cache", () => {
  it('is one store for every chain, its namespaces kept apart', async () => {
    const services = await connectServices({});
    try {
      await services.modelCache().update('k', streamed(3, 'shared'));
      expect((await services.modelCache().lookup('k'))?.map((chunk) => chunk.text).join('')).toBe(' shared0 shared1 shared2');
      expect(await services.modelCache({ namespace: 'other' }).lookup('k')).toBeUndefined();
    } finally {
      await services.close();
    }
  });
});
