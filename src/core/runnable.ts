/**
 * `Runnable`, the protocol every part of a chain speaks: invoke, batch,
 * stream, transform, streamEvents and streamLog, schemas, a graph, and the
 * composition methods. Subclasses implement what they do best and inherit
 * the rest:
 *
 * - `_call(input, run)` — the whole input to the whole output;
 * - `_stream(input, run)` — the whole input to a stream of output chunks;
 * - `_transform(inputs, run)` — a stream of input chunks to a stream of output
 *   chunks; a runnable with one starts before its input has finished.
 *
 * Runs, events, cancellation and config inheritance are handled here, once,
 * for all of them.
 */
import { z, type ZodType } from 'zod';
import { abortable, abortableStream, failingWith, mapConcurrently, once, raceAbort, type Cancellation } from './async.js';
import {
  resolveScope,
  ROOT_SCOPE,
  scopeStorage,
  scopeWith,
  withOneShot,
  type RunConfig,
  type RunnableConfig,
  type Scope,
} from './config.js';
import { abortError, RunnelError } from './errors.js';
import type { EventFilters, RunListeners, RunType, StreamEvent } from './events.js';
import { Graph, type GraphSpan } from './graph.js';
import { ChunkSum, collect } from './merge.js';
import { Run } from './run.js';
import { configJsonSchema, toJsonSchema, type ConfigSpec, type JsonSchema } from './schema.js';
import { streamEvents } from './stream-events.js';
import { streamLog, type RunLogPatch } from './stream-log.js';
import { wiring } from './wiring.js';
import type { RetryOptions } from './retry.js';
import type { FallbackOptions } from './fallbacks.js';
import type { AlternativesOptions, ConfigurableFieldSpec } from './configurable.js';

/** A function a lambda wraps: the input and the run's config to the output (or a runnable to run instead). */
export type RunnableFunc<I, O> = (input: I, config: RunConfig) => O | Promise<O> | Runnable<I, O>;

/** An async generator function a generator runnable wraps: a stream of input to a stream of output. */
export type GeneratorFunc<I, O> = (input: AsyncIterable<I>, config: RunConfig) => AsyncGenerator<O>;

/** Anything `toRunnable` turns into a runnable: a runnable, a function, a generator function, or an object of those. */
export type RunnableLike<I = unknown, O = unknown> =
  | Runnable<I, O>
  | RunnableFunc<I, O>
  | GeneratorFunc<I, O>
  | { [key: string]: RunnableLike<I, unknown> };

/** Options of `batch`. */
export interface BatchOptions {
  /** Return each failure in place of its output instead of rejecting the whole batch. */
  returnExceptions?: boolean;
}

/** An input known in full before the run starts (as opposed to one still streaming in). @internal */
export interface Known<T> {
  value: T;
}

const CONFIG_KEYS = new Set([
  'tags',
  'metadata',
  'callbacks',
  'runName',
  'runId',
  'maxConcurrency',
  'recursionLimit',
  'configurable',
  'signal',
  'timeout',
]);

/** Splits a call's options into the run config and the call options bound for the component. @internal */
export function scopeFor(options: RunnableConfig | undefined): Scope {
  if (options === undefined || options === null) return scopeStorage.getStore() ?? ROOT_SCOPE;
  let callOptions: Record<string, unknown> | undefined;
  for (const key in options) {
    if (!CONFIG_KEYS.has(key)) (callOptions ??= {})[key] = (options as Record<string, unknown>)[key];
  }
  const scope = resolveScope(options);
  return callOptions === undefined ? scope : withOneShot(scope, { options: callOptions });
}

/**
 * True when a run's signal is not its parent run's: the run where a signal
 * enters the tree. Unobserved runs race the abort only there — the enclosing
 * race ends the whole call as promptly, without a race per step and chunk.
 * Observed runs race at every level, so each emits its error event at once.
 */
function entersSignal(scope: Scope): boolean {
  return scope.parent === undefined || scope.parent.signal !== scope.signal;
}

