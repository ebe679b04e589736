/**
 * Run configuration: what a caller passes (`RunnableConfig`), how configs
 * merge, and the resolved, inheritable form (`Scope`) that every nested run
 * receives, explicitly from its parent or through AsyncLocalStorage when user
 * code calls a runnable without handing the config on.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Run } from './run.js';
import { isCancelToken, toAbortSignal, type CancelToken, type Cancellation } from './async.js';
import { callQuietly, EventSink, type EventCallback, type RunListeners } from './events.js';

/**
 * Options for one call of a runnable. Every field is optional, and every
 * nested run inherits them: tags (as a sorted union), metadata and
 * configurable (merged, later wins), callbacks, signal and limits.
 */
export interface RunnableConfig {
  /** Labels for this run and its children; they appear on every event. */
  tags?: string[];
  /** Free-form data for this run and its children; keys starting with `__` stay internal. */
  metadata?: Record<string, unknown>;
  /** Functions that receive the same events `streamEvents` yields. */
  callbacks?: EventCallback[];
  /** The name this run reports (children keep their own). */
  runName?: string;
  /** The id this run reports (children get their own). */
  runId?: string;
  /** At most this many concurrent calls in `batch` and `map()`. */
  maxConcurrency?: number;
  /** How many times a lambda may return a runnable to run in its place (default 25). */
  recursionLimit?: number;
  /** Values for the configurable fields and alternatives of the chain. */
  configurable?: Record<string, unknown>;
  /**
   * Cancels the run and everything it started: an `AbortSignal`, or a
   * {@link CancelToken} (lighter; what the server gives each request). User
   * functions always see a standard `AbortSignal` here.
   */
  signal?: AbortSignal | CancelToken;
  /** Milliseconds after which the run is aborted with `RUNNEL_ERR_TIMEOUT`. */
  timeout?: number;
  /**
   * Called with the tokens each model call of the run spent at its provider
   * (cache hits spend none). Unlike callbacks, it leaves runs unobserved, so
   * streaming stays on its fast path: the way to meter tokens.
   */
  onUsage?: UsageHandler;
  /**
   * Called once per chat model call that went to its provider (cache hits do
   * not), when it ends: provider, model, duration, the error code of a call
   * that failed. Like `onUsage`, it leaves runs unobserved: the way to meter
   * model latency and errors.
   */
  onModelCall?: ModelCallHandler;
  /**
   * Called when a step saves something that outlives the run — a chat
   * history's turn — with the function that takes the save back. Whoever
   * answers for the run collects them (`Saves`): the server takes them back
   * when a request or a background run fails (a `/batch` item, a step after
   * the history), so an answer its client is told failed keeps nothing.
   * Like `onUsage`, it leaves runs unobserved.
   */
  onSave?: SaveHandler;
}

/**
 * The config a user function (a lambda, a generator, a tool) receives: its
 * run's values, with `signal` always a standard `AbortSignal`.
 */
export interface RunConfig extends Omit<RunnableConfig, 'signal'> {
  signal?: AbortSignal;
}

/**
 * Tokens one model call spent at its provider. The details, in LangChain's names, are parts of the counts
 * above them, present when the provider reported them non-zero: the input read from its prompt cache
 * (`cache_read`: OpenAI's `cached_tokens`, Anthropic's `cache_read_input_tokens`) or written to it
 * (`cache_creation`: Anthropic's), and the output spent reasoning (`reasoning`: OpenAI's `reasoning_tokens`).
 * Providers price them apart.
 */
export interface TokenUsage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  input_token_details?: { cache_read?: number; cache_creation?: number };
  output_token_details?: { reasoning?: number };
}

/** Receives the token usage of model calls (`RunnableConfig.onUsage`). */
export type UsageHandler = (usage: TokenUsage, model: { name: string }) => void;

/**
 * One chat model call, as `RunnableConfig.onModelCall` hears it: a call to its provider, or (`cached`) an
 * answer given without one — from the response cache, or shared by an identical call under way.
 */
