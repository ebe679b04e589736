/**
 * `withFallbacks()`: when a runnable fails, the fallbacks are tried in order
 * with the same input. When all fail, the first error is raised (it says
 * what went wrong with the preferred path). Cancellation ends the run instead
 * of falling back. A stream switches only while it has yielded nothing.
 */
import type { ZodType } from 'zod';
import { once } from './async.js';
import { isAbortError, RunnelError } from './errors.js';
import { scopeWith } from './config.js';
import { Saves } from './saves.js';
import type { Graph, GraphSpan } from './graph.js';
import type { Run } from './run.js';
import { Runnable } from './runnable.js';
import { wiring } from './wiring.js';

type AnyRunnable = Runnable<never, unknown>;

/** Options of `withFallbacks`. */
export interface FallbackOptions {
  /** Tried in order after the runnable itself fails. */
  fallbacks: Runnable<never, unknown>[];
  /** Put the previous error under this key of the next attempt's (object) input. */
  exceptionKey?: string;
  /** Fall back only for errors this returns true for (default: all but cancellation). */
  handle?: (error: unknown) => boolean;
}

/** A runnable with fallbacks; see `Runnable.withFallbacks`. */
export class RunnableWithFallbacks<I, O> extends Runnable<I, O> {
  readonly name = 'RunnableWithFallbacks';
  readonly runnables: readonly Runnable<I, O>[];
  private readonly exceptionKey: string | undefined;
  private readonly handle: (error: unknown) => boolean;

  constructor(bound: Runnable<I, O>, options: FallbackOptions) {
    super();
    this.runnables = [bound, ...(options.fallbacks as unknown as Runnable<I, O>[])];
    this.exceptionKey = options.exceptionKey;
    this.handle = options.handle ?? (() => true);
  }

  override get inputSchema(): ZodType {
    return (this.runnables[0] as Runnable<I, O>).inputSchema;
  }

  override get outputSchema(): ZodType {
    return (this.runnables[0] as Runnable<I, O>).outputSchema;
  }

  override _outputSchemaFor(input: ZodType): ZodType {
    return (this.runnables[0] as Runnable<I, O>)._outputSchemaFor(input);
  }

  private nextInput(input: I, error: unknown): I {
    if (this.exceptionKey === undefined) return input;
    if (input === null || typeof input !== 'object' || Array.isArray(input)) {
      throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'withFallbacks({exceptionKey}) needs an object input', { cause: error });
    }
    return { ...input, [this.exceptionKey]: error } as I;
  }

  private mayFallBack(error: unknown): boolean {
    return !isAbortError(error) && this.handle(error);
  }

  protected override async _call(input: I, run: Run): Promise<O> {
    let first: { error: unknown } | undefined;
    let current = input;
    for (const runnable of this.runnables) {
      // A runnable that failed keeps no chat turn it saved (the fallback answers instead): a succeeded one's go up.
      const saves = new Saves();
      try {
        const output = await runnable._invokeIn(current, scopeWith(run.scope, { onSave: saves.onSave }));
        saves.passTo(run.scope.onSave);
        return output;
      } catch (error) {
        await saves.takeBack();
        if (!this.mayFallBack(error)) throw error;
        first ??= { error };
        current = this.nextInput(input, error);
      }
    }
    throw (first as { error: unknown }).error;
  }

  protected override async *_stream(input: I, run: Run): AsyncGenerator<O> {
    let first: { error: unknown } | undefined;
    let current = input;
    for (const runnable of this.runnables) {
      let yielded = false;
      const saves = new Saves();
      try {
        for await (const chunk of runnable._streamIn(once(current), scopeWith(run.scope, { onSave: saves.onSave }), { value: current })) {
          yielded = true;
          yield chunk;
        }
        saves.passTo(run.scope.onSave);
        return;
      } catch (error) {
        await saves.takeBack();
        if (yielded || !this.mayFallBack(error)) throw error;
        first ??= { error };
        current = this.nextInput(input, error);
      } finally {
        // Stopped by its reader (no error, no end): whoever answers for the run decides.
        saves.passTo(run.scope.onSave);
      }
    }
    throw (first as { error: unknown }).error;
  }

  override _children(): AnyRunnable[] {
    return this.runnables as unknown as AnyRunnable[];
  }

  override _graph(graph: Graph): GraphSpan {
    return (this.runnables[0] as Runnable<I, O>)._graph(graph);
  }
}

wiring.fallbacks = (bound, options) => new RunnableWithFallbacks(bound, options) as AnyRunnable;
