/**
 * `generator(fn)`: an async generator function over the input stream as a
 * runnable. It starts as soon as the first input chunk arrives, so in a
 * sequence it streams while the step before it is still producing.
 */
import { configOf } from './config.js';
import { iterateInScope } from './in-scope.js';
import type { Run } from './run.js';
import { Runnable, type GeneratorFunc } from './runnable.js';

/** An async generator function as a runnable; see {@link generator}. */
export class RunnableGenerator<I, O> extends Runnable<I, O> {
  readonly name: string;
  private readonly func: GeneratorFunc<I, O>;

  constructor(func: GeneratorFunc<I, O>, options: { name?: string } = {}) {
    super();
    this.func = func;
    this.name = options.name ?? (func.name !== '' ? func.name : 'RunnableGenerator');
  }

  protected override _transform(inputs: AsyncIterable<I>, run: Run): AsyncGenerator<O> {
    const scope = run.scope;
    return iterateInScope(scope, () => this.func(inputs, configOf(scope)), { observed: run.observed });
  }
}

/**
 * Wraps an async generator function that transforms a stream of input chunks
 * into a stream of output chunks (LangChain.js: `RunnableGenerator`).
 *
 * @example
 * const upper = generator(async function* (chunks: AsyncIterable<string>) {
 *   for await (const chunk of chunks) yield chunk.toUpperCase();
 * });
 */
export function generator<I, O>(func: GeneratorFunc<I, O>, options?: { name?: string }): Runnable<I, O> {
  return new RunnableGenerator(func, options);
}
