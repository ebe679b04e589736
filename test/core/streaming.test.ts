import { describe, expect, it } from 'vitest';
import { generator, lambda, sequence, passthrough } from '../../src/index.js';
import { deferred, toArray } from '../helpers.js';

describe('streaming composes', () => {
  it('delivers the first chunk of a 3-step generator sequence before the source has produced its second', async () => {
    const log: string[] = [];
    const secondMayCome = deferred();
    const source = generator(async function* () {
      log.push('source:1');
      yield 'a';
      await secondMayCome.promise;
      log.push('source:2');
      yield 'b';
    });
    const upper = generator(async function* (chunks: AsyncIterable<string>) {
      for await (const chunk of chunks) yield chunk.toUpperCase();
    });
    const exclaim = generator(async function* (chunks: AsyncIterable<string>) {
      for await (const chunk of chunks) yield `${chunk}!`;
    });
    const stream = sequence(source, upper, exclaim).stream(undefined);
    const first = await stream.next();
    expect(first.value).toBe('A!');
    expect(log).toEqual(['source:1']);
    secondMayCome.resolve();
    expect(await toArray(stream)).toEqual(['B!']);
    expect(log).toEqual(['source:1', 'source:2']);
  });

  it('makes a lambda collect its input (merged) before it runs', async () => {
    const source = generator(async function* () {
      yield 'Hel';
      yield 'lo';
    });
    const calls: unknown[] = [];
    const collectAll = lambda((text: string) => {
      calls.push(text);
      return text.length;
    });
    expect(await toArray(sequence(source, collectAll).stream(undefined))).toEqual([5]);
    expect(calls).toEqual(['Hello']);
  });

  it('collects object chunks key-wise for a lambda', async () => {
    const source = generator(async function* () {
      yield { a: 'x' };
      yield { a: 'y', b: [1] };
      yield { b: [2] };
    });
    const seen = lambda((input: unknown) => input);
    expect(await sequence(source, seen).invoke(undefined)).toEqual({ a: 'xy', b: [1, 2] });
  });

  it('rejects the first next() when the stream fails before its first chunk', async () => {
    const failing = sequence(
      (x: number) => x,
      () => {
        throw new Error('early');
      },
    );
    const stream = failing.stream(1);
    await expect(stream.next()).rejects.toThrow('early');
  });

  it('yields chunks produced before a later failure, then throws', async () => {
    const failing = generator(async function* () {
      yield 1;
      throw new Error('late');
    });
    const seen: unknown[] = [];
    await expect(
      (async () => {
        for await (const chunk of failing.stream(undefined)) seen.push(chunk);
      })(),
    ).rejects.toThrow('late');
    expect(seen).toEqual([1]);
  });

  it('transforms a stream of input chunks', async () => {
    async function* input(): AsyncGenerator<string> {
      yield 'a';
      yield 'b';
    }
    const upper = generator(async function* (chunks: AsyncIterable<string>) {
      for await (const chunk of chunks) yield chunk.toUpperCase();
    });
    expect(await toArray(upper.transform(input()))).toEqual(['A', 'B']);
    expect(await toArray(passthrough<string>().transform(input()))).toEqual(['a', 'b']);
  });

  it('invoke on a generator gives the merged output', async () => {
    const words = generator(async function* () {
      yield 'one ';
      yield 'two';
    });
    expect(await words.invoke(undefined)).toBe('one two');
  });

  it('streams a lambda that returns an async iterable chunk by chunk', async () => {
    const tokens = lambda(async function (text: string) {
      return (async function* () {
        for (const word of text.split(' ')) yield word;
      })();
    });
    expect(await toArray(tokens.stream('a b c'))).toEqual(['a', 'b', 'c']);
    expect(await tokens.invoke('a b c')).toBe('abc');
  });
});
