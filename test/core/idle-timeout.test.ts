import { describe, expect, it } from 'vitest';
import { withIdleTimeout } from '../../src/index.js';
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
