/**
 * A runnable with something bound to it: config (`withConfig`), call options
 * (`bind`), listeners (`withListeners`) or schemas (`withTypes`). A binding
 * is transparent: it adds no run of its own, it shapes the scope the bound
 * runnable runs in.
 */
import type { ZodType } from 'zod';
import { bindScope, scopeWith, type RunnableConfig, type Scope } from './config.js';
import type { RunListeners, RunType } from './events.js';
import type { Graph, GraphSpan } from './graph.js';
import { Runnable, type Known } from './runnable.js';
import { wiring } from './wiring.js';

type AnyRunnable = Runnable<never, unknown>;

/** What a {@link RunnableBinding} binds. */
export interface BindingOptions {
  config?: RunnableConfig | undefined;
  kwargs?: Record<string, unknown> | undefined;
  listeners?: RunListeners | undefined;
  inputSchema?: ZodType | undefined;
  outputSchema?: ZodType | undefined;
}

/** A runnable with config, call options, listeners or schemas bound to it. */
export class RunnableBinding<I, O> extends Runnable<I, O> {
  readonly name: string;
  override readonly runType: RunType;
  readonly bound: Runnable<I, O>;
  private readonly binding: BindingOptions;

  constructor(bound: Runnable<I, O>, binding: BindingOptions) {
    super();
    this.bound = bound;
    this.binding = binding;
    this.name = binding.config?.runName ?? bound.name;
    this.runType = bound.runType;
  }

  private scoped(scope: Scope): Scope {
    const { config, kwargs, listeners } = this.binding;
    let next = config === undefined ? scope : bindScope(scope, config);
    if (kwargs !== undefined || listeners !== undefined) {
      next = scopeWith(next, { options: { ...kwargs, ...next.options }, listeners: listeners ?? next.listeners });
    }
    return next;
  }

  override _invokeIn(input: I, scope: Scope): Promise<O> {
    return this.bound._invokeIn(input, this.scoped(scope));
  }

  override _streamIn(inputs: AsyncIterable<I>, scope: Scope, known?: Known<I>): AsyncGenerator<O> {
    return this.bound._streamIn(inputs, this.scoped(scope), known);
  }

  override get inputSchema(): ZodType {
    return this.binding.inputSchema ?? this.bound.inputSchema;
  }

  override get outputSchema(): ZodType {
    return this.binding.outputSchema ?? this.bound.outputSchema;
  }

  override _outputSchemaFor(input: ZodType): ZodType {
    return this.binding.outputSchema ?? this.bound._outputSchemaFor(input);
  }

  override _children(): AnyRunnable[] {
    return [this.bound as AnyRunnable];
  }

  override _graph(graph: Graph): GraphSpan {
    return this.bound._graph(graph);
  }
}

wiring.binding = (bound, options) => new RunnableBinding(bound, options) as AnyRunnable;
