/**
 * The events every run emits, in the v2 shape of LangServe's `stream_events`,
 * and the sink they are emitted into. A run emits into the sink of its scope;
 * `streamEvents`, `streamLog` and config `callbacks` are all readers of it.
 */

/** What kind of component a run is; events are named after it (`on_prompt_start`). */
export type RunType = 'chain' | 'chat_model' | 'llm' | 'prompt' | 'parser' | 'tool' | 'retriever' | 'embedding';

/** One event of a run, as `streamEvents` yields it and `/stream_events` sends it. */
export interface StreamEvent {
  /** `on_{runType}_{start|stream|end|error}` or `on_custom_event`. */
  event: string;
  /** The run's name (for custom events, the event's name). */
  name: string;
  run_id: string;
  /** Ids of the enclosing runs, outermost first; empty for the root. */
  parent_ids: string[];
  tags: string[];
  /** The run's metadata without internal keys (those starting with `__`). */
  metadata: Record<string, unknown>;
  /** `input` on start (when known) and on end/error; `chunk` on stream; `output` on end; `error` on error. */
  data: { input?: unknown; output?: unknown; chunk?: unknown; error?: string };
}

/** A function that receives every event of a run and its children. */
export type EventCallback = (event: StreamEvent) => void | Promise<void>;

const LIFECYCLE = Symbol('runnel.lifecycleCallback');

/**
 * Marks a callback as wanting runs' starts, ends and errors only: while only such callbacks observe a run,
 * its chunks are not emitted as events (a model answers in one piece rather than token by token), which is
 * what makes tracing cheap. It may still receive stream events when another reader asks for them.
 *
 * @example
 * const config = { callbacks: [lifecycleCallback((event) => spans.record(event))] };
 */
export function lifecycleCallback(callback: EventCallback): EventCallback {
  return Object.assign(callback, { [LIFECYCLE]: true });
}

/** What a `withListeners` listener learns about its run. */
export interface RunInfo {
  id: string;
  name: string;
  runType: RunType;
  tags: string[];
  metadata: Record<string, unknown>;
  input: unknown;
  output?: unknown;
  error?: unknown;
  startTime: number;
  endTime?: number;
}

/** Listeners for one runnable's own runs (see `withListeners`). */
export interface RunListeners {
  onStart?: (run: RunInfo) => void | Promise<void>;
  onEnd?: (run: RunInfo) => void | Promise<void>;
  onError?: (run: RunInfo) => void | Promise<void>;
}

/** Include/exclude filters of `streamEvents` and `streamLog`, by run name, run type and tag. */
export interface EventFilters {
  includeNames?: string[] | null;
  includeTypes?: string[] | null;
  includeTags?: string[] | null;
  excludeNames?: string[] | null;
  excludeTypes?: string[] | null;
  excludeTags?: string[] | null;
}

const ignoreRejection = (): void => {};

/** Calls an observer; its exceptions and rejections never reach the run it observes. @internal */
export function callQuietly<T>(callback: (value: T) => unknown, value: T): void {
  try {
    const result = callback(value);
    if (result !== undefined && typeof (result as Promise<void>).catch === 'function') {
      (result as Promise<void>).catch(ignoreRejection);
    }
  } catch {
    // A failing observer must not fail the run it observes.
  }
}

/**
 * Where runs emit events: stream readers (`channels`) and user `callbacks`.
 * Immutable; a nested `streamEvents` or extra callbacks extend a copy, so an
 * outer reader still sees the inner runs.
 * @internal
 */
export class EventSink {
  /** True when some reader wants each streamed chunk (a channel, or a callback not marked lifecycle-only). */
  readonly streams: boolean;

  private constructor(
    readonly channels: readonly ((event: StreamEvent, time: number) => void)[],
    readonly callbacks: readonly EventCallback[],
  ) {
    this.streams = channels.length > 0 || callbacks.some((callback) => !(LIFECYCLE in callback));
  }

  static extend(
    base: EventSink | undefined,
    add: { channel?: (event: StreamEvent, time: number) => void; callbacks?: readonly EventCallback[] },
  ): EventSink {
    const channels = base?.channels ?? [];
    const callbacks = base?.callbacks ?? [];
    return new EventSink(
      add.channel === undefined ? channels : [...channels, add.channel],
      add.callbacks === undefined ? callbacks : [...callbacks, ...add.callbacks],
    );
  }

  hasCallback(callback: EventCallback): boolean {
    return this.callbacks.includes(callback);
  }

  emit(event: StreamEvent): void {
    const time = Date.now();
    for (const channel of this.channels) channel(event, time);
    for (const callback of this.callbacks) callQuietly(callback, event);
  }
}

function listed(list: string[] | null | undefined): list is string[] {
  return list !== undefined && list !== null && list.length > 0;
}

/**
 * Builds the predicate for {@link EventFilters}: an event passes when it
 * matches some include (or none is given) and no exclude.
 */
export function eventFilter(filters: EventFilters | undefined): ((event: StreamEvent, runType: string) => boolean) | undefined {
  if (filters === undefined) return undefined;
  const { includeNames, includeTypes, includeTags, excludeNames, excludeTypes, excludeTags } = filters;
  const hasInclude = listed(includeNames) || listed(includeTypes) || listed(includeTags);
  const hasExclude = listed(excludeNames) || listed(excludeTypes) || listed(excludeTags);
  if (!hasInclude && !hasExclude) return undefined;
  return (event, runType) => {
    if (hasInclude) {
      const included =
        (includeNames?.includes(event.name) ?? false) ||
        (includeTypes?.includes(runType) ?? false) ||
        event.tags.some((tag) => includeTags?.includes(tag) ?? false);
      if (!included) return false;
    }
    if (!hasExclude) return true;
    return !(
      (excludeNames?.includes(event.name) ?? false) ||
      (excludeTypes?.includes(runType) ?? false) ||
      event.tags.some((tag) => excludeTags?.includes(tag) ?? false)
    );
  };
}

/** The run type an event belongs to, read from its name (`on_chat_model_end` → `chat_model`). */
export function runTypeOf(event: StreamEvent): string {
  if (event.event === 'on_custom_event') return 'custom';
  const name = event.event;
  return name.slice(3, name.lastIndexOf('_'));
}
