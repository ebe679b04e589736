/**
 * Runnables whose make-up is chosen per call through `config.configurable`:
 * `configurableFields` lets a call set some of a runnable's fields (a model's
 * temperature), `configurableAlternatives` lets it pick one of several
 * runnables (which model). Both appear in `configJsonSchema()`, and both are
 * transparent: they add no run of their own.
 */
import type { ZodType } from 'zod';
import type { Scope } from './config.js';
import { RunnelError, type ErrorDetailItem } from './errors.js';
import type { RunType } from './events.js';
import type { Graph, GraphSpan } from './graph.js';
import { Runnable, type Known } from './runnable.js';
import type { ConfigSpec } from './schema.js';
import { wiring } from './wiring.js';

type AnyRunnable = Runnable<never, unknown>;

/** How one field is exposed: the `configurable` key, a name and description for the schema, and the values allowed. */
export interface ConfigurableFieldSpec {
  id: string;
  name?: string;
  description?: string;
  /** Values are checked against this schema; without one, against the type of the field's current value. */
  schema?: ZodType;
}

/** Options of `configurableAlternatives`. */
export interface AlternativesOptions {
  /** The `configurable` key that selects the alternative. */
  id: string;
  name?: string;
  description?: string;
  /** The key that selects the runnable itself (default `'default'`). */
  defaultKey?: string;
  alternatives: Record<string, Runnable<never, unknown>>;
}

function invalid(id: string, detail: ErrorDetailItem[]): RunnelError {
  return new RunnelError('RUNNEL_ERR_CONFIG_INVALID', `Invalid value for configurable field '${id}': ${detail[0]?.msg ?? 'invalid'}`, { detail });
}

function checkValue(spec: ConfigurableFieldSpec, current: unknown, value: unknown): unknown {
  if (spec.schema !== undefined) {
    const result = spec.schema.safeParse(value);
    if (result.success) return result.data;
    throw invalid(
      spec.id,
      result.error.issues.map((issue) => ({
        type: issue.code,
        loc: ['configurable', spec.id, ...issue.path.map((part) => (typeof part === 'number' ? part : String(part)))],
        msg: issue.message,
      })),
    );
  }
  const expected = Array.isArray(current) ? 'array' : current === null ? 'null' : typeof current;
  const actual = Array.isArray(value) ? 'array' : value === null ? 'null' : typeof value;
  if (current === undefined || expected === actual) return value;
  throw invalid(spec.id, [{ type: `${expected}_type`, loc: ['configurable', spec.id], msg: `Expected ${expected}, received ${actual}` }]);
}

/** Base of the two: resolves the concrete runnable per call, then runs it. */
abstract class ConfigurableRunnable<I, O> extends Runnable<I, O> {
  readonly name: string;
  override readonly runType: RunType;
  protected readonly bound: Runnable<I, O>;

  constructor(bound: Runnable<I, O>) {
    super();
    this.bound = bound;
    this.name = bound.name;
    this.runType = bound.runType;
  }

  /** The runnable this call's `configurable` selects. */
  abstract resolve(configurable: Readonly<Record<string, unknown>>): Runnable<I, O>;

  override _invokeIn(input: I, scope: Scope): Promise<O> {
    let runnable: Runnable<I, O>;
    try {
      runnable = this.resolve(scope.configurable);
    } catch (error) {
      return Promise.reject(error);
    }
    return runnable._invokeIn(input, scope);
  }

  override async *_streamIn(inputs: AsyncIterable<I>, scope: Scope, known?: Known<I>): AsyncGenerator<O> {
    yield* this.resolve(scope.configurable)._streamIn(inputs, scope, known);
  }

  override get inputSchema(): ZodType {
    return this.bound.inputSchema;
  }

  override get outputSchema(): ZodType {
    return this.bound.outputSchema;
  }

  override _outputSchemaFor(input: ZodType): ZodType {
    return this.bound._outputSchemaFor(input);
  }

  override _graph(graph: Graph): GraphSpan {
    return this.bound._graph(graph);
  }
}

/** A runnable some of whose fields a call may set; see `Runnable.configurableFields`. */
export class RunnableConfigurableFields<I, O> extends ConfigurableRunnable<I, O> {
  private readonly fields: readonly (readonly [string, ConfigurableFieldSpec])[];

  constructor(bound: Runnable<I, O>, fields: Record<string, ConfigurableFieldSpec>) {
    super(bound);
    for (const field of Object.keys(fields)) {
      if (!(field in bound)) {
        throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `${bound.name} has no field '${field}' to make configurable`);
      }
    }
    this.fields = Object.entries(fields);
  }

  private current(field: string): unknown {
    return (this.bound as unknown as Record<string, unknown>)[field];
  }

  resolve(configurable: Readonly<Record<string, unknown>>): Runnable<I, O> {
    let changes: Record<string, unknown> | undefined;
    for (const [field, spec] of this.fields) {
      const value = configurable[spec.id];
      if (value === undefined) continue;
      (changes ??= {})[field] = checkValue(spec, this.current(field), value);
    }
    if (changes === undefined) return this.bound;
    // A copy with the chosen fields: runnables are immutable, so the original is never touched.
    return Object.assign(Object.create(Object.getPrototypeOf(this.bound) as object) as Runnable<I, O>, this.bound, changes);
  }

  override _ownConfigSpecs(): ConfigSpec[] {
    return this.fields.map(([field, spec]) => ({
      id: spec.id,
      name: spec.name,
      description: spec.description,
      default: this.current(field),
      schema: spec.schema,
    }));
  }

  override _children(): AnyRunnable[] {
    return [this.bound as AnyRunnable];
  }
}

/** One of several runnables, chosen per call; see `Runnable.configurableAlternatives`. */
export class RunnableConfigurableAlternatives<I, O> extends ConfigurableRunnable<I, O> {
  private readonly options: AlternativesOptions;
  private readonly defaultKey: string;

  constructor(bound: Runnable<I, O>, options: AlternativesOptions) {
    super(bound);
    this.options = options;
    this.defaultKey = options.defaultKey ?? 'default';
    if (this.defaultKey in options.alternatives) {
      throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Alternative '${this.defaultKey}' clashes with the default key`);
    }
  }

  resolve(configurable: Readonly<Record<string, unknown>>): Runnable<I, O> {
    const key = configurable[this.options.id] ?? this.defaultKey;
    if (key === this.defaultKey) return this.bound;
    const alternative = typeof key === 'string' && Object.hasOwn(this.options.alternatives, key) ? this.options.alternatives[key] : undefined;
    if (alternative === undefined) {
      const allowed = [this.defaultKey, ...Object.keys(this.options.alternatives)];
      throw invalid(this.options.id, [
        { type: 'enum', loc: ['configurable', this.options.id], msg: `Expected one of ${allowed.map((k) => `'${k}'`).join(', ')}` },
      ]);
    }
    return alternative as unknown as Runnable<I, O>;
  }

  override _ownConfigSpecs(): ConfigSpec[] {
    return [
      {
        id: this.options.id,
        name: this.options.name,
        description: this.options.description,
        default: this.defaultKey,
        options: [this.defaultKey, ...Object.keys(this.options.alternatives)],
      },
    ];
  }

  override _children(): AnyRunnable[] {
    return [this.bound as AnyRunnable, ...Object.values(this.options.alternatives)];
  }
}

wiring.configurableFields = (bound, fields) => new RunnableConfigurableFields(bound, fields) as AnyRunnable;
wiring.configurableAlternatives = (bound, options) => new RunnableConfigurableAlternatives(bound, options) as AnyRunnable;