export interface ModelCall {
  /** The provider's id (`openai`, `anthropic`, `fake`). */
  provider: string;
  /** The model the call asked for. */
  model: string;
  /** Seconds from the call's start until its answer ended or it failed. */
  seconds: number;
  /** The Runnel error code of a call that failed or was cut short (`RUNNEL_ERR_ABORTED`); absent on success. */
  error?: string;
  /** The tokens the provider reported spending, when it did. */
  usage?: TokenUsage;
  /** Why the provider said the answer ended, in its own words (`stop`, `length`, `end_turn`, `max_tokens`…); absent on failure. */
  finishReason?: string;
  /** True for an answer given without a call to the provider (`seconds` 0, no usage): count it as no request. */
  cached?: boolean;
}

/** Receives each chat model call (`RunnableConfig.onModelCall`). */
export type ModelCallHandler = (call: ModelCall) => void;

/** Takes a save back; settles once it is done, or handed to retries that go on after it. */
export type TakeBack = () => Promise<void>;

/** Receives each save a run makes, as the function that takes it back (`RunnableConfig.onSave`). */
export type SaveHandler = (takeBack: TakeBack) => void;

/**
 * Both handlers, each called once per report (a nested config adds its own to
 * the enclosing one's); one that throws does not keep the other from its report.
 */
function addUsageHandler(base: UsageHandler | undefined, added: UsageHandler | undefined): UsageHandler | undefined {
  if (added === undefined || added === base) return base;
  if (base === undefined) return added;
  return (usage, model) => {
    callQuietly((m) => base(usage, m), model);
    callQuietly((m) => added(usage, m), model);
  };
}

/** Both handlers of one argument (`onModelCall`, `onSave`), as {@link addUsageHandler} makes them. */
function addHandler<T>(base: ((value: T) => void) | undefined, added: ((value: T) => void) | undefined): ((value: T) => void) | undefined {
  if (added === undefined || added === base) return base;
  if (base === undefined) return added;
  return (value) => {
    callQuietly(base, value);
    callQuietly(added, value);
  };
}

/** The default `recursionLimit`. */
export const DEFAULT_RECURSION_LIMIT = 25;

/**
 * The resolved configuration a run hands its children. Immutable; a child
 * that changes something makes a new one.
 * @internal
 */
export interface Scope {
  readonly tags: readonly string[];
  readonly metadata: Readonly<Record<string, unknown>>;
  readonly configurable: Readonly<Record<string, unknown>>;
  readonly signal: Cancellation | undefined;
  readonly recursionLimit: number;
  readonly maxConcurrency: number | undefined;
  /** Where events go; `undefined` when nobody observes, so runs skip emitting. */
  readonly sink: EventSink | undefined;
  /** The run whose children receive this scope. */
  readonly parent: Run | undefined;
  /** For the next run only: its name, id, extra tags, call options, listeners. */
  readonly runName: string | undefined;
  readonly runId: string | undefined;
  readonly localTags: readonly string[] | undefined;
  readonly options: Readonly<Record<string, unknown>> | undefined;
  readonly listeners: RunListeners | undefined;
  /** Where model calls report the tokens they spent. */
  readonly onUsage: UsageHandler | undefined;
  /** Where model calls report themselves (provider, model, duration, error). */
  readonly onModelCall: ModelCallHandler | undefined;
  /** Where steps report what they saved, to be taken back. */
  readonly onSave: SaveHandler | undefined;
}

/**
 * Makes a scope from `base` with some fields changed. Every scope is made
 * here, with every key in the same order, so they all share one hidden class
 * and the hot paths that read them stay monomorphic.
 * @internal
 */
