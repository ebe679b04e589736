import { describe, expect, it } from 'vitest';
import { assign, generator, lambda, parallel, passthrough, pick, sequence, toRunnable } from '../../src/index.js';
import { deferred, toArray } from '../helpers.js';

describe('parallel', () => {
  it('runs branches concurrently', async () => {
    const aStarted = deferred();
    const bStarted = deferred();
    // Each branch waits for the other to have started: sequential execution would deadlock.
    const both = parallel({
      a: lambda(async () => {
        aStarted.resolve();
        await bStarted.promise;
        return 'a';
      }),
      b: lambda(async () => {
        bStarted.resolve();
        await aStarted.promise;
        return 'b';
      }),
    });
    expect(await both.invoke(undefined)).toEqual({ a: 'a', b: 'b' });
  });

  it('streams {key: chunk} as each branch produces', async () => {
    const release = deferred();
    const both = parallel({
      slow: generator(async function* () {
        await release.promise;
        yield 'late';
      }),
      fast: generator(async function* () {
        yield 'x';
        yield 'y';
      }),
    });
    const stream = both.stream(undefined);
    expect((await stream.next()).value).toEqual({ fast: 'x' });
    expect((await stream.next()).value).toEqual({ fast: 'y' });
    release.resolve();
    expect(await toArray(stream)).toEqual([{ slow: 'late' }]);
  });

  it('coerces a plain object into a parallel, and is invoked like one', async () => {
    const chain = sequence((x: number) => x + 1, { double: (x: number) => x * 2, same: passthrough() });
    expect(await chain.invoke(1)).toEqual({ double: 4, same: 2 });
    expect(await toRunnable({ n: (x: number) => -x }).invoke(3)).toEqual({ n: -3 });
  });

  it('feeds a streamed input to every branch', async () => {
    const source = generator(async function* () {
      yield 'ab';
      yield 'cd';
    });
    const chain = sequence(source, { upper: (s: string) => s.toUpperCase(), length: (s: string) => s.length });
    expect(await chain.invoke(undefined)).toEqual({ upper: 'ABCD', length: 4 });
  });
});

describe('assign', () => {
  it('adds computed keys to the input', async () => {
    const withTotal = assign({ total: (x: { a: number; b: number }) => x.a + x.b });
    expect(await withTotal.invoke({ a: 1, b: 2 })).toEqual({ a: 1, b: 2, total: 3 });
  });

  it('streams the passed-through keys at once, then each new key', async () => {
    const release = deferred();
    const withSlow = assign({
      slow: lambda(async () => {
        await release.promise;
        return 'done';
      }),
    });
    const stream = withSlow.stream({ question: 'q', n: 1 });
    expect((await stream.next()).value).toEqual({ question: 'q', n: 1 });
    release.resolve();
    expect(await toArray(stream)).toEqual([{ slow: 'done' }]);
  });

  it('is available as a method after a step', async () => {
    const chain = lambda((x: number) => ({ x })).assign({ y: (o: { x: number }) => o.x * 3 });
    expect(await chain.invoke(2)).toEqual({ x: 2, y: 6 });
  });

  it('refuses a non-object input with a clear error', async () => {
    await expect(assign({ y: () => 1 }).invoke(5 as never)).rejects.toMatchObject({ code: 'RUNNEL_ERR_INVALID_ARGUMENT' });
  });
});

describe('pick', () => {
  it('picks one key as its value, or several as an object', async () => {
    expect(await pick('a').invoke({ a: 1, b: 2 })).toBe(1);
    expect(await pick(['a', 'c']).invoke({ a: 1, b: 2, c: 3 })).toEqual({ a: 1, c: 3 });
    expect(await lambda(() => ({ a: 1, b: 2 })).pick(['b']).invoke(undefined)).toEqual({ b: 2 });
  });

  it('streams only chunks that carry a picked key', async () => {
    const source = generator(async function* () {
      yield { a: 'x' };
      yield { b: 'skip' };
      yield { a: 'y' };
    });
    expect(await toArray(sequence(source, pick('a')).stream(undefined))).toEqual(['x', 'y']);
  });
});
