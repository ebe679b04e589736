/**
 * `toRunnable(thing)`: what a composition accepts in place of a runnable.
 */
import { RunnelError } from './errors.js';
import { RunnableGenerator } from './generator.js';
import { RunnableLambda } from './lambda.js';
import { RunnableParallel } from './parallel.js';
import { isRunnable, type GeneratorFunc, type Runnable, type RunnableFunc, type RunnableLike } from './runnable.js';
import { wiring } from './wiring.js';

function isAsyncGeneratorFunction(fn: unknown): boolean {
  return typeof fn === 'function' && fn.constructor.name === 'AsyncGeneratorFunction';
}

/**
 * Turns a runnable-like into a runnable: a runnable stays itself, an async
 * generator function becomes a generator, any other function a lambda, and a
 * plain object a parallel of its (coerced) values.
 *
 * @example
 * toRunnable({ upper: (s: string) => s.toUpperCase(), length: (s: string) => s.length });
 */
export function toRunnable<I, O>(thing: GeneratorFunc<I, O>): Runnable<I, O>;
export function toRunnable<I, O>(thing: RunnableLike<I, O>): Runnable<I, O>;
export function toRunnable<I, O>(thing: RunnableLike<I, O>): Runnable<I, O> {
  if (isRunnable(thing)) return thing as unknown as Runnable<I, O>;
  if (isAsyncGeneratorFunction(thing)) return new RunnableGenerator(thing as GeneratorFunc<I, O>);
  if (typeof thing === 'function') return new RunnableLambda(thing as RunnableFunc<I, O>);
  if (thing !== null && typeof thing === 'object' && !Array.isArray(thing)) {
    return new RunnableParallel(thing as Record<string, unknown>) as unknown as Runnable<I, O>;
  }
  throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Cannot make a runnable of ${Array.isArray(thing) ? 'an array' : typeof thing}`);
}

wiring.coerce = (thing) => toRunnable(thing as RunnableLike) as Runnable<never, unknown>;
