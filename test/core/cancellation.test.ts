import { describe, expect, it } from 'vitest';
import { abortable, CancelToken, generator, lambda, onAbort, Runnable, RunController, sequence, toAbortSignal, type StreamEvent } from '../../src/index.js';
import { deferred, settleWithin, toArray } from '../helpers.js';

const never = (): Promise<never> => new Promise<never>(() => {});

/**
 * A source that yields 'a' and then waits for the abort (as a cooperative
 * producer would), and stages that tag each chunk; each records its cleanup.
 */
function threeStages(cleaned: string[]) {
  const stage = (name: string) =>
    generator(async function* (chunks: AsyncIterable<string>) {
      try {
        for await (const chunk of chunks) yield `${chunk}>${name}`;
      } finally {
        cleaned.push(name);
      }
    });
  const source = generator(async function* (_: AsyncIterable<unknown>, config) {
    try {
      yield 'a';
      await new Promise<void>((resolve) => config.signal?.addEventListener('abort', () => resolve()));
      yield 'never';
    } finally {
      cleaned.push('source');
    }
  });
  return sequence(source, stage('one'), stage('two'));
}

describe('cancellation', () => {
  it('stops a pending step that ignores the signal, with a stable code', async () => {
    const controller = new AbortController();
    const run = lambda(never).invoke(undefined, { signal: controller.signal });
    controller.abort();
    await expect(settleWithin(run, 1000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED', statusCode: 499 });
  });

  it('times out with RUNNEL_ERR_TIMEOUT', async () => {
    const run = lambda(never).invoke(undefined, { timeout: 20 });
    await expect(settleWithin(run, 2000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_TIMEOUT' });
  });

  it('refuses to start when the signal has already fired', async () => {
    let ran = false;
    const step = lambda(() => {
      ran = true;
      return 1;
    });
    await expect(step.invoke(undefined, { signal: AbortSignal.abort() })).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    expect(ran).toBe(false);
  });

  it('hands the signal to whatever the step awaits', async () => {
    const controller = new AbortController();
    const sawAbort = deferred<unknown>();
    const step = lambda(
      (_: unknown, config) =>
        new Promise((_, reject) => {
          config.signal?.addEventListener('abort', () => {
            sawAbort.resolve(config.signal?.reason);
            reject(new Error('stopped'));
          });
        }),
    );
    const run = step.invoke(undefined, { signal: controller.signal });
    controller.abort('user left');
    await expect(run).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    expect(await settleWithin(sawAbort.promise, 1000)).toBe('user left');
  });

  it('stops a batch queue: items not yet started never start', async () => {
    const controller = new AbortController();
    const started: number[] = [];
    const step = lambda((i: number) => {
      started.push(i);
      return never();
    });
    const run = step.batch([0, 1, 2, 3], { maxConcurrency: 1, signal: controller.signal });
    await new Promise((resolve) => setTimeout(resolve, 5));
    controller.abort();
    await expect(settleWithin(run, 1000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(started).toEqual([0]);
  });

  it('stops all three steps of a streaming sequence at once, running generator cleanup', async () => {
    const controller = new AbortController();
    const cleaned: string[] = [];
    const events: StreamEvent[] = [];
    const stream = threeStages(cleaned).stream(undefined, {
      signal: controller.signal,
      callbacks: [(event) => void events.push(event)],
    });
    expect((await stream.next()).value).toBe('a>one>two');
    const next = stream.next();
    controller.abort();
    await expect(settleWithin(next, 1000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(cleaned.sort()).toEqual(['one', 'source', 'two']);
    const errors = events.filter((e) => e.event === 'on_chain_error');
    // The sequence and its three steps each end with an error event.
    expect(errors).toHaveLength(4);
    expect(errors.every((e) => e.data.error?.startsWith('RUNNEL_ERR_ABORTED'))).toBe(true);
  });

  it('ends each run of an aborted stream before its parent, with the abort, and nothing after the stream has failed', async () => {
    // Every level races the abort, and the outermost hears it first: the sequence's error came first, and each
    // step's end (not an error) after the stream had already failed, as its generator was closed later.
    const controller = new AbortController();
    const events: StreamEvent[] = [];
    const failed: string[] = [];
    const chain = threeStages([]).withListeners({ onError: (run) => void failed.push(run.name) });
    let thrown: unknown;
    try {
      for await (const event of chain.streamEvents(undefined, { signal: controller.signal })) {
        events.push(event);
        if (event.event === 'on_chain_stream' && event.parent_ids.length === 0) controller.abort();
      }
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    const seen = events.length;
    // The steps' generators close after the abort; they add nothing.
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(events).toHaveLength(seen);
    const terminal = events.filter((e) => e.event === 'on_chain_end' || e.event === 'on_chain_error');
    const started = events.filter((e) => e.event === 'on_chain_start');
    expect(terminal.map((e) => e.run_id).sort()).toEqual(started.map((e) => e.run_id).sort());
    expect(terminal.every((e) => e.event === 'on_chain_error' && e.data.error?.startsWith('RUNNEL_ERR_ABORTED'))).toBe(true);
    expect(terminal.at(-1)?.parent_ids).toEqual([]);
    expect(failed.at(-1)).toBe('RunnableSequence');
  });

  it('stops an unobserved streaming sequence promptly too (the race is where the signal enters)', async () => {
    const controller = new AbortController();
    const cleaned: string[] = [];
    const stream = threeStages(cleaned).stream(undefined, { signal: controller.signal });
    expect((await stream.next()).value).toBe('a>one>two');
    const next = stream.next();
    controller.abort();
    await expect(settleWithin(next, 1000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    await settleWithin(
      (async () => {
        while (cleaned.length < 3) await new Promise((r) => setTimeout(r, 5));
      })(),
      1000,
    );
    expect(cleaned.sort()).toEqual(['one', 'source', 'two']);
  });

  it('ends an aborted run with its error event', async () => {
    const controller = new AbortController();
    const events: StreamEvent[] = [];
    const run = lambda(never, { name: 'stuck' }).invoke(undefined, {
      signal: controller.signal,
      callbacks: [(event) => void events.push(event)],
    });
    controller.abort();
    await expect(run).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    expect(events.map((e) => e.event)).toEqual(['on_chain_start', 'on_chain_error']);
  });

  it('aborts a streamEvents run and a generator that never yields', async () => {
    const controller = new AbortController();
    const cleaned = deferred();
    const stuck = generator(async function* (_: AsyncIterable<unknown>, config) {
      try {
        await new Promise<void>((resolve) => config.signal?.addEventListener('abort', () => resolve()));
        yield 'never';
      } finally {
        cleaned.resolve();
      }
    });
    const consume = toArray(stuck.streamEvents(undefined, { signal: controller.signal }));
    setTimeout(() => controller.abort(), 5);
    await expect(settleWithin(consume, 1000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    await settleWithin(cleaned.promise, 1000);
  });
});

describe('CancelToken', () => {
  it('stops a pending step, a stream and a batch as a signal does', async () => {
    const token = new CancelToken();
    const run = lambda(never).invoke(undefined, { signal: token });
    const cleaned: string[] = [];
    const stream = threeStages(cleaned).stream(undefined, { signal: token });
    expect((await stream.next()).value).toBe('a>one>two');
    const next = stream.next();
    const started: number[] = [];
    const batch = lambda(async (x: number) => {
      started.push(x);
      return never();
    }).batch([1, 2, 3], { signal: token, maxConcurrency: 1 });
    token.abort();
    await expect(settleWithin(run, 1000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED', statusCode: 499 });
    await expect(settleWithin(next, 1000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    await expect(settleWithin(batch, 1000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    expect(started).toEqual([1]);
  });

  it('runs every waiter and still fires its signal when one waiter throws, which is reported as a warning', async () => {
    const token = new CancelToken();
    const heard: string[] = [];
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => void warnings.push(warning);
    process.on('warning', onWarning);
    try {
      token.onAbort(() => {
        throw new Error('cleanup bug');
      });
      // Not even printable: no toString, as an object made without a prototype.
      token.onAbort(() => {
        throw Object.create(null);
      });
      token.onAbort(() => void heard.push('third'));
      const signal = token.signal;
      expect(() => token.abort()).not.toThrow();
      expect(heard).toEqual(['third']);
      expect(signal.aborted).toBe(true);
      // The standard signal's own waiters (onAbort on a RunController's signal) are kept to the same rule.
      const controller = new RunController();
      onAbort(controller.signal, () => {
        throw new Error('its cleanup bug');
      });
      onAbort(controller.signal, () => void heard.push('controller'));
      expect(() => controller.abort()).not.toThrow();
      expect(heard).toEqual(['third', 'controller']);
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.map((w) => [(w as Error & { code?: string }).code, w.message])).toEqual([
        ['RUNNEL_CANCEL_CALLBACK_FAILED', 'A cancellation callback threw: cleanup bug'],
        ['RUNNEL_CANCEL_CALLBACK_FAILED', 'A cancellation callback threw: a value that cannot be printed'],
        ['RUNNEL_CANCEL_CALLBACK_FAILED', 'A cancellation callback threw: its cleanup bug'],
      ]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('keeps its reason, and refuses to start once fired', async () => {
    const token = new CancelToken();
    const reason = new Error('client left');
    token.abort(reason);
    token.abort(new Error('second'));
    expect(token.reason).toBe(reason);
    expect(() => token.throwIfAborted()).toThrow('client left');
    await expect(lambda(() => 1).invoke(undefined, { signal: token })).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED', cause: reason });
  });

  it('makes a standard AbortSignal only when user code asks, and it fires with the token', async () => {
    const token = new CancelToken();
    const seen: AbortSignal[] = [];
    const sawAbort = deferred<unknown>();
    const step = lambda(
      (_: unknown, config) =>
        new Promise((_, reject) => {
          const signal = config.signal as AbortSignal;
          seen.push(signal);
          signal.addEventListener('abort', () => {
            sawAbort.resolve(signal.reason);
            reject(new Error('stopped'));
          });
        }),
    );
    const run = step.invoke(undefined, { signal: token });
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen[0]).toBeInstanceOf(AbortSignal);
    expect(toAbortSignal(token)).toBe(seen[0]);
    token.abort('user left');
    await expect(run).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    expect(await settleWithin(sawAbort.promise, 1000)).toBe('user left');
    // A signal asked for after the abort is born aborted, with the same reason.
    const late = new CancelToken();
    late.abort('gone');
    expect(late.signal.aborted).toBe(true);
    expect(late.signal.reason).toBe('gone');
  });

  it('combines with a timeout and with another signal', async () => {
    const token = new CancelToken();
    await expect(settleWithin(lambda(never).invoke(undefined, { signal: token, timeout: 20 }), 2000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_TIMEOUT' });
    const outer = new AbortController();
    const inner = lambda(never).withConfig({ signal: token });
    const run = inner.invoke(undefined, { signal: outer.signal });
    token.abort();
    await expect(settleWithin(run, 1000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
  });

  it('stays in a copy of the config (a user function spreading it for an SDK call)', async () => {
    const controller = new AbortController();
    const copied = await lambda((_: unknown, config) => ({ ...config }).signal).invoke(undefined, { signal: controller.signal });
    expect(copied).toBe(controller.signal);
    const token = new CancelToken();
    const fromToken = await lambda((_: unknown, config) => ({ ...config }).signal).invoke(undefined, { signal: token });
    expect(fromToken).toBe(toAbortSignal(token));
    token.abort('gone');
    expect((fromToken as AbortSignal).reason).toBe('gone');
  });

  it('is handed on with the config without making a standard signal or a second race', async () => {
    const token = new CancelToken();
    const inner = lambda((x: number) => x + 1);
    const outer = lambda((x: number, config) => inner.invoke(x, config));
    expect(await outer.invoke(1, { signal: token })).toBe(2);
    // No AbortController was made for the token: nothing asked for a standard signal.
    expect((token as unknown as { controller?: unknown }).controller).toBeUndefined();
    // And the inner run still stops with it.
    const stuck = lambda((_: unknown, config) => lambda(never).invoke(undefined, config));
    const run = stuck.invoke(undefined, { signal: token });
    token.abort();
    await expect(settleWithin(run, 1000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
  });

  it('forgets a waiter that was cancelled', () => {
    const token = new CancelToken();
    let calls = 0;
    const cancel = token.onAbort(() => calls++);
    token.onAbort(() => calls++);
    cancel();
    token.abort();
    expect(calls).toBe(1);
    expect(token.onAbort(() => calls++)).toBeTypeOf('function');
    expect(calls).toBe(1);
  });
});

describe('abortable', () => {
  /** A source that yields 1 and 2, then waits forever; records whether it was closed. */
  function source(log: string[]): AsyncGenerator<number> {
    return (async function* () {
      try {
        yield 1;
        yield 2;
        await never();
      } finally {
        log.push('closed');
      }
    })();
  }

  it('rejects a pending next() the moment the signal fires, and asks the source to close', async () => {
    const log: string[] = [];
    const controller = new RunController();
    const iterator = abortable(source(log), controller.signal);
    expect((await iterator.next()).value).toBe(1);
    expect((await iterator.next()).value).toBe(2);
    const pending = iterator.next();
    controller.abort();
    await expect(settleWithin(pending, 1000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    // The source is stuck in an await it cannot leave: its return() is requested, not awaited, and the reader,
    // told of the abort, has its end at once (as from a generator that threw).
    expect(await settleWithin(iterator.next(), 1000)).toEqual({ done: true, value: undefined });
  });

  it('rejects when the signal fired while the reader held a chunk, with a plain AbortController too', async () => {
    const log: string[] = [];
    const controller = new AbortController();
    const iterator = abortable(source(log), controller.signal);
    expect((await iterator.next()).value).toBe(1);
    controller.abort();
    await expect(iterator.next()).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    // The source was between yields: closing it ran its finally. The reader was told once; then its end.
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(log).toEqual(['closed']);
    expect(await iterator.next()).toEqual({ done: true, value: undefined });
  });

  it('passes a source error through, and waits for the source on an early return', async () => {
    const failing = (async function* () {
      yield 1;
      throw new Error('source failed');
    })();
    const iterator = abortable(failing, new RunController().signal);
    expect((await iterator.next()).value).toBe(1);
    await expect(iterator.next()).rejects.toThrow('source failed');
    expect(await iterator.next()).toEqual({ done: true, value: undefined });

    const log: string[] = [];
    const reader = abortable(source(log), new RunController().signal);
    for await (const value of reader) if (value === 1) break;
    expect(log).toEqual(['closed']);
  });
});

/**
 * A stream nobody observes whose signal enters at its root (a request's `/stream`) is the abort race alone, a
 * hand-written iterator: it must still answer as the async generator it replaced (a review found each of these
 * broken by that change).
 */
describe('an unobserved stream where its signal enters', () => {
  const slowly = lambda(async (x: number) => {
    await new Promise((resolve) => setTimeout(resolve, 10));
    return x;
  });

  it('refuses a second next() while one is pending, and still answers the first (it hung)', async () => {
    const stream = slowly.stream(1, { signal: new AbortController().signal });
    const [first, second] = await settleWithin(Promise.allSettled([stream.next(), stream.next()]), 2000);
    expect(first).toEqual({ status: 'fulfilled', value: { done: false, value: 1 } });
    expect(second).toMatchObject({ status: 'rejected', reason: { code: 'RUNNEL_ERR_INVALID_ARGUMENT' } });
  });

  it('has throw() and closes with `await using`, as a generator does', async () => {
    const closed: string[] = [];
    const chain = generator(async function* (inputs: AsyncIterable<number>) {
      try {
        for await (const x of inputs) yield x;
      } finally {
        closed.push('source');
      }
    });
    const stream = chain.stream(1, { signal: new AbortController().signal });
    expect(typeof stream.throw).toBe('function');
    await (async () => {
      await using reading = chain.stream(1, { signal: new AbortController().signal });
      expect((await reading.next()).value).toBe(1);
    })();
    expect(closed).toEqual(['source']);
    await stream.next();
    await expect(stream.throw(new Error('stop'))).rejects.toThrow('stop');
    expect(closed).toEqual(['source', 'source']);
    expect(await stream.next()).toEqual({ done: true, value: undefined });
  });

  it('answers done once it has ended: after its abort error, and after its end once its timeout has passed', async () => {
    const controller = new AbortController();
    const aborted = lambda(never).stream(undefined, { signal: controller.signal });
    const pending = aborted.next();
    controller.abort();
    await expect(settleWithin(pending, 1000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    expect(await aborted.next()).toEqual({ done: true, value: undefined });

    const ended = lambda((x: number) => x).stream(1, { timeout: 20 });
    expect(await ended.next()).toEqual({ done: false, value: 1 });
    expect((await ended.next()).done).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(await ended.next()).toEqual({ done: true, value: undefined });
  });

  it('makes its source on the first next(), not when stream() is called, and not at all when already aborted', async () => {
    let made = 0;
    class Eager extends Runnable<number, number> {
      readonly name = 'Eager';
      protected override async _call(x: number): Promise<number> {
        return x;
      }
      protected override _stream(): AsyncGenerator<number> {
        made++;
        throw new Error('made too soon');
      }
    }
    const stream = new Eager().stream(1, { signal: new AbortController().signal });
    expect(made).toBe(0);
    await expect(stream.next()).rejects.toThrow('made too soon');
    expect(made).toBe(1);
    expect(await stream.next()).toEqual({ done: true, value: undefined });

    const controller = new AbortController();
    controller.abort();
    const refused = new Eager().stream(1, { signal: controller.signal });
    await expect(refused.next()).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    expect(made).toBe(1);
  });
});
