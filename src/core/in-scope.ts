/**
 * Running user code inside a run's scope, so that runnables it calls without
 * handing on the config still inherit it (tags, metadata, configurable,
 * signal) and appear as children of the run.
 */
import { configOf, scopeStorage, scopeWith, type Scope } from './config.js';
import { RunnelError } from './errors.js';
import { isRunnable, type Runnable } from './runnable.js';

const DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/**
 * True when AsyncLocalStorage runs on async context frames (Node 24's
 * default). There `run()` makes two frames, copies of the context, each time
 * (entering and leaving), so a generator step resumed inside its scope on
 * every chunk spent a third of a stream's CPU on them; on the older
 * implementation (Node 20 and 22) `run()` only swaps a field, and promises
 * are the dearer part.
 */
const CONTEXT_FRAMES = ((): boolean => {
  const major = Number(process.versions.node.split('.')[0]);
  const flags = `${process.execArgv.join(' ')} ${process.env.NODE_OPTIONS ?? ''}`;
  if (major >= 24) return !flags.includes('--no-async-context-frame');
  return flags.includes('--experimental-async-context-frame');
})();

/**
 * Iterates an async iterator made by `make` (on the first `next()`), always
 * resuming it inside `scope`: an async generator resumes in the context of
 * whoever calls `next()`, so entering the scope once is not enough. One
 * reader at a time, as `for await` reads.
 *
 * Hand-written iterators rather than an async generator, as they sit on
 * every chunk's path through a generator step. Where contexts are frames and
 * nobody observes the run, a loop started once inside the scope pulls the
 * source on demand (its awaits stay in the scope); otherwise each `next()`
 * enters the scope. (The loop pulls a microtask after `next()`: an observed
 * run, which races an abort at every level, must have its whole chain of
 * pulls under way when the abort comes, so each step ends with its error.)
 */
export function iterateInScope<T>(scope: Scope, make: () => AsyncIterable<T>, options: { observed: boolean }): AsyncGenerator<T> {
  const iterator = CONTEXT_FRAMES && !options.observed ? new PumpedIterator(scope, make) : new ScopedIterator(scope, make);
  return iterator as unknown as AsyncGenerator<T>;
}

/** A source made by `make` on the first `next()` and read inside `scope`: what both iterators below share. */
abstract class SourceInScope<T> implements AsyncIterableIterator<T> {
  protected iterator: AsyncIterator<T> | undefined;

  constructor(
    protected readonly scope: Scope,
    protected readonly make: () => AsyncIterable<T>,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  abstract next(): Promise<IteratorResult<T>>;
}

/** Each `next()` enters the scope (cheap where AsyncLocalStorage swaps a field). */
class ScopedIterator<T> extends SourceInScope<T> {
  private readonly pull = (): Promise<IteratorResult<T>> => (this.iterator ??= this.make()[Symbol.asyncIterator]()).next();

  next(): Promise<IteratorResult<T>> {
    try {
      return scopeStorage.run(this.scope, this.pull);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** The reader stopped early: the source is returned inside the scope (its `finally` runs there), and waited for. */
  async return(value?: unknown): Promise<IteratorResult<T>> {
    const iterator = this.iterator;
    if (iterator?.return === undefined) return DONE as IteratorResult<T>;
    await scopeStorage.run(this.scope, () => iterator.return?.(value));
    return DONE as IteratorResult<T>;
  }

  throw(error: unknown): Promise<IteratorResult<T>> {
    const iterator = this.iterator;
    if (iterator?.throw === undefined) return Promise.reject(error);
    try {
      return scopeStorage.run(this.scope, () => (iterator.throw as (e: unknown) => Promise<IteratorResult<T>>)(error));
    } catch (thrown) {
      return Promise.reject(thrown);
    }
  }
}

/**
 * A loop started inside the scope on the first `next()` makes the source and
 * pulls it, one item per `next()`: its awaits continue in the scope, so the
 * source always resumes there, with no context entered per item.
 */
class PumpedIterator<T> extends SourceInScope<T> {
  private started = false;
  /** Set by the source's end or failure, or the reader's `return()`: nothing more is pulled. */
  private ended = false;
  /** Lets the loop pull the next item. */
  private wake: (() => void) | undefined;
  private resolvePending: ((result: IteratorResult<T>) => void) | undefined;
  private rejectPending: ((error: unknown) => void) | undefined;

  next(): Promise<IteratorResult<T>> {
    if (this.ended) return Promise.resolve(DONE as IteratorResult<T>);
    if (this.resolvePending !== undefined) return Promise.reject(new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'A stream is read by one reader at a time'));
    return new Promise<IteratorResult<T>>((resolve, reject) => {
      this.resolvePending = resolve;
      this.rejectPending = reject;
      if (!this.started) {
        this.started = true;
        scopeStorage.run(this.scope, () => void this.pump());
      } else {
        const wake = this.wake;
        this.wake = undefined;
        wake?.();
      }
    });
  }

  private async pump(): Promise<void> {
    try {
      const iterator = (this.iterator = this.make()[Symbol.asyncIterator]());
      for (;;) {
        const result = await iterator.next();
        const resolve = this.resolvePending;
        this.resolvePending = this.rejectPending = undefined;
        if (result.done === true) {
          this.ended = true;
          resolve?.(result);
          return;
        }
        // Ready for the next pull before the reader has this item (it may ask at once).
        const demand = new Promise<void>((wake) => (this.wake = wake));
        resolve?.(result);
        if (this.ended) return;
        await demand;
        if (this.ended) return;
      }
    } catch (error) {
      this.ended = true;
      const reject = this.rejectPending;
      this.resolvePending = this.rejectPending = undefined;
      reject?.(error);
    }
  }

  /** The reader stopped early: the source is returned inside the scope (its `finally` runs there), and waited for. */
  async return(value?: unknown): Promise<IteratorResult<T>> {
    const wasEnded = this.ended;
    this.ended = true;
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
    const iterator = this.iterator;
    if (!wasEnded && iterator?.return !== undefined) await scopeStorage.run(this.scope, () => iterator.return?.(value));
    return DONE as IteratorResult<T>;
  }

  async throw(error: unknown): Promise<IteratorResult<T>> {
    const iterator = this.iterator;
    await this.return();
    if (iterator?.throw === undefined) throw error;
    return scopeStorage.run(this.scope, () => (iterator.throw as (e: unknown) => Promise<IteratorResult<T>>)(error));
  }
}

/** Calls a user function with the input and the run's config, inside the run's scope. */
export function callInScope<I, R>(scope: Scope, fn: (input: I, config: ReturnType<typeof configOf>) => R, input: I): R {
  return scopeStorage.run(scope, fn, input, configOf(scope));
}

/** True for values to iterate: async iterables other than runnables. */
export function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === 'function' &&
    !isRunnable(value)
  );
}

/** The scope for a runnable a lambda returned: one level deeper, refused past `recursionLimit`. */
export function recurse(scope: Scope, returned: Runnable<never, unknown>): Scope {
  if (scope.recursionLimit <= 1) {
    throw new RunnelError(
      'RUNNEL_ERR_RECURSION_LIMIT',
      `Recursion limit reached: ${returned.name} was returned by nested lambdas more than recursionLimit times`,
    );
  }
  return scopeWith(scope, { recursionLimit: scope.recursionLimit - 1 });
}
