/**
 * `sequence(a, b, c)`: each step gets the previous step's output. When
 * streamed, steps that can transform a stream run concurrently: step 3 works
 * on step 2's first chunk while step 1 is still producing.
 */
import type { ZodType } from 'zod';
import { scopeWith, type Scope } from './config.js';
import type { Graph, GraphSpan } from './graph.js';
import type { Run } from './run.js';
import { Runnable, type Known, type RunnableLike } from './runnable.js';
import { RunnelError } from './errors.js';
import { wiring } from './wiring.js';

type AnyRunnable = Runnable<never, unknown>;

/** Runnables run one after another; see {@link sequence}. */
export class RunnableSequence<I, O> extends Runnable<I, O> {
  readonly name: string;
  readonly steps: readonly AnyRunnable[];
  private readonly stepTags: readonly (readonly string[])[];

  constructor(steps: readonly unknown[], options: { name?: string } = {}) {
    super();
    const flat: AnyRunnable[] = [];
    for (const step of steps) {
      const runnable = wiring.coerce(step);
      // Nested unnamed sequences flatten, so step tags count every step once.
      if (runnable instanceof RunnableSequence && runnable.name === 'RunnableSequence') flat.push(...runnable.steps);
      else flat.push(runnable);
    }
    if (flat.length === 0) throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'A sequence needs at least one step');
    this.steps = flat;
    this.stepTags = flat.map((_, index) => [`seq:step:${index + 1}`]);
    this.name = options.name ?? 'RunnableSequence';
    // A chat model followed by a parser that can tell an answer it cannot use (`accepts`: JSON that does not
    // parse, a schema not met) is called with that check (its `accept` call option), so such an answer is not
    // cached: the parser's RUNNEL_ERR_OUTPUT_PARSE says retry, and a retry must reach the model.
    this.acceptFor = flat.map((step, index) => {
      const next = flat[index + 1] as { accepts?: (answer: unknown) => boolean } | undefined;
      return step.runType === 'chat_model' && typeof next?.accepts === 'function' ? (answer: unknown) => (next.accepts as (answer: unknown) => boolean)(answer) : undefined;
    });
  }

  /** Per step, the `accept` check its call gets (see the constructor); undefined for most. */
  private readonly acceptFor: readonly (((answer: unknown) => boolean) | undefined)[];

  /** The scope of step `index`: its tags, and the check of the parser after it when it is a chat model. */
  private stepScope(run: Run, index: number): Scope {
    const scope = run.child(this.stepTags[index] as string[]);
    const accept = this.acceptFor[index];
    return accept === undefined ? scope : scopeWith(scope, { options: { ...scope.options, accept } });
  }

  /** LangChain.js's spelling of {@link sequence}. */
  static from<I, O>(steps: RunnableLike<never, unknown>[], options?: { name?: string }): RunnableSequence<I, O> {
    return new RunnableSequence(steps, options);
  }

  override get inputSchema(): ZodType {
    return (this.steps[0] as AnyRunnable).inputSchema;
  }

  override get outputSchema(): ZodType {
    return this._outputSchemaFor(this.inputSchema);
  }

  override _outputSchemaFor(input: ZodType): ZodType {
    let schema = input;
    for (const step of this.steps) schema = step._outputSchemaFor(schema);
    return schema;
  }

  protected override async _call(input: I, run: Run): Promise<O> {
    let value: unknown = input;
    for (let index = 0; index < this.steps.length; index++) {
      value = await (this.steps[index] as Runnable<unknown, unknown>)._invokeIn(value, this.stepScope(run, index));
    }
    return value as O;
  }

  protected override _transform(inputs: AsyncIterable<I>, run: Run, known?: Known<I>): AsyncGenerator<O> {
    let stream: AsyncIterable<unknown> = inputs;
    for (let index = 0; index < this.steps.length; index++) {
      const step = this.steps[index] as Runnable<unknown, unknown>;
      stream = step._streamIn(stream, this.stepScope(run, index), index === 0 ? known : undefined);
    }
    return stream as AsyncGenerator<O>;
  }

  override _children(): AnyRunnable[] {
    return [...this.steps];
  }

  override _graph(graph: Graph): GraphSpan {
    let span: GraphSpan | undefined;
    let first: string[] = [];
    for (const step of this.steps) {
      const next = step._graph(graph);
      if (span === undefined) first = next.first;
      else graph.connect(span.last, next.first);
      span = next;
    }
    return { first, last: (span as GraphSpan).last };
  }
}

/**
 * Runs steps one after another (LangChain.js: `RunnableSequence.from`).
 * Functions and objects among the steps are coerced with `toRunnable`.
 *
 * @example
 * const chain = sequence(prompt, model, new StringOutputParser());
 */
export function sequence<I = unknown, O = unknown>(...steps: RunnableLike<never, unknown>[]): Runnable<I, O> {
  return new RunnableSequence<I, O>(steps);
}

wiring.sequence = (steps) => new RunnableSequence(steps) as AnyRunnable;