/** Adds up a stream of input chunks, recording it on the run once known. */
async function* tapInput<T>(inputs: AsyncIterable<T>, run: Run): AsyncGenerator<T> {
  // Added up as a run's output is (see ChunkSum): a parser after a model gets its chunks.
  const chunks = new ChunkSum<T>();
  for await (const chunk of inputs) {
    run.start();
    chunks.push(chunk);
    yield chunk;
  }
  run.setInput(chunks.value());
}

const DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/**
 * A step that needs its whole input before it streams (a chat model after a
 * prompt): on the first `next()` it adds up the input stream, then hands out
 * the step's own stream's promises as they are. A hand-written iterator, as
 * it sits on every chunk's path (an async generator delegating with `yield*`
 * costs hops per chunk).
 */
class CollectThenStream<I, O> implements AsyncIterableIterator<O> {
  private inner: AsyncIterator<O> | undefined;
  private starting: Promise<AsyncIterator<O>> | undefined;

  constructor(
    private readonly inputs: AsyncIterable<I>,
    private readonly open: (input: I) => AsyncIterator<O>,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<O>> {
    if (this.inner !== undefined) return this.inner.next();
    this.starting ??= collect(this.inputs).then((input) => (this.inner = this.open(input as I)));
    return this.starting.then((inner) => inner.next());
  }

  /** The reader stopped early: the step's stream is returned (once it has begun). */
  async return(value?: unknown): Promise<IteratorResult<O>> {
    const inner = this.inner ?? (this.starting === undefined ? undefined : await this.starting.catch(() => undefined));
    await inner?.return?.(value);
    return DONE as IteratorResult<O>;
  }

  async throw(error: unknown): Promise<IteratorResult<O>> {
    const inner = this.inner ?? (this.starting === undefined ? undefined : await this.starting.catch(() => undefined));
    if (inner?.throw === undefined) throw error;
    return inner.throw(error);
  }
}

/**
 * The protocol every part of a chain speaks. See the module comment for what
 * subclasses implement; users build runnables with `lambda`, `sequence`,
 * `parallel` and the other constructors, and combine them with `pipe`.
 *
 * @example
 * const chain = lambda((x: number) => x + 1).pipe((x: number) => x * 2);
 * await chain.invoke(1); // 4
 */
/** The input index each failure of a `batch` came from (of the outermost batch it failed). */
const failedItems = new WeakMap<object, number>();

/** The index of the input whose run threw `error` in a `batch`, if it came from one: `/batch` names the item. */
export function batchItemOf(error: unknown): number | undefined {
  return error !== null && typeof error === 'object' ? failedItems.get(error) : undefined;
}

export abstract class Runnable<I = unknown, O = unknown, CallOptions extends RunnableConfig = RunnableConfig> {
  /** The name this runnable's runs report in events and logs. */
  abstract readonly name: string;

  /** The kind of component; events are named after it (`on_chain_start`). */
  readonly runType: RunType = 'chain';

  /** The whole input to the whole output. */
  protected async _call(input: I, run: Run): Promise<O> {
    if (this._stream === Runnable.prototype._stream && this._transform === undefined) {
      throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `${this.name} implements neither _call, _stream nor _transform`);
    }
    return (await collect(this._stream(input, run))) as O;
  }

  /** The whole input to a stream of output chunks. By default, one chunk: the whole output. */
  protected _stream(input: I, run: Run): AsyncGenerator<O> {
    if (this._transform !== undefined) return this._transform(once(input), run, { value: input });
    return this.callAsStream(input, run);
  }

  private async *callAsStream(input: I, run: Run): AsyncGenerator<O> {
    yield await this._call(input, run);
  }

  /** A stream of input chunks to a stream of output chunks, for runnables that start before their input has ended. */
  protected _transform?(inputs: AsyncIterable<I>, run: Run, known?: Known<I>): AsyncGenerator<O>;

