/**
 * Small async helpers the combinators share: abortable waits and iteration,
 * fan-out (tee) and fan-in (merge) of async iterables. Each cleans up in
 * `finally`, so an abandoned stream never leaves a producer running.
 */
import { abortError, RunnelError } from './errors.js';

const noop = (): void => {};

/**
 * Waiters on each signal. Node's EventTarget makes adding and removing a
 * listener cost microseconds, and every run of a chain waits on its signal;
 * so each signal gets one real listener, which calls the waiters of a Set.
 */
const waiters = new WeakMap<AbortSignal, Set<() => void>>();

/** The text of what a callback threw, whatever it is (an object without `toString`, a throwing `message`). */
function thrownText(error: unknown): string {
  try {
    return error instanceof Error ? error.message : String(error);
  } catch {
    return 'a value that cannot be printed';
  }
}

/**
 * Calls each waiter of a cancellation. One that throws does not stop the others, nor the signal (an SDK's
 * request is closed by it), nor reach whoever aborted: it is reported as a process warning
 * (`RUNNEL_CANCEL_CALLBACK_FAILED`).
 */
function runWaiters(called: Iterable<() => void>): void {
  for (const waiter of called) {
    try {
      waiter();
    } catch (error) {
      try {
        process.emitWarning(`A cancellation callback threw: ${thrownText(error)}`, { type: 'RunnelWarning', code: 'RUNNEL_CANCEL_CALLBACK_FAILED' });
      } catch {
        // Reporting must not stop the cancellation either.
      }
    }
  }
}

/**
 * An AbortController whose signal Runnel waits on without EventTarget
 * listeners (on Node 20 the first listener on a signal costs ~3 µs, paid per
 * request). Its `abort()` wakes Runnel's waiters, then dispatches the
 * standard `abort` event as any controller does.
 *
 * @example
 * const controller = new RunController();
 * chain.invoke(input, { signal: controller.signal });
 * controller.abort();
 */
export class RunController extends AbortController {
  constructor() {
    super();
    waiters.set(this.signal, new Set());
  }

  override abort(reason?: unknown): void {
    if (this.signal.aborted) return;
    super.abort(reason);
    const set = waiters.get(this.signal);
    if (set === undefined) return;
    const called = [...set];
    set.clear();
    runWaiters(called);
  }
}

/**
 * A light cancellation token: what the server hands each run (the client
 * went away, the server shuts down). It does what the core needs of a
 * signal — `aborted`, `reason`, waiters woken on abort — with two fields and
 * a lazily made Set, where an AbortController costs an EventTarget per
 * request. It becomes a real `AbortSignal` (`.signal`) only where user code
 * or an SDK asks for one, and that signal fires with the token.
 *
 * @example
 * const token = new CancelToken();
 * chain.invoke(input, { signal: token });
 * token.abort(new Error('client left'));
 */
/** Marks a CancelToken whichever copy of this module made it (an `instanceof` would not see another copy's). */
const TOKEN = Symbol.for('runnel.cancel-token');

export class CancelToken {
  readonly [TOKEN] = true;
  aborted = false;
  reason: unknown = undefined;
  private waiters: Set<() => void> | undefined = undefined;
  private controller: AbortController | undefined = undefined;

  /**
   * Fires the token once: its waiters run, then its `AbortSignal`, if one was made, aborts. A waiter that
   * throws is reported as a process warning (`RUNNEL_CANCEL_CALLBACK_FAILED`); the rest still run.
   */
  abort(reason?: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason === undefined ? new DOMException('This operation was aborted', 'AbortError') : reason;
    const waiters = this.waiters;
    this.waiters = undefined;
    try {
      if (waiters !== undefined) runWaiters(waiters);
    } finally {
      this.controller?.abort(this.reason);
    }
  }

  /** Calls `callback` once when the token fires (never, if it already has); returns the function that cancels that. */
  onAbort(callback: () => void): () => void {
    if (this.aborted) return noop;
    const waiters = (this.waiters ??= new Set());
    waiters.add(callback);
    return () => {
      waiters.delete(callback);
    };
  }

  /** A standard `AbortSignal` that fires with this token, made on first use. */
  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  throwIfAborted(): void {
    if (this.aborted) throw this.reason;
  }

