/**
 * `lambda(fn)`: a function as a runnable. The function receives the input and
 * its run's config; runnables it calls inherit that config even when it does
 * not pass it on. A function that returns a runnable has that runnable run
 * with the same input (at most `recursionLimit` levels deep); one that
 * returns an async iterable streams it.
 */
import type { ZodType } from 'zod';
import { z } from 'zod';
import { once } from './async.js';
import { callInScope, isAsyncIterable, iterateInScope, recurse } from './in-scope.js';
import { collect } from './merge.js';
import type { Run } from './run.js';
import { isRunnable, Runnable, type RunnableFunc } from './runnable.js';

/** Options of {@link lambda}. */
export interface LambdaOptions<I, O> {
  /** The run name (default: the function's name, or `RunnableLambda`). */
  name?: string;
  /** The input schema; the input type is `unknown` without one. */
  input?: ZodType<I>;
  /** The output schema; the output type is `unknown` without one. */
  output?: ZodType<O>;
}

/** A function as a runnable; see {@link lambda}. */
export class RunnableLambda<I, O> extends Runnable<I, O> {
  readonly name: string;
  private readonly func: RunnableFunc<I, O>;
  private readonly schemas: { input?: ZodType; output?: ZodType };

  constructor(func: RunnableFunc<I, O>, options: LambdaOptions<I, O> = {}) {
    super();
    this.func = func;
    this.name = options.name ?? (func.name !== '' ? func.name : 'RunnableLambda');
    this.schemas = { input: options.input, output: options.output };
  }

  /** LangChain.js's spelling of {@link lambda}. */
  static from<I, O>(func: RunnableFunc<I, O>, options?: LambdaOptions<I, O>): RunnableLambda<I, O> {
    return new RunnableLambda(func, options);
  }

  override get inputSchema(): ZodType {
    return this.schemas.input ?? z.unknown();
  }

  override get outputSchema(): ZodType {
    return this.schemas.output ?? z.unknown();
  }

  protected override async _call(input: I, run: Run): Promise<O> {
    const scope = run.scope;
    const output: unknown = fromSyncIterator(await callInScope(scope, this.func, input));
    if (isRunnable(output)) return (await output._invokeIn(input as never, recurse(scope, output))) as O;
    if (isAsyncIterable(output)) return (await collect(iterateInScope(scope, () => output, { observed: run.observed }))) as O;
    return output as O;
  }

  protected override async *_stream(input: I, run: Run): AsyncGenerator<O> {
    const scope = run.scope;
    const output: unknown = fromSyncIterator(await callInScope(scope, this.func, input));
    if (isRunnable(output)) {
      yield* output._streamIn(once(input as never), recurse(scope, output), { value: input as never }) as AsyncGenerator<O>;
    } else if (isAsyncIterable(output)) {
      yield* iterateInScope(scope, () => output, { observed: run.observed }) as AsyncGenerator<O>;
    } else {
      yield output as O;
    }
  }
}

/**
 * A sync generator's (or other iterator's) values as an async iterable, as LangChain's lambdas read them
 * (a probe: `lambda(function* () {...})` answered the generator object, `{}`); anything else as it is.
 */
function fromSyncIterator(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || isRunnable(value) || Array.isArray(value)) return value;
  const iterator = value as { next?: unknown; [Symbol.iterator]?: unknown; [Symbol.asyncIterator]?: unknown };
  if (typeof iterator.next !== 'function' || typeof iterator[Symbol.iterator] !== 'function' || typeof iterator[Symbol.asyncIterator] === 'function') return value;
  return (async function* () {
    yield* value as Iterable<unknown>;
  })();
}

/**
 * Wraps a function as a runnable (LangChain.js: `RunnableLambda.from`).
 *
 * @example
 * const addOne = lambda((x: number) => x + 1);
 * await addOne.invoke(1); // 2
 */
export function lambda<I, O>(func: RunnableFunc<I, O>, options?: LambdaOptions<I, O>): Runnable<I, O> {
  return new RunnableLambda(func, options);
}