  /**
   * Metadata this runnable adds to its own runs' events (chat models add
   * LangChain's `ls_provider`, `ls_model_name`, ...), computed once per
   * observed run from the run's call options. Unset for most runnables.
   * @internal
   */
  _eventMetadata?(options: Readonly<Record<string, unknown>>): Record<string, unknown>;

  /**
   * The input as this runnable's start and end events show it: a retriever's query as `{query}`, as
   * LangChain's retrievers report it (chat models show `{messages: [[...]]}`).
   */
  protected _eventInput(input: I): unknown {
    return this.runType === 'retriever' ? { query: input } : input;
  }

  /** Runs this runnable within a scope. @internal */
  _invokeIn(input: I, scope: Scope): Promise<O> {
    const run = new Run(this.name, this.runType, scope, this);
    const signal = scope.signal;
    if (!run.observed) {
      if (signal?.aborted === true) return Promise.reject(abortError(signal));
      try {
        const output = this._call(input, run);
        return signal === undefined || !entersSignal(scope) ? output : raceAbort(output, signal);
      } catch (error) {
        return Promise.reject(error);
      }
    }
    return this.observedCall(input, run, signal);
  }

  private async observedCall(input: I, run: Run, signal: Cancellation | undefined): Promise<O> {
    run.start(this._eventInput(input));
    try {
      if (signal?.aborted === true) throw abortError(signal);
      const output = await raceAbort(this._call(input, run), signal);
      run.end(output);
      return output;
    } catch (error) {
      run.fail(error);
      throw error;
    }
  }

  /** Streams this runnable within a scope. @internal */
  _streamIn(inputs: AsyncIterable<I>, scope: Scope, known?: Known<I>): AsyncGenerator<O> {
    const run = new Run(this.name, this.runType, scope, this);
    if (!run.observed) {
      const signal = scope.signal;
      // Nobody observes this run, and nothing aborts it or an enclosing run races the abort for it:
      // no wrapper, the chunks flow straight through.
      if (signal === undefined || !entersSignal(scope)) {
        if (this._transform !== undefined) return this._transform(inputs, run, known);
        if (known !== undefined) return this._stream(known.value, run);
        return this.collectThenStream(inputs, run);
      }
      // Nobody observes it, and its signal enters here (a request's, at the root of what it streams): the
      // abort race alone, an iterator handing on the source's promises, not a generator's hops on every chunk.
      // The source is made on the first pull, as the generator made it.
      const transform = this._transform;
      if (transform !== undefined) return abortableStream(() => transform.call(this, inputs, run, known), signal);
      if (known !== undefined) return abortableStream(() => this._stream(known.value, run), signal);
      return abortableStream(() => this.collectThenStream(abortable(inputs, signal), run), signal);
    }
    return this.runStream(inputs, run, scope.signal, known);
  }

  private collectThenStream(inputs: AsyncIterable<I>, run: Run): AsyncGenerator<O> {
    return new CollectThenStream<I, O>(inputs, (input) => this._stream(input, run)) as unknown as AsyncGenerator<O>;
  }

  private async *runStream(inputs: AsyncIterable<I>, run: Run, signal: Cancellation | undefined, known?: Known<I>): AsyncGenerator<O> {
    const observed = run.observed;
    // The chunks added up (see ChunkSum: message chunks in one pass when the run ends, not one per chunk).
    const outputs = new ChunkSum<O>();
    let settled = false;
    try {
      if (signal?.aborted === true) throw abortError(signal);
      let source: AsyncGenerator<O>;
      if (this._transform !== undefined) {
        if (known !== undefined) run.start(this._eventInput(known.value));
        source = this._transform(known === undefined && observed ? tapInput(inputs, run) : inputs, run, known);
      } else {
        const input = known !== undefined ? known.value : ((await collect(signal === undefined ? inputs : abortable(inputs, signal))) as I);
        run.start(this._eventInput(input));
        source = this._stream(input, run);
      }
      for await (const chunk of signal === undefined ? source : abortable(source, signal)) {
        if (observed) {
          run.chunk(chunk);
          outputs.push(chunk);
        }
        yield chunk;
      }
      settled = true;
      run.end(outputs.value());
    } catch (error) {
      settled = true;
      run.fail(error);
      throw error;
    } finally {
      // The reader stopped early: the run ends with what it had produced.
      if (!settled) run.end(outputs.value());
    }
  }