  /** True when `signal` is this token's own standard signal. */
  owns(signal: AbortSignal | CancelToken): boolean {
    return signal === this || (this.controller !== undefined && signal === this.controller.signal);
  }
}

/** True for a {@link CancelToken}. */
export function isCancelToken(value: unknown): value is CancelToken {
  return typeof value === 'object' && value !== null && (value as { [TOKEN]?: unknown })[TOKEN] === true;
}

/** What cancels a run: a standard `AbortSignal`, or the core's light {@link CancelToken}. */
export type Cancellation = AbortSignal | CancelToken;

/** The standard `AbortSignal` of a cancellation (made on first use for a token), for user code and SDKs. */
export function toAbortSignal(cancellation: Cancellation): AbortSignal;
export function toAbortSignal(cancellation: Cancellation | undefined): AbortSignal | undefined;
export function toAbortSignal(cancellation: Cancellation | undefined): AbortSignal | undefined {
  return isCancelToken(cancellation) ? cancellation.signal : cancellation;
}

/** Calls `callback` once when `signal` fires; returns the function that cancels that. */
export function onAbort(signal: Cancellation, callback: () => void): () => void {
  if (isCancelToken(signal)) return signal.onAbort(callback);
  let set = waiters.get(signal);
  if (set === undefined) {
    const created = new Set<() => void>();
    set = created;
    waiters.set(signal, created);
    signal.addEventListener(
      'abort',
      () => {
        const called = [...created];
        created.clear();
        runWaiters(called);
      },
      { once: true },
    );
  }
  const own = set;
  own.add(callback);
  return () => {
    own.delete(callback);
  };
}

/**
 * Settles like `promise`, or rejects with the abort error as soon as `signal`
 * fires, whichever comes first. The losing promise is still observed, so its
 * later rejection is never unhandled.
 */
export function raceAbort<T>(promise: Promise<T>, signal: Cancellation | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) {
    promise.catch(noop);
    return Promise.reject(abortError(signal));
  }
  return new Promise<T>((resolve, reject) => {
    const cancel = onAbort(signal, () => reject(abortError(signal)));
    promise.then(
      (value) => {
        cancel();
        resolve(value);
      },
      (error: unknown) => {
        cancel();
        reject(error);
      },
    );
  });
}

/** Waits `ms` milliseconds, or rejects with the abort error when `signal` fires first. */
export function sleep(ms: number, signal?: Cancellation): Promise<void> {
  if (signal?.aborted) return Promise.reject(abortError(signal));
  return new Promise<void>((resolve, reject) => {
    const cancel =
      signal === undefined
        ? noop
        : onAbort(signal, () => {
            clearTimeout(timer);
            reject(abortError(signal));
          });
    const timer = setTimeout(() => {
      cancel();
      resolve();
    }, ms);
  });
}

/**
 * Iterates `source`, but throws the abort error the moment `signal` fires, even
 * while the source is stuck in an await. The source's `return()` is then
 * requested without waiting for it (a generator runs its `finally` when its
 * pending await settles; it has the same signal to settle it sooner).
 *
 * A hand-written iterator with one abort waiter for the whole iteration: it
 * sits on every streamed chunk's path, where an async generator and a waiter
 * per chunk cost several allocations each.
 */
export function abortable<T>(source: AsyncIterable<T>, signal: Cancellation | undefined): AsyncIterableIterator<T> {
  if (signal === undefined) return source[Symbol.asyncIterator]() as AsyncIterableIterator<T>;
  return new AbortableIterator(() => source[Symbol.asyncIterator](), signal);
}

/**
 * {@link abortable} of a stream made by `open` on the first `next()`, as a generator
 * that wraps it would make it: a stream that is never read opens nothing and
 * waits for no abort, and `open`'s throw rejects that `next()`. The result
 * answers as an async generator does: `throw()`, `await using`, `{done: true}`
 * once it has ended or failed; a second `next()` while one is pending is
 * refused ("one reader at a time"), as the core's other iterators refuse it.
 * @internal
 */
export function abortableStream<T>(open: () => AsyncIterator<T>, signal: Cancellation): AsyncGenerator<T> {
  return new AbortableIterator(open, signal) as unknown as AsyncGenerator<T>;
}

const DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

