/**
 * Steps that pass their input along: `passthrough()` as it is, `assign()`
 * with keys added, `pick()` narrowed to some keys.
 */
import { z, type ZodType } from 'zod';
import { merge, once, tee } from './async.js';
import { RunnelError } from './errors.js';
import type { Graph, GraphSpan } from './graph.js';
import { RunnableParallel } from './parallel.js';
import type { Run } from './run.js';
import { Runnable, type Known, type RunnableLike } from './runnable.js';
import { wiring } from './wiring.js';

type AnyRunnable = Runnable<never, unknown>;

function requireObject(value: unknown, who: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `${who} expects an object input, got ${Array.isArray(value) ? 'array' : typeof value}`);
  }
  return value as Record<string, unknown>;
}

/** Passes its input through unchanged; see {@link passthrough}. */
export class RunnablePassthrough<T> extends Runnable<T, T> {
  readonly name = 'RunnablePassthrough';
  private readonly schema: ZodType | undefined;

  constructor(options: { schema?: ZodType<T> } = {}) {
    super();
    this.schema = options.schema;
  }

  /** LangChain.js's spelling of {@link assign}. */
  static assign(mapping: Record<string, RunnableLike<never, unknown>>): Runnable<Record<string, unknown>, Record<string, unknown>> {
    return assign(mapping);
  }

  override get inputSchema(): ZodType {
    return this.schema ?? z.unknown();
  }

  override get outputSchema(): ZodType {
    return this.inputSchema;
  }

  override _outputSchemaFor(input: ZodType): ZodType {
    return this.schema ?? input;
  }

  protected override async _call(input: T): Promise<T> {
    return input;
  }

  protected override async *_transform(inputs: AsyncIterable<T>): AsyncGenerator<T> {
    yield* inputs;
  }
}

/**
 * Passes its input through unchanged (LangChain.js: `RunnablePassthrough`),
 * typically as one branch of a `parallel`.
 *
 * @example
 * parallel({ question: passthrough(), context: retriever });
 */
export function passthrough<T = unknown>(options?: { schema?: ZodType<T> }): Runnable<T, T> {
  return new RunnablePassthrough<T>(options);
}

/** Adds computed keys to an object input; see {@link assign}. */
export class RunnableAssign extends Runnable<Record<string, unknown>, Record<string, unknown>> {
  readonly name = 'RunnableAssign';
  readonly mapper: RunnableParallel<Record<string, unknown>, Record<string, unknown>>;

  constructor(mapping: Record<string, unknown>) {
    super();
    this.mapper = new RunnableParallel(mapping);
  }

  override get inputSchema(): ZodType {
    return this.mapper.inputSchema;
  }

  override get outputSchema(): ZodType {
    return this._outputSchemaFor(this.inputSchema);
  }

  override _outputSchemaFor(input: ZodType): ZodType {
    const added = this.mapper._outputSchemaFor(input) as z.ZodObject;
    return input instanceof z.ZodObject ? input.extend(added.shape) : added.loose();
  }

  protected override async _call(input: Record<string, unknown>, run: Run): Promise<Record<string, unknown>> {
    requireObject(input, this.name);
    return { ...input, ...(await this.mapper._invokeIn(input, run.scope)) };
  }

  protected override async *_transform(
    inputs: AsyncIterable<Record<string, unknown>>,
    run: Run,
    known?: Known<Record<string, unknown>>,
  ): AsyncGenerator<Record<string, unknown>> {
    const keys = new Set(this.mapper.keys);
    const [forPassing, forMapper] = known !== undefined ? [once(known.value), once(known.value)] : tee(inputs, 2);
    const passing = async function* (source: AsyncIterable<Record<string, unknown>>, who: string): AsyncGenerator<Record<string, unknown>> {
      for await (const chunk of source) {
        const kept = Object.entries(requireObject(chunk, who)).filter(([key]) => !keys.has(key));
        if (kept.length > 0) yield Object.fromEntries(kept);
      }
    };
    const sources = [
      ['pass', passing(forPassing as AsyncIterable<Record<string, unknown>>, this.name)],
      ['map', this.mapper._streamIn(forMapper as AsyncIterable<Record<string, unknown>>, run.scope, known)],
    ] as const;
    for await (const [, chunk] of merge(sources)) yield chunk;
  }

  override _children(): AnyRunnable[] {
    return [this.mapper as AnyRunnable];
  }

  override _graph(graph: Graph): GraphSpan {
    const id = graph.addNode(this.name);
    const span = this.mapper._graph(graph);
    graph.connect([id], span.first);
    return { first: [id], last: span.last };
  }
}

/**
 * Passes an object input through with keys added, each computed from the
 * input by a runnable (LangChain.js: `RunnablePassthrough.assign`). Streamed,
 * the passed-through keys come at once, then each new key as it is computed.
 *
 * @example
 * assign({ total: (x: { a: number; b: number }) => x.a + x.b }); // {a, b} → {a, b, total}
 */
export function assign<I extends Record<string, unknown>>(
  mapping: Record<string, RunnableLike<I, unknown>>,
): Runnable<Record<string, unknown>, Record<string, unknown>> {
  return new RunnableAssign(mapping);
}

/** Narrows an object input to some of its keys; see {@link pick}. */
export class RunnablePick extends Runnable<Record<string, unknown>, unknown> {
  readonly name = 'RunnablePick';
  readonly keys: string | readonly string[];

  constructor(keys: string | readonly string[]) {
    super();
    this.keys = typeof keys === 'string' ? keys : [...keys];
  }

  override _outputSchemaFor(input: ZodType): ZodType {
    if (!(input instanceof z.ZodObject)) return z.unknown();
    const shape = input.shape as Record<string, ZodType>;
    if (typeof this.keys === 'string') return shape[this.keys] ?? z.unknown();
    return z.object(Object.fromEntries(this.keys.map((key) => [key, (shape[key] ?? z.unknown()).optional()])));
  }

  private pickFrom(value: unknown): { found: boolean; value: unknown } {
    const input = requireObject(value, this.name);
    if (typeof this.keys === 'string') return { found: this.keys in input, value: input[this.keys] };
    const picked: Record<string, unknown> = {};
    let found = false;
    for (const key of this.keys) {
      if (key in input) {
        picked[key] = input[key];
        found = true;
      }
    }
    return { found, value: picked };
  }

  protected override async _call(input: Record<string, unknown>): Promise<unknown> {
    return this.pickFrom(input).value;
  }

  protected override async *_transform(inputs: AsyncIterable<Record<string, unknown>>): AsyncGenerator<unknown> {
    for await (const chunk of inputs) {
      const picked = this.pickFrom(chunk);
      if (picked.found) yield picked.value;
    }
  }
}

/**
 * Picks keys from an object input (LangChain.js: `RunnablePick`): one key
 * gives its value, a list gives an object of those keys.
 *
 * @example
 * pick(['question', 'context']);
 */
export function pick(keys: string | string[]): Runnable<Record<string, unknown>, unknown> {
  return new RunnablePick(keys);
}

wiring.pick = (keys) => new RunnablePick(keys) as AnyRunnable;
wiring.assign = (mapping) => new RunnableAssign(mapping) as AnyRunnable;