  /**
   * Runs on one input and resolves with the output.
   *
   * @example
   * await chain.invoke({ topic: 'cats' }, { tags: ['demo'], timeout: 10_000 });
   */
  invoke(input: I, options?: CallOptions): Promise<O> {
    return this._invokeIn(input, scopeFor(options));
  }

  /**
   * Runs on many inputs, at most `maxConcurrency` at a time, and resolves with
   * the outputs in input order. `config` is one config for all inputs or one
   * per input. With `returnExceptions`, failures come back in place.
   *
   * @example
   * await chain.batch([1, 2, 3], { maxConcurrency: 2 });
   */
  batch(inputs: I[], config?: CallOptions | CallOptions[], options?: BatchOptions & { returnExceptions?: false }): Promise<O[]>;
  batch(inputs: I[], config: CallOptions | CallOptions[] | undefined, options: BatchOptions & { returnExceptions: true }): Promise<(O | Error)[]>;
  batch(inputs: I[], config?: CallOptions | CallOptions[], options?: BatchOptions): Promise<(O | Error)[]>;
  async batch(inputs: I[], config?: CallOptions | CallOptions[], options: BatchOptions = {}): Promise<(O | Error)[]> {
    if (Array.isArray(config) && config.length !== inputs.length) {
      throw new RunnelError(
        'RUNNEL_ERR_INVALID_ARGUMENT',
        `Number of configs (${config.length}) must match number of inputs (${inputs.length})`,
      );
    }
    const scopes = inputs.map((_, index) => scopeFor(Array.isArray(config) ? config[index] : config));
    const first = scopes[0];
    if (first === undefined) return [];
    // The items' cancellation, which the first failed item fires too: the others end then, their model calls
    // closed. One per signal the items were given (usually one for the whole batch), made once.
    const links = new Map<Cancellation | undefined, ReturnType<typeof failingWith>>();
    try {
      return await mapConcurrently(inputs, first.maxConcurrency, first.signal, options.returnExceptions === true, (input, index, failed) => {
        let scope = scopes[index] as Scope;
        if (failed !== undefined) {
          let link = links.get(scope.signal);
          if (link === undefined) links.set(scope.signal, (link = failingWith(scope.signal, failed)));
          scope = scopeWith(scope, { signal: link.token });
        }
        return this._invokeIn(input, scope).catch((error: unknown) => {
          // Set again by each enclosing batch as the error passes through it: the outermost one's index stands.
          if (error !== null && typeof error === 'object') failedItems.set(error, index);
          throw error;
        });
      });
    } finally {
      for (const link of links.values()) link.dispose();
    }
  }

  /**
   * Runs on one input and yields output chunks as they are produced. An error
   * before the first chunk rejects the first `next()`.
   *
   * @example
   * for await (const token of chain.stream({ topic: 'cats' })) process.stdout.write(token);
   */
  stream(input: I, options?: CallOptions): AsyncGenerator<O> {
    return this._streamIn(once(input), scopeFor(options), { value: input });
  }

  /** Runs on a stream of input chunks and yields output chunks. */
  transform(inputs: AsyncIterable<I>, options?: CallOptions): AsyncGenerator<O> {
    return this._streamIn(inputs, scopeFor(options));
  }

  /**
   * Runs on one input and yields the v2 events of this run and of every run
   * inside it, filtered by name, type and tag.
   *
   * @example
   * for await (const e of chain.streamEvents(input, {}, { includeTypes: ['chat_model'] })) console.log(e.event);
   */
  streamEvents(input: I, options?: CallOptions, filters?: EventFilters): AsyncGenerator<StreamEvent> {
    return streamEvents(this, input, scopeFor(options), filters);
  }

