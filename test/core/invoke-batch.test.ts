import { describe, expect, it } from 'vitest';
import { lambda, onAbort, parallel, sequence, RunnelError, type RunnableConfig } from '../../src/index.js';
import { deferred, toArray } from '../helpers.js';

describe('invoke', () => {
  it('runs a sequence of functions in order', async () => {
    const chain = sequence(
      (x: number) => x + 1,
      async (x: number) => x * 2,
      (x: number) => `v${x}`,
    );
    expect(await chain.invoke(1)).toBe('v4');
  });

  it('rejects (never throws synchronously) when a step throws', async () => {
    const chain = lambda(() => {
      throw new Error('boom');
    });
    const result = chain.invoke(1);
    await expect(result).rejects.toThrow('boom');
  });
});

describe('batch', () => {
  it('returns outputs in input order even when later inputs finish first', async () => {
    const slowFirst = lambda(async (x: number) => {
      await new Promise((resolve) => setTimeout(resolve, x === 0 ? 30 : 1));
      return x * 10;
    });
    expect(await slowFirst.batch([0, 1, 2, 3])).toEqual([0, 10, 20, 30]);
  });

  it('keeps at most maxConcurrency calls in flight', async () => {
    let inFlight = 0;
    let peak = 0;
    const gates = Array.from({ length: 6 }, () => deferred());
    const step = lambda(async (i: number) => {
      inFlight += 1;
      peak = Math.max(peak, inFlight);
      await gates[i]?.promise;
      inFlight -= 1;
      return i;
    });
    const done = step.batch([0, 1, 2, 3, 4, 5], { maxConcurrency: 2 });
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(inFlight).toBe(2);
    gates.forEach((gate) => gate.resolve());
    expect(await done).toEqual([0, 1, 2, 3, 4, 5]);
    expect(peak).toBe(2);
  });

  it('rejects with the first error, or returns errors in place with returnExceptions', async () => {
    const step = lambda((x: number) => {
      if (x === 2) throw new Error('two');
      return x;
    });
    await expect(step.batch([1, 2, 3])).rejects.toThrow('two');
    const results = await step.batch([1, 2, 3], undefined, { returnExceptions: true });
    expect(results[0]).toBe(1);
    expect(results[1]).toBeInstanceOf(Error);
    expect((results[1] as Error).message).toBe('two');
    expect(results[2]).toBe(3);
  });

  // A probe: a failed item failed the batch while the others ran on (a model's tokens spent after the answer).
  it('cancels the other items when one fails; returnExceptions cancels nothing; a parallel cancels its other branches', async () => {
    /** A step that waits for its cancellation (or 300 ms) and says which came first. */
    const waiting = (ended: (how: string) => void) =>
      lambda(async (x: number, config: RunnableConfig) => {
        if (x === 1) throw new RunnelError('RUNNEL_ERR_OUTPUT_PARSE', 'one');
        const how = await new Promise<string>((resolve) => {
          if (config.signal !== undefined) onAbort(config.signal, () => resolve('cancelled'));
          setTimeout(() => resolve('done'), 300);
        });
        ended(how);
        return x;
      });
    const endedAs = async (run: (step: ReturnType<typeof waiting>) => Promise<unknown>): Promise<string> => {
      let ended!: (how: string) => void;
      const how = new Promise<string>((resolve) => (ended = resolve));
      await run(waiting(ended)).catch(() => undefined);
      return how;
    };
    await expect(waiting(() => undefined).batch([0, 1])).rejects.toMatchObject({ code: 'RUNNEL_ERR_OUTPUT_PARSE' });
    expect(await endedAs((step) => step.batch([0, 1, 2]))).toBe('cancelled');
    expect(await endedAs((step) => step.map().invoke([0, 1]))).toBe('cancelled');
    expect(await endedAs((step) => step.batch([0, 1], undefined, { returnExceptions: true }))).toBe('done');
    expect(await endedAs((step) => parallel({ a: lambda(() => step.invoke(1)), b: lambda(() => step.invoke(0)) }).invoke(0))).toBe('cancelled');
  });

  // A probe: streamed, a parallel's failing branch left the others running (a model kept spending tokens), and
  // their runs ended after the parallel's error — a streamEvents reader saw them start and never end.
  it('cancels a streamed parallel’s other branches when one fails, and fails once their runs have ended', async () => {
    let bStarted = deferred();
    let bCancelled = false;
    const par = parallel({
      a: lambda(async function a() {
        await bStarted.promise;
        throw new Error('a failed');
      }),
      b: lambda(async function b(_x: number, config: RunnableConfig) {
        bStarted.resolve();
        await new Promise<void>((resolve) => {
          if (config.signal !== undefined) onAbort(config.signal, () => resolve());
        });
        bCancelled = true;
        return 'b';
      }),
    });
    for (const read of [(config: RunnableConfig) => toArray(par.stream(1, config)), (config: RunnableConfig) => toArray(par.streamEvents(1, config))]) {
      bCancelled = false;
      bStarted = deferred();
      const ends: string[] = [];
      await expect(read({ callbacks: [(event) => void (/_(end|error)$/.test(event.event) && ends.push(`${event.event} ${event.name}`))] })).rejects.toThrow('a failed');
      expect(bCancelled).toBe(true);
      expect(ends).toEqual(['on_chain_error a', 'on_chain_error b', 'on_chain_error RunnableParallel<a,b>']);
    }
  });

  it('takes one config per input, and refuses a count that does not match', async () => {
    const seen: string[][] = [];
    const step = lambda((x: number, config: RunnableConfig) => {
      seen[x] = config.tags ?? [];
      return x;
    });
    await step.batch([0, 1], [{ tags: ['a'] }, { tags: ['b'] }]);
    expect(seen).toEqual([['a'], ['b']]);
    const mismatch = step.batch([0, 1], [{ tags: ['a'] }]);
    await expect(mismatch).rejects.toBeInstanceOf(RunnelError);
    await expect(mismatch).rejects.toMatchObject({ code: 'RUNNEL_ERR_INVALID_ARGUMENT' });
  });

  it('answers an empty batch with an empty array', async () => {
    expect(await lambda((x: number) => x).batch([])).toEqual([]);
  });
});