export function scopeWith(base: Scope, changes: Partial<Scope>): Scope {
  return {
    tags: 'tags' in changes ? (changes.tags as readonly string[]) : base.tags,
    metadata: 'metadata' in changes ? (changes.metadata as Scope['metadata']) : base.metadata,
    configurable: 'configurable' in changes ? (changes.configurable as Scope['configurable']) : base.configurable,
    signal: 'signal' in changes ? changes.signal : base.signal,
    recursionLimit: 'recursionLimit' in changes ? (changes.recursionLimit as number) : base.recursionLimit,
    maxConcurrency: 'maxConcurrency' in changes ? changes.maxConcurrency : base.maxConcurrency,
    sink: 'sink' in changes ? changes.sink : base.sink,
    parent: 'parent' in changes ? changes.parent : base.parent,
    runName: 'runName' in changes ? changes.runName : base.runName,
    runId: 'runId' in changes ? changes.runId : base.runId,
    localTags: 'localTags' in changes ? changes.localTags : base.localTags,
    options: 'options' in changes ? changes.options : base.options,
    listeners: 'listeners' in changes ? changes.listeners : base.listeners,
    onUsage: 'onUsage' in changes ? changes.onUsage : base.onUsage,
    onModelCall: 'onModelCall' in changes ? changes.onModelCall : base.onModelCall,
    onSave: 'onSave' in changes ? changes.onSave : base.onSave,
  };
}

/** The scope a run hands its children: inherited values, no one-shot values. @internal */
export function childScope(base: Scope, parent: Run, localTags: readonly string[] | undefined): Scope {
  return {
    tags: base.tags,
    metadata: base.metadata,
    configurable: base.configurable,
    signal: base.signal,
    recursionLimit: base.recursionLimit,
    maxConcurrency: base.maxConcurrency,
    sink: base.sink,
    parent,
    runName: undefined,
    runId: undefined,
    localTags,
    options: undefined,
    listeners: undefined,
    onUsage: base.onUsage,
    onModelCall: base.onModelCall,
    onSave: base.onSave,
  };
}

/** The scope of a top-level call with no config. */
export const ROOT_SCOPE: Scope = {
  tags: [],
  metadata: {},
  configurable: {},
  signal: undefined,
  recursionLimit: DEFAULT_RECURSION_LIMIT,
  maxConcurrency: undefined,
  sink: undefined,
  parent: undefined,
  runName: undefined,
  runId: undefined,
  localTags: undefined,
  options: undefined,
  listeners: undefined,
  onUsage: undefined,
  onModelCall: undefined,
  onSave: undefined,
};

/** Where a lambda's scope lives while its user function runs. @internal */
export const scopeStorage = new AsyncLocalStorage<Scope>();

/** The key under which a config handed to user code points at its scope. @internal */
export const SCOPE = Symbol('runnel.scope');

/** Sorted union of two tag lists, without duplicates. */
export function mergeTags(a: readonly string[] | undefined, b: readonly string[] | undefined): string[] {
  if (b === undefined || b.length === 0) return a === undefined ? [] : [...a];
  if (a === undefined || a.length === 0) return [...new Set(b)].sort();
  return [...new Set([...a, ...b])].sort();
}

/**
 * Merges configs left to right: tags as a sorted union, metadata and
 * configurable merged with later keys winning, callbacks concatenated,
 * `recursionLimit` only where it is not the default, anything else overwritten.
 *
 * @example
 * mergeConfigs({ tags: ['b'], metadata: { a: 1 } }, { tags: ['a'], metadata: { a: 2 } })
 * // { tags: ['a', 'b'], metadata: { a: 2 } }
 */