  /**
   * Runs on one input and yields JSON Patch operations that build the run log
   * (`{id, streamed_output, final_output, logs, name, type}`).
   */
  streamLog(input: I, options?: CallOptions, filters?: EventFilters): AsyncGenerator<RunLogPatch> {
    return streamLog(this, input, scopeFor(options), filters);
  }

  /** The schema of the input (`unknown` unless the runnable knows better). */
  get inputSchema(): ZodType {
    return z.unknown();
  }

  /** The schema of the output (`unknown` unless the runnable knows better). */
  get outputSchema(): ZodType {
    return z.unknown();
  }

  /**
   * The output schema given the schema of the input this runnable receives.
   * Steps that pass their input through (pick, assign, passthrough) refine
   * their output from it; a sequence folds this over its steps. @internal
   */
  _outputSchemaFor(input: ZodType): ZodType {
    void input;
    return this.outputSchema;
  }

  /** The input schema as JSON Schema (draft-07), titled `{name}Input`. */
  inputJsonSchema(): JsonSchema {
    return toJsonSchema(this.inputSchema, { title: `${this.name}Input`, io: 'input' });
  }

  /** The output schema as JSON Schema (draft-07), titled `{name}Output`. */
  outputJsonSchema(): JsonSchema {
    return toJsonSchema(this.outputSchema, { title: `${this.name}Output`, io: 'output' });
  }

  /** The config schema: every configurable field reachable in this chain, alternatives as an enum. */
  configJsonSchema(): JsonSchema {
    return configJsonSchema(this.configSpecs(), `${this.name}Config`);
  }

  /** Every configurable spec reachable from here, each id once. */
  configSpecs(): ConfigSpec[] {
    const seen = new Map<string, ConfigSpec>();
    const visit = (runnable: Runnable<never, unknown>): void => {
      for (const spec of runnable._ownConfigSpecs()) if (!seen.has(spec.id)) seen.set(spec.id, spec);
      for (const child of runnable._children()) visit(child);
    };
    visit(this as unknown as Runnable<never, unknown>);
    return [...seen.values()];
  }

  /** The runnables this one is composed of. @internal */
  _children(): Runnable<never, unknown>[] {
    return [];
  }

  /** The configurable specs this runnable itself declares. @internal */
  _ownConfigSpecs(): ConfigSpec[] {
    return [];
  }

  /** Adds this runnable's nodes to `graph`. @internal */
  _graph(graph: Graph): GraphSpan {
    const id = graph.addNode(this.name);
    return { first: [id], last: [id] };
  }

  /**
   * The composition as nodes and edges, between an input and an output node.
   *
   * @example
   * console.log(chain.getGraph().toMermaid());
   */
  getGraph(): Graph {
    const graph = new Graph();
    const input = graph.addNode(`${this.name}Input`, 'input');
    const span = this._graph(graph);
    const output = graph.addNode(`${this.name}Output`, 'output');
    graph.connect([input], span.first);
    graph.connect(span.last, [output]);
    return graph;
  }

  /** The name runs report. */
  getName(): string {
    return this.name;
  }

  /**
   * A sequence of this runnable and the next steps; each step gets the
   * previous step's output.
   *
   * @example
   * prompt.pipe(model).pipe(new StringOutputParser());
   */
  pipe<N>(next: RunnableLike<O, N>): Runnable<I, N>;
  pipe<A, N>(a: RunnableLike<O, A>, b: RunnableLike<A, N>): Runnable<I, N>;
  pipe<A, B, N>(a: RunnableLike<O, A>, b: RunnableLike<A, B>, c: RunnableLike<B, N>): Runnable<I, N>;
  pipe(...steps: RunnableLike<never, unknown>[]): Runnable<I, unknown>;
  pipe(...steps: unknown[]): Runnable<I, unknown> {
    return wiring.sequence([this, ...steps]) as unknown as Runnable<I, unknown>;
  }

