/**
 * Running user code inside a run's scope, so that runnables it calls without
 * handing on the config still inherit it (tags, metadata, configurable,
 * signal) and appear as children of the run.
 */
import { configOf, scopeStorage, scopeWith, type Scope } from './config.js';
import { RunnelError } from './errors.js';
import { isRunnable, type Runnable } from './runnable.js';

/**
 * Iterates an async iterator made by `make`, resuming it inside `scope` on
 * every step (an async generator resumes in the context of whoever calls
 * `next()`, so entering the scope once is not enough).
 */
export async function* iterateInScope<T>(scope: Scope, make: () => AsyncIterable<T>): AsyncGenerator<T> {
  const iterator = scopeStorage.run(scope, () => make()[Symbol.asyncIterator]());
  let done = false;
  try {
    for (;;) {
      const result = await scopeStorage.run(scope, () => iterator.next());
      if (result.done === true) {
        done = true;
        return;
      }
      yield result.value;
    }
  } finally {
    if (!done) await scopeStorage.run(scope, async () => iterator.return?.());
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
