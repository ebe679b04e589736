import { describe, expect, it } from 'vitest';
import { generator, lambda } from '../../src/index.js';
import { settleWithin, toArray } from '../helpers.js';

const failing = (message: string) =>
  lambda<Record<string, unknown>, string>(() => {
    throw new Error(message);
  });

describe('withFallbacks', () => {
  it('tries the fallbacks in order and returns the first success', async () => {
    const tried: string[] = [];
    const chain = failing('primary').withFallbacks([
      lambda(() => {
        tried.push('second');
        throw new Error('second');
      }),
      lambda(() => {
        tried.push('third');
        return 'third ok';
      }),
      lambda(() => {
        tried.push('fourth');
        return 'never';
      }),
    ]);
    expect(await chain.invoke({})).toBe('third ok');
    expect(tried).toEqual(['second', 'third']);
  });

  it('raises the first error when all fail', async () => {
    const chain = failing('first').withFallbacks([failing('second'), failing('third')]);
    await expect(chain.invoke({})).rejects.toThrow('first');
  });

  it('puts the previous error under exceptionKey in the next input', async () => {
    let seen: Record<string, unknown> | undefined;
    const chain = failing('primary').withFallbacks({
      fallbacks: [
        lambda((input: Record<string, unknown>) => {
          seen = input;
          return 'recovered';
        }),
      ],
      exceptionKey: 'error',
    });
    expect(await chain.invoke({ q: 1 })).toBe('recovered');
    expect(seen?.q).toBe(1);
    expect((seen?.error as Error).message).toBe('primary');
  });

  it('switches a stream only before its first chunk', async () => {
    const fail = true;
    const early = generator(async function* (): AsyncGenerator<string> {
      if (fail) throw new Error('early');
      yield 'unreachable';
    });
    const backup = generator(async function* () {
      yield 'backup';
    });
    expect(await toArray(early.withFallbacks([backup]).stream(undefined))).toEqual(['backup']);

    const late = generator(async function* () {
      yield 'partial';
      throw new Error('late');
    });
    const seen: unknown[] = [];
    await expect(
      (async () => {
        for await (const chunk of late.withFallbacks([backup]).stream(undefined)) seen.push(chunk);
      })(),
    ).rejects.toThrow('late');
    expect(seen).toEqual(['partial']);
  });

  it('does not fall back from an abort', async () => {
    const controller = new AbortController();
    let fellBack = false;
    const slow = lambda(() => new Promise<string>((resolve) => setTimeout(() => resolve('late'), 1000)));
    const chain = slow.withFallbacks([
      lambda(() => {
        fellBack = true;
        return 'fallback';
      }),
    ]);
    const run = chain.invoke(undefined, { signal: controller.signal });
    setTimeout(() => controller.abort(), 10);
    await expect(settleWithin(run, 500)).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    expect(fellBack).toBe(false);
  });
});
