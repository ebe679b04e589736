import { describe, expect, it } from 'vitest';
import { collect, concat } from '../../src/index.js';

class Chunk {
  constructor(readonly text: string, readonly count = 1) {}
  concat(other: Chunk): Chunk {
    return new Chunk(this.text + other.text, this.count + other.count);
  }
}

describe('concat', () => {
  it('concatenates strings and arrays', () => {
    expect(concat('Hel', 'lo')).toBe('Hello');
    expect(concat([1], [2, 3])).toEqual([1, 2, 3]);
  });

  it('merges plain objects key-wise, recursively for mergeable values', () => {
    expect(concat({ a: 'He', n: { t: 'x' }, keep: 1 }, { a: 'y', n: { t: 'z', u: [1] }, add: true })).toEqual({
      a: 'Hey',
      n: { t: 'xz', u: [1] },
      keep: 1,
      add: true,
    });
  });

  it('lets objects with a concat method merge themselves (how message chunks plug in)', () => {
    const merged = concat(new Chunk('a'), new Chunk('b'));
    expect(merged).toBeInstanceOf(Chunk);
    expect(merged).toEqual(new Chunk('ab', 2));
    expect(concat({ message: new Chunk('x') }, { message: new Chunk('y') })).toEqual({ message: new Chunk('xy', 2) });
  });

  it('lets the later value win where values cannot be added', () => {
    expect(concat(1, 2)).toBe(2);
    expect(concat({ n: 1 }, { n: 2 })).toEqual({ n: 2 });
    expect(concat(undefined, 'a')).toBe('a');
  });

  it('collects a whole stream', async () => {
    async function* parts(): AsyncGenerator<string> {
      yield 'a';
      yield 'b';
    }
    expect(await collect(parts())).toBe('ab');
  });
});