  /** The same runnable with `config` applied to every call (the call's own config wins where they conflict). */
  withConfig(config: RunnableConfig): Runnable<I, O, CallOptions> {
    return wiring.binding(this as never, { config }) as unknown as Runnable<I, O, CallOptions>;
  }

  /**
   * The same runnable with call options bound, as a model's `stop` or tools.
   *
   * @example
   * model.bind({ stop: ['\n'] });
   */
  bind(kwargs: Partial<Omit<CallOptions, keyof RunnableConfig>>): Runnable<I, O, CallOptions> {
    return wiring.binding(this as never, { kwargs: kwargs as Record<string, unknown> }) as unknown as Runnable<
      I,
      O,
      CallOptions
    >;
  }

  /** The same runnable, retried on failure with exponential backoff and jitter (never after an abort). */
  withRetry(options: RetryOptions = {}): Runnable<I, O, CallOptions> {
    return wiring.retry(this as never, options) as unknown as Runnable<I, O, CallOptions>;
  }

  /**
   * The same runnable, falling back to the given runnables in order when it
   * fails; when all fail, the first error is raised.
   */
  withFallbacks(fallbacks: Runnable<I, O>[] | ({ fallbacks: Runnable<I, O>[] } & Omit<FallbackOptions, 'fallbacks'>)): Runnable<I, O> {
    const options = Array.isArray(fallbacks) ? { fallbacks } : fallbacks;
    return wiring.fallbacks(this as never, options as unknown as FallbackOptions) as unknown as Runnable<I, O>;
  }

  /** The same runnable, calling `onStart`, `onEnd` and `onError` for each of its own runs. */
  withListeners(listeners: RunListeners): Runnable<I, O, CallOptions> {
    return wiring.binding(this as never, { listeners }) as unknown as Runnable<I, O, CallOptions>;
  }

  /**
   * The same runnable with declared input and output schemas (and types).
   *
   * @example
   * lambda((x) => x.a * 2).withTypes({ input: z.object({ a: z.number() }), output: z.number() });
   */
  withTypes<NI = I, NO = O>(types: { input?: ZodType<NI>; output?: ZodType<NO> }): Runnable<NI, NO, CallOptions> {
    return wiring.binding(this as never, { inputSchema: types.input, outputSchema: types.output }) as unknown as Runnable<
      NI,
      NO,
      CallOptions
    >;
  }

  /** A runnable that runs this one on each element of an input array. */
  map(): Runnable<I[], O[]> {
    return wiring.each(this as never) as unknown as Runnable<I[], O[]>;
  }

  /** This runnable followed by picking `keys` from its (object) output. */
  pick(keys: string | string[]): Runnable<I, unknown> {
    return this.pipe(wiring.pick(keys) as Runnable<never, unknown>);
  }

  /** This runnable followed by adding keys computed from its (object) output. */
  assign(mapping: Record<string, RunnableLike<O, unknown>>): Runnable<I, Record<string, unknown>> {
    return this.pipe(wiring.assign(mapping) as Runnable<never, Record<string, unknown>>);
  }

  /**
   * The same runnable with some of its fields settable per call through
   * `config.configurable`.
   *
   * @example
   * model.configurableFields({ temperature: { id: 'temperature', schema: z.number().min(0).max(2) } });
   */
  configurableFields(fields: Record<string, ConfigurableFieldSpec>): Runnable<I, O, CallOptions> {
    return wiring.configurableFields(this as never, fields) as unknown as Runnable<I, O, CallOptions>;
  }

  /**
   * A runnable that runs this one or one of `alternatives`, chosen per call by
   * `config.configurable[id]`.
   */
  configurableAlternatives(options: AlternativesOptions): Runnable<I, O, CallOptions> {
    return wiring.configurableAlternatives(this as never, options) as unknown as Runnable<I, O, CallOptions>;
  }
}

/** True when `value` is a runnable. */
export function isRunnable(value: unknown): value is Runnable<never, unknown> {
  return value instanceof Runnable;
}