export function mergeConfigs(...configs: (RunnableConfig | undefined)[]): RunnableConfig {
  const out: RunnableConfig = {};
  for (const config of configs) {
    if (config === undefined) continue;
    for (const key of Object.keys(config) as (keyof RunnableConfig)[]) {
      const value: unknown = config[key];
      if (value === undefined) continue;
      switch (key) {
        case 'tags':
          out.tags = mergeTags(out.tags, value as string[]);
          break;
        case 'metadata':
          out.metadata = { ...out.metadata, ...(value as Record<string, unknown>) };
          break;
        case 'configurable':
          out.configurable = { ...out.configurable, ...(value as Record<string, unknown>) };
          break;
        case 'callbacks':
          out.callbacks = [...(out.callbacks ?? []), ...(value as EventCallback[])];
          break;
        case 'onUsage':
          out.onUsage = addUsageHandler(out.onUsage, value as UsageHandler);
          break;
        case 'onModelCall':
          out.onModelCall = addHandler(out.onModelCall, value as ModelCallHandler);
          break;
        case 'onSave':
          out.onSave = addHandler(out.onSave, value as SaveHandler);
          break;
        case 'recursionLimit':
          if (value !== DEFAULT_RECURSION_LIMIT || out.recursionLimit === undefined) out.recursionLimit = value as number;
          break;
        default:
          (out as Record<string, unknown>)[key] = value;
      }
    }
  }
  return out;
}

/** The scope's cancellation with a config's added: one alone stays as it is (a token stays light); several are combined. */
function signalFor(base: Cancellation | undefined, config: RunnableConfig): Cancellation | undefined {
  const signals: Cancellation[] = [];
  if (base !== undefined) signals.push(base);
  // A user function handing its own config on hands on its run's token: read as the token (reading the
  // config's `signal` would make the token's standard signal for nothing), or its standard signal, which is it.
  const added = config instanceof ScopedConfig && isCancelToken(config[SCOPE].signal) ? config[SCOPE].signal : config.signal;
  if (added !== undefined && added !== base && !(isCancelToken(base) && base.owns(added))) signals.push(added);
  if (config.timeout !== undefined && config.timeout > 0 && Number.isFinite(config.timeout)) {
    signals.push(AbortSignal.timeout(config.timeout));
  }
  if (signals.length <= 1) return signals[0];
  return AbortSignal.any(signals.map((signal) => toAbortSignal(signal)));
}

/**
 * Resolves a caller's config on top of an inherited scope (the enclosing
 * lambda's, found through AsyncLocalStorage, when the caller passes none).
 * @internal
 */
export function resolveScope(config: RunnableConfig | undefined, inherited?: Scope): Scope {
  const fromConfig = config === undefined ? undefined : (config as { [SCOPE]?: Scope })[SCOPE];
  const base = fromConfig ?? inherited ?? scopeStorage.getStore() ?? ROOT_SCOPE;
  if (config === undefined || config === null) return base;
  // A config handed to user code already carries its scope's callbacks: only new ones are added.
  const added = config.callbacks?.filter((callback) => !(base.sink?.hasCallback(callback) ?? false)) ?? [];
  const sink = added.length === 0 ? base.sink : EventSink.extend(base.sink, { callbacks: added });
  return scopeWith(base, {
    tags: config.tags === undefined ? base.tags : mergeTags(base.tags, config.tags),
    metadata: config.metadata === undefined ? base.metadata : { ...base.metadata, ...config.metadata },
    configurable: config.configurable === undefined ? base.configurable : { ...base.configurable, ...config.configurable },
    signal: signalFor(base.signal, config),
    recursionLimit: config.recursionLimit ?? base.recursionLimit,
    maxConcurrency: config.maxConcurrency ?? base.maxConcurrency,
    sink,
    runName: config.runName,
    runId: config.runId,
    localTags: undefined,
    options: undefined,
    listeners: undefined,
    onUsage: addUsageHandler(base.onUsage, config.onUsage),
    onModelCall: addHandler(base.onModelCall, config.onModelCall),
    onSave: addHandler(base.onSave, config.onSave),
  });
}

/**
 * Applies a config bound with `withConfig` under the scope of a call: the
 * call's metadata, configurable and limits win, tags are united, signals and
 * callbacks add up.
 * @internal
 */
