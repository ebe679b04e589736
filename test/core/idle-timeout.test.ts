import { describe, expect, it } from 'vitest';
import { IdleGuard, withIdleTimeout } from '../../src/index.js';
import { delay, toArray } from '../helpers.js';

async function* paced(gaps: number[]): AsyncGenerator<number> {
  for (const [i, gap] of gaps.entries()) {
    await delay(gap);
    yield i;
  }
}

describe('withIdleTimeout', () => {
  it('fails when the source goes quiet longer than the limit', async () => {
    await expect(toArray(withIdleTimeout(paced([0, 0, 300]), 60, () => new Error('stalled')))).rejects.toThrow('stalled');
  });

  it('does not blame the source for a slow reader', async () => {
    const seen: number[] = [];
    for await (const item of withIdleTimeout(paced([0, 0, 0]), 40, () => new Error('stalled'))) {
      seen.push(item);
      await delay(120); // the reader dawdles three times the limit
    }
    expect(seen).toEqual([0, 1, 2]);
  });
});

describe('IdleGuard.pull', () => {
  const source = (next: () => Promise<IteratorResult<number>>): AsyncIterator<number> => ({ next });

  it('settles with what its item handler makes of the item, and rejects with what it throws', async () => {
    const guard = new IdleGuard(1000, () => new Error('stalled'));
    try {
      const items = [1, 2][Symbol.iterator]();
      const iterator = source(async () => items.next());
      expect(await guard.pull(iterator, (r) => (r.done === true ? 'done' : `item ${r.value}`), () => 'error')).toBe('item 1');
      await expect(
        guard.pull(iterator, () => {
          throw new Error('refused');
        }, () => 'error'),
      ).rejects.toThrow('refused');
    } finally {
      guard.dispose();
    }
  });

  it("hands the source's error, thrown at once or later, and the stall to its error handler", async () => {
    const guard = new IdleGuard(40, () => new Error('stalled'));
    try {
      const failing = source(() => Promise.reject(new Error('source broke')));
      expect(await guard.pull(failing, () => 'item', (e) => `handled ${(e as Error).message}`)).toBe('handled source broke');
      const throwing = source(() => {
        throw new Error('thrown at once');
      });
      expect(await guard.pull(throwing, () => 'item', (e) => `handled ${(e as Error).message}`)).toBe('handled thrown at once');
      const stuck = source(() => new Promise(() => {}));
      await expect(
        guard.pull(stuck, () => 'item', (e) => {
          throw new Error(`wrapped ${(e as Error).message}`);
        }),
      ).rejects.toThrow('wrapped stalled');
      expect(guard.timedOut).toBe(true);
      // Once given up on, a pull does not read the source again: the stall goes straight to the handler.
      expect(await guard.pull(stuck, () => 'item', (e) => `again ${(e as Error).message}`)).toBe('again stalled');
    } finally {
      guard.dispose();
    }
  });
});
