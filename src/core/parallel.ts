/**
 * `parallel({a, b})`: every branch gets the same input and runs concurrently;
 * the output is an object of the branch outputs. Streamed, it yields
 * `{key: chunk}` as each branch produces.
 */
import { z, type ZodType } from 'zod';
import { CancelToken, failingWith, merge, once, tee } from './async.js';
import { scopeWith } from './config.js';
import { RunnelError } from './errors.js';
import type { Graph, GraphSpan } from './graph.js';
import type { Run } from './run.js';
import { Runnable, type Known, type RunnableLike } from './runnable.js';
import { wiring } from './wiring.js';

type AnyRunnable = Runnable<never, unknown>;

/** The shape shared by the input schemas of several runnables: their object fields merged, or the first known one. */
export function mergedInputSchema(runnables: readonly AnyRunnable[]): ZodType {
  const shapes: Record<string, ZodType> = {};
  let objects = 0;
  let first: ZodType | undefined;
  for (const runnable of runnables) {
    const schema = runnable.inputSchema;
    if (schema instanceof z.ZodObject) {
      Object.assign(shapes, schema.shape);
      objects += 1;
    } else if (!(schema instanceof z.ZodUnknown) && first === undefined) {
      first = schema;
    }
  }
  if (objects > 0) return z.object(shapes);
  return first ?? z.unknown();
}

/** Branches run concurrently on one input; see {@link parallel}. */
export class RunnableParallel<I, O extends Record<string, unknown>> extends Runnable<I, O> {
  readonly name: string;
  readonly branches: readonly (readonly [string, AnyRunnable])[];
  private readonly branchTags: readonly (readonly string[])[];

  constructor(steps: Record<string, unknown>, options: { name?: string } = {}) {
    super();
    this.branches = Object.entries(steps).map(([key, step]) => [key, wiring.coerce(step)] as const);
    this.branchTags = this.branches.map(([key]) => [`map:key:${key}`]);
    this.name = options.name ?? `RunnableParallel<${this.branches.map(([key]) => key).join(',')}>`;
  }

  /** LangChain.js's spelling of {@link parallel}. */
  static from<I, O extends Record<string, unknown>>(steps: { [K in keyof O]: RunnableLike<I, O[K]> }): RunnableParallel<I, O> {
    return new RunnableParallel(steps);
  }

  /** The keys of the output. */
  get keys(): string[] {
    return this.branches.map(([key]) => key);
  }

  override get inputSchema(): ZodType {
    return mergedInputSchema(this.branches.map(([, runnable]) => runnable));
  }

  override get outputSchema(): ZodType {
    return this._outputSchemaFor(this.inputSchema);
  }

  override _outputSchemaFor(input: ZodType): ZodType {
    return z.object(Object.fromEntries(this.branches.map(([key, runnable]) => [key, runnable._outputSchemaFor(input)])));
  }

  protected override async _call(input: I, run: Run): Promise<O> {
    // A branch that fails cancels the others (a review: `{a: model1, b: model2}` answered 502 while b's model
    // went on spending tokens): one cancellation for them all, fired by the first failure.
    const failed = this.branches.length > 1 ? new CancelToken() : undefined;
    const link = failed === undefined ? undefined : failingWith(run.scope.signal, failed);
    let outputs: unknown[];
    try {
      outputs = await Promise.all(
        this.branches.map(([, runnable], index) => {
          const scope = run.child(this.branchTags[index] as string[]);
          const branch = (runnable as Runnable<I, unknown>)._invokeIn(input, link === undefined ? scope : scopeWith(scope, { signal: link.token }));
          return failed === undefined
            ? branch
            : branch.catch((error: unknown) => {
                failed.abort(new RunnelError('RUNNEL_ERR_ABORTED', 'Another branch failed, so this one was cancelled'));
                throw error;
              });
        }),
      );
    } finally {
      link?.dispose();
    }
    const result: Record<string, unknown> = {};
    this.branches.forEach(([key], index) => {
      result[key] = outputs[index];
    });
    return result as O;
  }

  protected override async *_transform(inputs: AsyncIterable<I>, run: Run, known?: Known<I>): AsyncGenerator<O> {
    const copies = known !== undefined ? this.branches.map(() => once(known.value)) : tee(inputs, this.branches.length);
    // As invoked: a branch that fails cancels the others, and the parallel fails once they have ended (a probe:
    // streamed, they ran on to their end, and their runs ended after the parallel's).
    const failed = this.branches.length > 1 ? new CancelToken() : undefined;
    const link = failed === undefined ? undefined : failingWith(run.scope.signal, failed);
    const streams = this.branches.map(([key, runnable], index) => {
      const scope = run.child(this.branchTags[index] as string[]);
      return [key, (runnable as Runnable<I, unknown>)._streamIn(copies[index] as AsyncIterable<I>, link === undefined ? scope : scopeWith(scope, { signal: link.token }), known)] as const;
    });
    const cancelOthers = (): void => failed?.abort(new RunnelError('RUNNEL_ERR_ABORTED', 'Another branch failed, so this one was cancelled'));
    try {
      for await (const [key, chunk] of merge(streams, { onFailure: cancelOthers })) yield { [key]: chunk } as O;
    } finally {
      link?.dispose();
    }
  }

  override _children(): AnyRunnable[] {
    return this.branches.map(([, runnable]) => runnable);
  }

  override _graph(graph: Graph): GraphSpan {
    const first: string[] = [];
    const last: string[] = [];
    for (const [, runnable] of this.branches) {
      const span = runnable._graph(graph);
      first.push(...span.first);
      last.push(...span.last);
    }
    return { first, last };
  }
}

/**
 * Runs branches concurrently on the same input (LangChain.js:
 * `RunnableParallel.from`, `RunnableMap`).
 *
 * @example
 * const both = parallel({ joke: jokeChain, poem: poemChain });
 * await both.invoke({ topic: 'bears' }); // { joke: '...', poem: '...' }
 */
export function parallel<I = unknown, O extends Record<string, unknown> = Record<string, unknown>>(steps: {
  [K in keyof O]: RunnableLike<I, O[K]>;
}): Runnable<I, O> {
  return new RunnableParallel<I, O>(steps);
}
