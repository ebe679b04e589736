/**
 * `branch([condition, runnable], ..., default)`: runs the first runnable whose
 * condition holds for the input, or the default.
 */
import { z, type ZodType } from 'zod';
import { once } from './async.js';
import { RunnelError } from './errors.js';
import type { Graph, GraphSpan } from './graph.js';
import type { Run } from './run.js';
import { Runnable, type RunnableLike } from './runnable.js';
import { wiring } from './wiring.js';

type AnyRunnable = Runnable<never, unknown>;

/** Runs the first branch whose condition holds; see {@link branch}. */
export class RunnableBranch<I, O> extends Runnable<I, O> {
  readonly name = 'RunnableBranch';
  readonly branches: readonly (readonly [AnyRunnable, AnyRunnable])[];
  readonly fallback: AnyRunnable;

  constructor(branches: readonly (readonly [unknown, unknown])[], fallback: unknown) {
    super();
    this.branches = branches.map(([condition, runnable]) => [wiring.coerce(condition), wiring.coerce(runnable)] as const);
    this.fallback = wiring.coerce(fallback);
  }

  /** LangChain.js's spelling of {@link branch}: the last element is the default. */
  static from<I, O>(items: [...[RunnableLike<I, unknown>, RunnableLike<I, O>][], RunnableLike<I, O>]): RunnableBranch<I, O> {
    const last = items[items.length - 1];
    if (items.length < 2 || Array.isArray(last)) {
      throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'A branch needs at least one [condition, runnable] pair and a default');
    }
    return new RunnableBranch(items.slice(0, -1) as [unknown, unknown][], last);
  }

  private get targets(): AnyRunnable[] {
    return [...this.branches.map(([, runnable]) => runnable), this.fallback];
  }

  override get inputSchema(): ZodType {
    return this.targets.map((runnable) => runnable.inputSchema).find((schema) => !(schema instanceof z.ZodUnknown)) ?? z.unknown();
  }

  override get outputSchema(): ZodType {
    return this._outputSchemaFor(this.inputSchema);
  }

  override _outputSchemaFor(input: ZodType): ZodType {
    const outputs = this.targets.map((runnable) => runnable._outputSchemaFor(input));
    if (outputs.some((schema) => schema instanceof z.ZodUnknown)) return z.unknown();
    return outputs.length === 1 ? (outputs[0] as ZodType) : z.union(outputs as [ZodType, ZodType, ...ZodType[]]);
  }

  private async choose(input: I, run: Run): Promise<[Runnable<I, O>, string]> {
    for (let index = 0; index < this.branches.length; index++) {
      const [condition, runnable] = this.branches[index] as readonly [AnyRunnable, AnyRunnable];
      const holds = await (condition as Runnable<I, unknown>)._invokeIn(input, run.child([`condition:${index + 1}`]));
      if (holds) return [runnable as Runnable<I, O>, `branch:${index + 1}`];
    }
    return [this.fallback as Runnable<I, O>, 'branch:default'];
  }

  protected override async _call(input: I, run: Run): Promise<O> {
    const [runnable, tag] = await this.choose(input, run);
    return runnable._invokeIn(input, run.child([tag]));
  }

  protected override async *_stream(input: I, run: Run): AsyncGenerator<O> {
    const [runnable, tag] = await this.choose(input, run);
    yield* runnable._streamIn(once(input), run.child([tag]), { value: input });
  }

  override _children(): AnyRunnable[] {
    return [...this.branches.flatMap(([condition, runnable]) => [condition, runnable]), this.fallback];
  }

  override _graph(graph: Graph): GraphSpan {
    const id = graph.addNode(this.name);
    const last: string[] = [];
    this.targets.forEach((runnable, index) => {
      const span = runnable._graph(graph);
      graph.connect([id], span.first, { conditional: true, label: index < this.branches.length ? `condition:${index + 1}` : 'default' });
      last.push(...span.last);
    });
    return { first: [id], last };
  }
}

/**
 * Runs the first runnable whose condition is truthy for the input, else the
 * default (LangChain.js: `RunnableBranch.from`). Conditions are runnables or
 * functions; each runs as a child run.
 *
 * @example
 * branch([(x: { topic: string }) => x.topic === 'math', mathChain], generalChain);
 */
export function branch<I, O>(...items: [...[RunnableLike<I, unknown>, RunnableLike<I, O>][], RunnableLike<I, O>]): Runnable<I, O> {
  return RunnableBranch.from<I, O>(items);
}
