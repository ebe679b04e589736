/**
 * The in-memory response cache is bounded by bytes, not only by entries: a streamed answer is cached as one
 * chunk a token, and 1,000 of them (the entry bound) held gigabytes of heap. The server's chains share one
 * such store (`connectServices` without Redis), so the bound is the process's, not one per chain. Its entries
 * expire as Redis's do (the chain's `ttlSeconds`, else a day): they were served until evicted.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
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

  // A review: NaN lifted a bound, and a negative count of entries made every update evict for ever.
  it('refuses a bound that is none', () => {
    for (const options of [{ maxEntries: -1 }, { maxBytes: Number.NaN }, { ttlSeconds: 0 }, { ttlSeconds: Number.NaN }]) {
      expect(() => new InMemoryCache(options), JSON.stringify(options)).toThrow(/must be a number above 0/);
    }
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

describe('in-memory cache entries expire', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("after the chain's ttlSeconds, and after a day without one, as Redis's do", async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: new Date('2026-12-07T00:00:00Z') });
    const services = await connectServices({});
    try {
      const short = services.modelCache({ namespace: 'short', ttlSeconds: 60 });
      const daily = services.modelCache();
      await short.update('k', streamed(3, 'short'));
      await daily.update('k', streamed(3, 'daily'));
      vi.setSystemTime(new Date('2026-12-07T00:00:59Z'));
      expect(await short.lookup('k')).toHaveLength(4);
      vi.setSystemTime(new Date('2026-12-07T00:01:00Z'));
      expect(await short.lookup('k')).toBeUndefined();
      vi.setSystemTime(new Date('2026-12-07T23:59:59Z'));
      expect(await daily.lookup('k')).toHaveLength(4);
      vi.setSystemTime(new Date('2026-12-08T00:00:00Z'));
      expect(await daily.lookup('k')).toBeUndefined();
    } finally {
      await services.close();
    }
  });

  it("of an InMemoryCache given ttlSeconds; never without", async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: new Date('2026-12-07T00:00:00Z') });
    const expiring = new InMemoryCache({ ttlSeconds: 10 });
    const lasting = new InMemoryCache();
    await expiring.update('k', streamed(2, 'e'));
    await lasting.update('k', streamed(2, 'l'));
    vi.setSystemTime(new Date('2027-01-01T00:00:00Z'));
    expect(await expiring.lookup('k')).toBeUndefined();
    expect(expiring.bytes).toBe(0);
    expect(await lasting.lookup('k')).toHaveLength(3);
  });
});
