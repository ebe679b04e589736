import { describe, expect, it } from 'vitest';
import {
  collect,
  generator,
  lambda,
  parallel,
  RunnableBranch,
  RunnableLambda,
  RunnableParallel,
  RunnablePassthrough,
  RunnableSequence,
  sequence,
  toRunnable,
  type RunInfo,
} from '../../src/index.js';
import { toArray } from '../helpers.js';

describe('composition', () => {
  it('offers the LangChain.js-familiar forms', async () => {
    const chain = RunnableSequence.from([
      RunnableLambda.from((x: number) => x + 1),
      RunnableParallel.from({ n: new RunnablePassthrough<number>(), m: (x: number) => x * 10 }),
    ]);
    expect(await chain.invoke(1)).toEqual({ n: 2, m: 20 });
    const choose = RunnableBranch.from<number, string>([[(x: number) => x > 0, () => 'positive'], () => 'other']);
    expect(await choose.invoke(-1)).toBe('other');
  });

  it('pipe returns a new runnable and never mutates', async () => {
    const first = lambda((x: number) => x + 1);
    const a = first.pipe((x: number) => x * 2);
    const b = first.pipe((x: number) => x * 3);
    expect(await a.invoke(1)).toBe(4);
    expect(await b.invoke(1)).toBe(6);
    expect(await first.invoke(1)).toBe(2);
    expect(a).not.toBe(b);
    expect(await a.pipe((x: number) => -x, (x: number) => `${x}`).invoke(1)).toBe('-4');
  });

  it('flattens nested sequences so step tags count each step', async () => {
    const inner = sequence((x: number) => x, (x: number) => x);
    const outer = sequence(inner, (x: number) => x) as RunnableSequence<number, number>;
    expect(outer.steps).toHaveLength(3);
  });

  it('coerces functions, async generator functions and objects', async () => {
    expect(toRunnable((x: number) => x * 2)).toBeInstanceOf(RunnableLambda);
    const gen = toRunnable(async function* (xs: AsyncIterable<string>) {
      for await (const x of xs) yield x + x;
    });
    expect(await toArray(gen.stream('a'))).toEqual(['aa']);
    expect(toRunnable({ a: (x: number) => x })).toBeInstanceOf(RunnableParallel);
    expect(() => toRunnable(42 as never)).toThrow(/Cannot make a runnable/);
  });

  // A probe: the generator object came back (`{}` as JSON), where LangChain iterates it.
  it('reads what a lambda’s sync generator function yields, as its async one', async () => {
    const words = lambda(function* (x: string) {
      yield `${x}1 `;
      yield `${x}2`;
    });
    expect(await words.invoke('a')).toBe('a1 a2');
    expect(await toArray(words.stream('b'))).toEqual(['b1 ', 'b2']);
    // Arrays and other iterables that are not iterators stay values.
    expect(await lambda(() => ['x', 'y']).invoke(0)).toEqual(['x', 'y']);
    expect(await lambda(() => new Set([1])).invoke(0)).toEqual(new Set([1]));
  });

  it('map() runs the runnable on each element', async () => {
    const doubled = lambda((x: number) => x * 2).map();
    expect(await doubled.invoke([1, 2, 3])).toEqual([2, 4, 6]);
    await expect(doubled.invoke(3 as never)).rejects.toMatchObject({ code: 'RUNNEL_ERR_INVALID_ARGUMENT' });
  });

  it('withListeners calls onStart and onEnd (or onError) for its runs', async () => {
    const seen: string[] = [];
    const infos: RunInfo[] = [];
    const step = lambda((x: number) => {
      if (x < 0) throw new Error('negative');
      return x * 2;
    }).withListeners({
      onStart: (run) => void seen.push(`start:${String(run.input)}`),
      onEnd: (run) => {
        seen.push(`end:${String(run.output)}`);
        infos.push(run);
      },
      onError: (run) => void seen.push(`error:${(run.error as Error).message}`),
    });
    await step.invoke(2);
    await expect(step.invoke(-1)).rejects.toThrow('negative');
    expect(seen).toEqual(['start:2', 'end:4', 'start:-1', 'error:negative']);
    expect(infos[0]?.endTime).toBeGreaterThanOrEqual(infos[0]?.startTime ?? Infinity);
  });

  it('parallel and generator compose in streams (invoke collects each step instead)', async () => {
    const chain = sequence(
      generator(async function* () {
        yield 1;
        yield 2;
      }),
      parallel({ sum: (x: number) => x, echo: generator(async function* (xs: AsyncIterable<number>) { for await (const x of xs) yield [x]; }) }),
    );
    // Streamed, the echo branch sees every chunk; the lambda collects its input (numbers: the later wins).
    expect(await collect(chain.stream(undefined))).toEqual({ sum: 2, echo: [1, 2] });
    // Invoked, each step gets the previous step's whole output.
    expect(await chain.invoke(undefined)).toEqual({ sum: 2, echo: [2] });
  });
});
