/**
 * Running user code inside a run's scope, so that runnables it calls without
 * handing on the config still inherit it (tags, metadata, configurable,
 * signal) and appear as children of the run.
 */
import { configOf, scopeStorage, scopeWith, type Scope } from './config.js';
import { RunnelError } from './errors.js';
import { isRunnable, type Runnable } from './runnable.js';

/**
 * A function that calls its argument inside `scope`. (A snapshot of the
 * context, `AsyncLocalStorage.snapshot()`, would save Node 24 one context
 * frame a step; but it is an AsyncResource, and once one exists every later
 * `run()` in the process costs about twice as much: measured, 0.9 to 1.8 µs
 * for a 3-step invoke after one stream.)
 */
function scopeRunner(scope: Scope): <R>(fn: () => R) => R {
  return (fn) => scopeStorage.run(scope, fn);
}

const DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/**
 * Iterates an async iterator made by `make` (on the first `next()`), resuming
 * it inside `scope` on every step: an async generator resumes in the context
 * of whoever calls `next()`, so entering the scope once is not enough.
 *
 * A hand-written iterator rather than an async generator: it sits on every
 * chunk's path through a generator step, and handing back the source's own
 * promise saves a generator's hops per chunk.
 */
export function iterateInScope<T>(scope: Scope, make: () => AsyncIterable<T>): AsyncGenerator<T> {
  return new ScopedIterator(scopeRunner(scope), make) as unknown as AsyncGenerator<T>;
}

class ScopedIterator<T> implements AsyncIterableIterator<T> {
  private iterator: AsyncIterator<T> | undefined;
  private readonly pull = (): Promise<IteratorResult<T>> => (this.iterator ??= this.make()[Symbol.asyncIterator]()).next();

  constructor(
    private readonly inScope: <R>(fn: () => R) => R,
    private readonly make: () => AsyncIterable<T>,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<T>> {
    try {
      return this.inScope(this.pull);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** The reader stopped early: the source is returned inside the scope (its `finally` runs there), and waited for. */
  async return(value?: unknown): Promise<IteratorResult<T>> {
    const iterator = this.iterator;
    if (iterator?.return === undefined) return DONE as IteratorResult<T>;
    await this.inScope(() => iterator.return?.(value));
    return DONE as IteratorResult<T>;
  }

  throw(error: unknown): Promise<IteratorResult<T>> {
    const iterator = this.iterator;
    if (iterator?.throw === undefined) return Promise.reject(error);
    try {
      return this.inScope(() => (iterator.throw as (e: unknown) => Promise<IteratorResult<T>>)(error));
    } catch (thrown) {
      return Promise.reject(thrown);
    }
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