class AbortableIterator<T> implements AsyncIterableIterator<T> {
  /** The source has ended, failed or been closed: nothing more is pulled from it. */
  private finished = false;
  /**
   * The reader has had the last answer (the source's end, a failure, the abort's error) or stopped: every
   * `next()` from then on is `{done: true}`, as a generator's. An abort that came while the reader held a
   * chunk is still owed to it: its next `next()` rejects with it, once.
   */
  private answered = false;
  private source: AsyncIterator<T> | undefined;
  /** Settle the pending `next()`, if one is pending (handlers made once, not per chunk). */
  private resolvePending: ((result: IteratorResult<T>) => void) | undefined;
  private rejectPending: ((error: unknown) => void) | undefined;
  private cancel: (() => void) | undefined;
  private readonly settle = (result: IteratorResult<T>): void => {
    const resolve = this.resolvePending;
    this.resolvePending = this.rejectPending = undefined;
    if (result.done === true) {
      this.answered = true;
      this.finish();
    }
    resolve?.(result);
  };
  private readonly fail = (error: unknown): void => {
    const reject = this.rejectPending;
    this.resolvePending = this.rejectPending = undefined;
    // The source failed: it has ended, and there is nothing to close.
    this.answered = true;
    this.finish();
    reject?.(error);
  };

  constructor(
    private readonly open: () => AsyncIterator<T>,
    private readonly signal: Cancellation,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<T>> {
    if (this.answered) return Promise.resolve(DONE);
    if (this.signal.aborted) {
      this.answered = true;
      void this.close(false);
      return Promise.reject(abortError(this.signal));
    }
    if (this.resolvePending !== undefined) return Promise.reject(new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'A stream is read by one reader at a time'));
    let source = this.source;
    if (source === undefined) {
      try {
        source = this.source = this.open();
      } catch (error) {
        this.answered = this.finished = true;
        return Promise.reject(error);
      }
      this.cancel = onAbort(this.signal, () => {
        const reject = this.rejectPending;
        this.resolvePending = this.rejectPending = undefined;
        if (reject !== undefined) {
          this.answered = true;
          reject(abortError(this.signal));
        }
        void this.close(false);
      });
    }
    return new Promise<IteratorResult<T>>((resolve, reject) => {
      this.resolvePending = resolve;
      this.rejectPending = reject;
      source.next().then(this.settle, this.fail);
    });
  }

  /** The reader stopped early: close the source (waiting for it, unless aborted). */
  async return(value?: unknown): Promise<IteratorResult<T>> {
    this.answered = true;
    await this.close(!this.signal.aborted);
    return { done: true, value } as IteratorResult<T>;
  }

  /** As a generator's `throw()` where it waits: the source is closed, then the error is the answer. */
  async throw(error: unknown): Promise<IteratorResult<T>> {
    this.answered = true;
    await this.close(!this.signal.aborted);
    throw error;
  }

  private finish(): void {
    this.finished = true;
    this.cancel?.();
    this.cancel = undefined;
  }

  private async close(wait: boolean): Promise<void> {
    if (this.finished) return;
    this.finish();
    const closing = this.source?.return?.();
    if (closing === undefined) return;
    if (wait) await closing;
    else closing.catch(noop);
  }
}

// `await using stream = chain.stream(…)` closes it, as it closes a generator (where the runtime has the symbol).
const asyncDispose = (Symbol as { asyncDispose?: symbol }).asyncDispose;
if (asyncDispose !== undefined) {
  Object.defineProperty(AbortableIterator.prototype, asyncDispose, {
    value(this: AbortableIterator<unknown>): Promise<void> {
      return this.return().then(noop);
    },
  });
}

/** What a {@link mapChunks} function returns for an item to drop. */
export const SKIP: unique symbol = Symbol('runnel.skip');

/**
 * The items of `source` through `fn`, without the ones it maps to
 * {@link SKIP}. What `for await … yield fn(item)` does, as a hand-written
 * iterator: a parser's step sits on every token's path, and handing on the
 * source's promise with one `then` costs about half an async generator's
 * hops. A throw in `fn` closes the source, as leaving a `for await` does.
 * One reader at a time, as `for await` reads (a generator would also queue
 * concurrent `next()` calls; this does not).
 *
 * @example
 * mapChunks(chunks, (chunk) => (chunk.text === '' ? SKIP : chunk.text));
 */