export function bindScope(scope: Scope, bound: RunnableConfig): Scope {
  const added = bound.callbacks?.filter((callback) => !(scope.sink?.hasCallback(callback) ?? false)) ?? [];
  return scopeWith(scope, {
    tags: bound.tags === undefined ? scope.tags : mergeTags(scope.tags, bound.tags),
    metadata: bound.metadata === undefined ? scope.metadata : { ...bound.metadata, ...scope.metadata },
    configurable: bound.configurable === undefined ? scope.configurable : { ...bound.configurable, ...scope.configurable },
    signal: signalFor(scope.signal, bound),
    recursionLimit:
      scope.recursionLimit === DEFAULT_RECURSION_LIMIT ? (bound.recursionLimit ?? scope.recursionLimit) : scope.recursionLimit,
    maxConcurrency: scope.maxConcurrency ?? bound.maxConcurrency,
    sink: added.length === 0 ? scope.sink : EventSink.extend(scope.sink, { callbacks: added }),
    runName: scope.runName ?? bound.runName,
    runId: scope.runId ?? bound.runId,
    onUsage: addUsageHandler(scope.onUsage, bound.onUsage),
    onModelCall: addHandler(scope.onModelCall, bound.onModelCall),
    onSave: addHandler(scope.onSave, bound.onSave),
  });
}

/** A scope with one-shot values for the next run (a step's tag, a binding's options). @internal */
export function withOneShot(
  scope: Scope,
  extra: { localTags?: readonly string[]; options?: Record<string, unknown>; listeners?: RunListeners },
): Scope {
  return scopeWith(scope, {
    localTags: extra.localTags === undefined ? scope.localTags : [...(scope.localTags ?? []), ...extra.localTags],
    options: extra.options === undefined ? scope.options : { ...scope.options, ...extra.options },
    listeners: extra.listeners ?? scope.listeners,
  });
}

/**
 * The config handed to user functions: the scope's values (shared, not
 * copied: treat them as read-only), and a link back to the scope so that a
 * runnable called with this config joins the run as its child.
 * @internal
 */
/**
 * `signal` of a config whose run has a token: an own, enumerable accessor, so
 * the standard signal is made only when read, and a copy (`{...config}`)
 * still carries it.
 */
const TOKEN_SIGNAL: PropertyDescriptor = {
  get(this: ScopedConfig): AbortSignal | undefined {
    return toAbortSignal(this[SCOPE].signal);
  },
  enumerable: true,
  configurable: true,
};

class ScopedConfig implements RunConfig {
  /**
   * The run's signal, as a standard `AbortSignal` (a token's is made when user code first reads it).
   * Not a class field: a field is defined at construction, and turning it into the token's accessor then made
   * V8 keep every config as a slow dictionary object (about 0.4 µs a config, three an `/invoke` of three steps).
   */
  declare readonly signal: AbortSignal | undefined;
  readonly tags: string[];
  readonly metadata: Record<string, unknown>;
  readonly configurable: Record<string, unknown>;
  readonly recursionLimit: number;
  readonly maxConcurrency: number | undefined;
  readonly [SCOPE]: Scope;

  constructor(scope: Scope) {
    this.tags = scope.tags as string[];
    this.metadata = scope.metadata as Record<string, unknown>;
    this.configurable = scope.configurable as Record<string, unknown>;
    this.recursionLimit = scope.recursionLimit;
    this.maxConcurrency = scope.maxConcurrency;
    this[SCOPE] = scope;
    if (isCancelToken(scope.signal)) Object.defineProperty(this, 'signal', TOKEN_SIGNAL);
    else this.signal = scope.signal;
  }

  get onUsage(): UsageHandler | undefined {
    return this[SCOPE].onUsage;
  }

  get onModelCall(): ModelCallHandler | undefined {
    return this[SCOPE].onModelCall;
  }

  get onSave(): SaveHandler | undefined {
    return this[SCOPE].onSave;
  }

  get callbacks(): EventCallback[] | undefined {
    const callbacks = this[SCOPE].sink?.callbacks;
    return callbacks === undefined || callbacks.length === 0 ? undefined : [...callbacks];
  }
}

/** The public config a scope corresponds to, as handed to user functions. @internal */
export function configOf(scope: Scope): RunConfig {
  return new ScopedConfig(scope);
}
