/**
 * `runnable.map()`: runs a runnable on every element of an array input, at
 * most `maxConcurrency` at a time, and outputs the array of results.
 */
import { z, type ZodType } from 'zod';
import { failingWith, mapConcurrently } from './async.js';
import { scopeWith } from './config.js';
import { RunnelError } from './errors.js';
import type { Run } from './run.js';
import { Runnable } from './runnable.js';
import { wiring } from './wiring.js';

type AnyRunnable = Runnable<never, unknown>;

/** A runnable applied to each element; see `Runnable.map`. */
export class RunnableEach<I, O> extends Runnable<I[], O[]> {
  readonly name: string;
  readonly bound: Runnable<I, O>;

  constructor(bound: Runnable<I, O>) {
    super();
    this.bound = bound;
    this.name = `RunnableEach<${bound.name}>`;
  }

  override get inputSchema(): ZodType {
    return z.array(this.bound.inputSchema);
  }

  override get outputSchema(): ZodType {
    return z.array(this.bound.outputSchema);
  }

  protected override async _call(inputs: I[], run: Run): Promise<O[]> {
    if (!Array.isArray(inputs)) {
      throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `${this.name} expects an array input, got ${typeof inputs}`);
    }
    const scope = run.scope;
    // The first item that fails cancels the others (their model calls closed): one cancellation for them all.
    let link: ReturnType<typeof failingWith> | undefined;
    let linked: typeof scope | undefined;
    try {
      return (await mapConcurrently(inputs, scope.maxConcurrency, scope.signal, false, (input, _index, failed) => {
        if (failed !== undefined && linked === undefined) {
          link = failingWith(scope.signal, failed);
          linked = scopeWith(scope, { signal: link.token });
        }
        return this.bound._invokeIn(input, linked ?? scope);
      })) as O[];
    } finally {
      link?.dispose();
    }
  }

  override _children(): AnyRunnable[] {
    return [this.bound as AnyRunnable];
  }
}

wiring.each = (bound) => new RunnableEach(bound) as unknown as AnyRunnable;
