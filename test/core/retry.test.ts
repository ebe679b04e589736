import { describe, expect, it, vi } from 'vitest';
import { generator, lambda, RunnelError, type StreamEvent } from '../../src/index.js';
import { settleWithin, toArray } from '../helpers.js';

function flaky(failures: number): { runnable: ReturnType<typeof lambda<number, string>>; calls: () => number } {
  let calls = 0;
  const runnable = lambda<number, string>(() => {
    calls += 1;
    if (calls <= failures) throw new Error(`failure ${calls}`);
    return `ok after ${calls}`;
  });
  return { runnable, calls: () => calls };
}

describe('withRetry', () => {
  it('retries until an attempt succeeds', async () => {
    const { runnable, calls } = flaky(2);
    expect(await runnable.withRetry({ initialDelayMs: 1 }).invoke(0)).toBe('ok after 3');
    expect(calls()).toBe(3);
  });

  it('stops after stopAfterAttempt attempts (default 3) and raises the last error', async () => {
    const { runnable, calls } = flaky(10);
    await expect(runnable.withRetry({ initialDelayMs: 1 }).invoke(0)).rejects.toThrow('failure 3');
    expect(calls()).toBe(3);
    const again = flaky(10);
    await expect(again.runnable.withRetry({ stopAfterAttempt: 5, initialDelayMs: 1 }).invoke(0)).rejects.toThrow('failure 5');
    expect(again.calls()).toBe(5);
  });

  it('retries only errors retryIf accepts', async () => {
    const { runnable, calls } = flaky(10);
    const retried = runnable.withRetry({ initialDelayMs: 1, retryIf: (error) => !String(error).includes('failure 2') });
    await expect(retried.invoke(0)).rejects.toThrow('failure 2');
    expect(calls()).toBe(2);
  });

  it('does not retry errors marked not retryable', async () => {
    let calls = 0;
    const invalid = lambda(() => {
      calls += 1;
      throw new RunnelError('RUNNEL_ERR_INPUT_INVALID', 'bad input');
    });
    await expect(invalid.withRetry({ initialDelayMs: 1 }).invoke(0)).rejects.toThrow('bad input');
    expect(calls).toBe(1);
  });

  it('waits exponentially longer between attempts', async () => {
    vi.useFakeTimers();
    try {
      let calls = 0;
      const failing = lambda(() => {
        calls += 1;
        throw new Error('x');
      });
      const run = failing.withRetry({ stopAfterAttempt: 3, initialDelayMs: 20, jitter: false }).invoke(0);
      run.catch(() => {});
      await vi.advanceTimersByTimeAsync(0);
      expect(calls).toBe(1);
      await vi.advanceTimersByTimeAsync(19);
      expect(calls).toBe(1);
      await vi.advanceTimersByTimeAsync(1);
      expect(calls).toBe(2);
      await vi.advanceTimersByTimeAsync(39);
      expect(calls).toBe(2);
      await vi.advanceTimersByTimeAsync(1);
      expect(calls).toBe(3);
      await expect(run).rejects.toThrow('x');
    } finally {
      vi.useRealTimers();
    }
  });

  it('never retries an abort, even when retryIf says yes', async () => {
    let calls = 0;
    const controller = new AbortController();
    const slow = lambda(async (_: number, config) => {
      calls += 1;
      await new Promise((resolve) => setTimeout(resolve, 1000));
      config.signal?.throwIfAborted();
      return 'late';
    });
    const run = slow.withRetry({ retryIf: () => true, initialDelayMs: 1 }).invoke(0, { signal: controller.signal });
    setTimeout(() => controller.abort(), 10);
    await expect(settleWithin(run, 500)).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    expect(calls).toBe(1);
  });

  it('ends the wait between attempts at once on abort', async () => {
    const controller = new AbortController();
    const { runnable, calls } = flaky(10);
    const run = runnable.withRetry({ initialDelayMs: 60_000 }).invoke(0, { signal: controller.signal });
    setTimeout(() => controller.abort(), 10);
    await expect(settleWithin(run, 1000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    expect(calls()).toBe(1);
  });

  it('retries a stream only before its first chunk', async () => {
    let attempts = 0;
    const failsEarlyOnce = generator(async function* () {
      attempts += 1;
      if (attempts === 1) throw new Error('before first chunk');
      yield 'a';
      yield 'b';
    });
    expect(await toArray(failsEarlyOnce.withRetry({ initialDelayMs: 1 }).stream(undefined))).toEqual(['a', 'b']);
    expect(attempts).toBe(2);

    let lateAttempts = 0;
    const failsLate = generator(async function* () {
      lateAttempts += 1;
      yield 'a';
      throw new Error('after first chunk');
    });
    const seen: unknown[] = [];
    await expect(
      (async () => {
        for await (const chunk of failsLate.withRetry({ initialDelayMs: 1 }).stream(undefined)) seen.push(chunk);
      })(),
    ).rejects.toThrow('after first chunk');
    expect(seen).toEqual(['a']);
    expect(lateAttempts).toBe(1);
  });

  it('reports each attempt as a child run tagged retry:attempt:N', async () => {
    const { runnable } = flaky(1);
    const events = await toArray(runnable.withRetry({ initialDelayMs: 1 }).streamEvents(0));
    const attempts = events.filter((e: StreamEvent) => e.event === 'on_chain_start' && e.name === 'RunnableLambda');
    expect(attempts.map((e) => e.tags)).toEqual([['retry:attempt:1'], ['retry:attempt:2']]);
    expect(events.filter((e) => e.event === 'on_chain_error')).toHaveLength(1);
  });
});