export function mapChunks<T, R>(source: AsyncIterable<T>, fn: (item: T) => R | typeof SKIP): AsyncGenerator<R> {
  return new MapIterator(source, fn) as unknown as AsyncGenerator<R>;
}

class MapIterator<T, R> implements AsyncIterableIterator<R> {
  private iterator: AsyncIterator<T> | undefined;
  /** Set by `return()`: the reader left, and the source is not opened or read again. */
  private closed = false;
  private readonly step = (result: IteratorResult<T>): IteratorResult<R> | Promise<IteratorResult<R>> => {
    if (result.done === true) return DONE;
    let value: R | typeof SKIP;
    try {
      value = this.fn(result.value);
    } catch (error) {
      return this.closeWith(error);
    }
    return value === SKIP ? this.next() : { value, done: false };
  };

  constructor(
    private readonly source: AsyncIterable<T>,
    private readonly fn: (item: T) => R | typeof SKIP,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  private get open(): AsyncIterator<T> {
    return (this.iterator ??= this.source[Symbol.asyncIterator]());
  }

  next(): Promise<IteratorResult<R>> {
    if (this.closed) return Promise.resolve(DONE);
    try {
      return this.open.next().then(this.step);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  async return(value?: unknown): Promise<IteratorResult<R>> {
    this.closed = true;
    await this.iterator?.return?.(value);
    return DONE;
  }

  throw(error: unknown): Promise<IteratorResult<R>> {
    const iterator = this.open;
    return iterator.throw === undefined ? this.closeWith(error) : iterator.throw(error).then(this.step);
  }

  private async closeWith(error: unknown): Promise<never> {
    await this.iterator?.return?.();
    throw error;
  }
}

/** An async iterable of one value. */
export async function* once<T>(value: T): AsyncGenerator<T> {
  yield value;
}

/**
 * Splits one async iterable into `count` that each see every item. The source
 * is pulled only as fast as the fastest reader; slower readers buffer. When
 * every reader has stopped early, the source is returned.
 */
export function tee<T>(source: AsyncIterable<T>, count: number): AsyncIterable<T>[] {
  const iterator = source[Symbol.asyncIterator]();
  const buffers: T[][] = Array.from({ length: count }, () => []);
  let done = false;
  let failure: { error: unknown } | undefined;
  let pulling: Promise<void> | undefined;
  let open = count;

  const pull = (): Promise<void> =>
    (pulling ??= iterator.next().then(
      (result) => {
        pulling = undefined;
        if (result.done === true) done = true;
        else for (const buffer of buffers) buffer.push(result.value);
      },
      (error: unknown) => {
        pulling = undefined;
        done = true;
        failure = { error };
      },
    ));

  const reader = async function* (buffer: T[]): AsyncGenerator<T> {
    try {
      for (;;) {
        if (buffer.length > 0) {
          yield buffer.shift() as T;
          continue;
        }
        if (failure !== undefined) throw failure.error;
        if (done) return;
        await pull();
      }
    } finally {
      buffer.length = 0;
      open -= 1;
      if (open === 0 && !done) iterator.return?.()?.catch(noop);
    }
  };
  return buffers.map((buffer) => reader(buffer));
}

/**
 * Interleaves several async iterables, yielding `[key, value]` in the order
 * values arrive. Each source is pulled again only after its last value was
 * consumed. The first error ends the merge and returns the other sources.
 */
export async function* merge<K, T>(sources: ReadonlyArray<readonly [K, AsyncIterable<T>]>, options: { onFailure?: () => void } = {}): AsyncGenerator<[K, T]> {
  const iterators = sources.map(([key, source]) => [key, source[Symbol.asyncIterator]()] as const);
  const pending = new Map<number, Promise<{ index: number; result: IteratorResult<T> }>>();
  const pull = (index: number): void => {
    const next = (iterators[index] as (typeof iterators)[number])[1].next().then((result) => ({ index, result }));
    next.catch(noop);
    pending.set(index, next);
  };
  iterators.forEach((_, index) => pull(index));
  let completed = false;
  let failed = false;
  try {
    while (pending.size > 0) {
      let settled: { index: number; result: IteratorResult<T> };
      try {
        settled = await Promise.race(pending.values());
      } catch (error) {
        failed = true;
        throw error;
      }
      const { index, result } = settled;
      pending.delete(index);
      if (result.done === true) continue;
      yield [(iterators[index] as (typeof iterators)[number])[0], result.value];
      pull(index);
    }
    completed = true;
  } finally {
    if (!completed && failed && options.onFailure !== undefined) {
      // A source failed: the others are cancelled (`onFailure`), and the failure goes on once they have ended,
      // so whatever they report of their end comes before it.
      options.onFailure();
      await Promise.allSettled(pending.values());
      await Promise.allSettled(iterators.map(([, iterator]) => iterator.return?.()));
    } else if (!completed) {
      for (const [, iterator] of iterators) iterator.return?.()?.catch(noop);
    }
  }
}

/**
 * Maps `items` through `fn` with at most `limit` calls in flight, results in
 * input order. The first failure fails the whole: no new item starts, the
 * calls under way are cancelled (`fn`'s third argument fires: their model
 * requests close, and a cancelled run writes no chat history), and once
 * their calls have settled it rejects with that failure. (A core run races
 * its signal, so a step that ignores cancellation is not waited for.) With
 * `returnExceptions`, failures are returned in place instead.
 * An abort rejects at once, whatever `returnExceptions` says.
 */
export async function mapConcurrently<T, R>(
  items: readonly T[],
  limit: number | undefined,
  signal: Cancellation | undefined,
  returnExceptions: boolean,
  fn: (item: T, index: number, failed: CancelToken | undefined) => Promise<R>,
): Promise<(R | Error)[]> {
  const results = new Array<R | Error>(items.length);
  const workers = limit !== undefined && limit > 0 ? Math.min(limit, items.length) : items.length;
  // Fires with the first failure: the other calls under way end (a lone item has none).
  const failed = !returnExceptions && items.length > 1 ? new CancelToken() : undefined;
  let next = 0;
  let failure: { error: unknown } | undefined;
  const work = async (): Promise<void> => {
    while (next < items.length && failure === undefined) {
      const index = next++;
      try {
        results[index] = await fn(items[index] as T, index, failed);
      } catch (error) {
        if (!returnExceptions || signal?.aborted === true) {
          if (failure === undefined) {
            failure = { error };
            failed?.abort(new RunnelError('RUNNEL_ERR_ABORTED', `Item ${index} failed, so the others were cancelled`));
          }
          return;
        }
        results[index] = error instanceof Error ? error : new Error(String(error));
      }
    }
  };
  await raceAbort(Promise.all(Array.from({ length: workers }, work)), signal);
  if (failure !== undefined) throw failure.error;
  return results;
}

/** A token that fires when `failed` or `signal` does (a batch item's own); `dispose` unhooks it from both. */
export function failingWith(signal: Cancellation | undefined, failed: CancelToken): { token: CancelToken; dispose: () => void } {
  const token = new CancelToken();
  const offFailed = failed.onAbort(() => token.abort(failed.reason));
  const offSignal = signal === undefined ? noop : onAbort(signal, () => token.abort(signal.reason));
  if (signal?.aborted === true) token.abort(signal.reason);
  return {
    token,
    dispose: () => {
      offFailed();
      offSignal();
    },
  };
}

/** How many checks an idle period is split into: a stall is noticed between `ms` and `ms` plus a quarter. */
const IDLE_CHECKS = 4;

/**
 * A stall detector for one stream: `next(iterator)` pulls the next item, or
 * rejects with `onIdle()` when the source gives nothing for `ms`
 * milliseconds (noticed at most a quarter of `ms` later). Time the reader
 * spends holding an item does not count. One interval timer serves the whole
 * stream and checks a counter of pulls and items four times per `ms`: this
 * sits on every chunk's path, where re-arming a timer per chunk cost more
 * than the rest of the guard. Call `dispose()` when done.
 */
export class IdleGuard {
  private readonly timer: NodeJS.Timeout;
  private error: Error | undefined;
  /** Pulls and items so far: the source is alive while this moves. */
  private ticks = 0;
  private seenTicks = 0;
  private quietChecks = 0;
  /** Settle the pending pull (one promise per chunk, no race: this sits on every chunk's path). */
  private resolvePending: ((result: unknown) => void) | undefined;
  private rejectPending: ((error: unknown) => void) | undefined;
  /** The pending pull's handlers (`pull`), run as its item or error arrives. */
  private onItem: ((result: IteratorResult<unknown>) => unknown) | undefined;
  private onError: ((error: unknown) => unknown) | undefined;
  private readonly settle = (result: IteratorResult<unknown>): void => {
    const resolve = this.resolvePending;
    const reject = this.rejectPending;
    const onItem = this.onItem;
    this.resolvePending = this.rejectPending = this.onItem = this.onError = undefined;
    this.ticks++;
    if (resolve === undefined) return;
    if (onItem === undefined) return resolve(result);
    try {
      resolve(onItem(result));
    } catch (error) {
      reject?.(error);
    }
  };
  private readonly fail = (error: unknown): void => {
    const resolve = this.resolvePending;
    const reject = this.rejectPending;
    const onError = this.onError;
    this.resolvePending = this.rejectPending = this.onItem = this.onError = undefined;
    this.ticks++;
    if (reject === undefined) return;
    if (onError === undefined) return reject(error);
    try {
      resolve?.(onError(error));
    } catch (thrown) {
      reject(thrown);
    }
  };
  /** True once the source was given up on. */
  timedOut = false;

  constructor(ms: number, onIdle: () => Error) {
    this.timer = setInterval(() => {
      // Only the source can stall: while the reader holds an item, or after a pull or an item, the clock starts over.
      if (this.rejectPending === undefined || this.ticks !== this.seenTicks) {
        this.seenTicks = this.ticks;
        this.quietChecks = 0;
        return;
      }
      if (++this.quietChecks < IDLE_CHECKS) return;
      clearInterval(this.timer);
      this.timedOut = true;
      this.error = onIdle();
      this.fail(this.error);
    }, ms / IDLE_CHECKS);
  }

  next<T>(iterator: AsyncIterator<T>): Promise<IteratorResult<T>> {
    return this.pull(iterator, undefined, undefined) as Promise<IteratorResult<T>>;
  }

  /**
   * Pulls the next item and settles with what `onItem` makes of it, or what `onError` makes of the
   * source's error or the stall (their throw rejects): one promise an item, where
   * `next(iterator).then(onItem, onError)` makes two and a turn of the microtask queue more.
   */
  pull<T, R>(iterator: AsyncIterator<T>, onItem: ((result: IteratorResult<T>) => R) | undefined, onError: ((error: unknown) => R) | undefined): Promise<R> {
    if (this.error !== undefined) {
      if (onError === undefined) return Promise.reject(this.error);
      try {
        return Promise.resolve(onError(this.error));
      } catch (error) {
        return Promise.reject(error);
      }
    }
    this.ticks++;
    return new Promise<R>((resolve, reject) => {
      this.resolvePending = resolve as (result: unknown) => void;
      this.rejectPending = reject;
      this.onItem = onItem as ((result: IteratorResult<unknown>) => unknown) | undefined;
      this.onError = onError;
      try {
        // Inside the try, `.then` too: a source whose next() gives no promise fails as a source error.
        iterator.next().then(this.settle, this.fail);
      } catch (error) {
        this.fail(error);
      }
    });
  }

  dispose(): void {
    clearInterval(this.timer);
  }
}

/**
 * Iterates `source`, but fails with `onIdle()` when no item arrives for `ms`
 * milliseconds (the source is returned without waiting). Provider SDKs time
 * out only the wait for response headers; this covers a stream that stalls.
 */
export async function* withIdleTimeout<T>(source: AsyncIterable<T>, ms: number, onIdle: () => Error): AsyncGenerator<T> {
  if (!(ms > 0) || !Number.isFinite(ms)) {
    yield* source;
    return;
  }
  const iterator = source[Symbol.asyncIterator]();
  const guard = new IdleGuard(ms, onIdle);
  let finished = false;
  try {
    for (;;) {
      const result = await guard.next(iterator);
      if (result.done === true) {
        finished = true;
        return;
      }
      yield result.value;
    }
  } finally {
    guard.dispose();
    if (!finished) {
      if (guard.timedOut) iterator.return?.()?.catch(noop);
      else await iterator.return?.();
    }
  }
}
