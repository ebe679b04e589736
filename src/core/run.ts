/**
 * One execution of a runnable. A `Run` knows its place in the tree (parent,
 * tags, metadata), hands its children their scope, and emits its own start,
 * stream, end and error events. A run nobody observes emits nothing and never
 * even mints its id, which keeps an unobserved `invoke` close to the cost of
 * the functions it composes.
 */
import { randomUUID } from 'node:crypto';
import type { Cancellation } from './async.js';
import { abortError, isAbortError } from './errors.js';
import { childScope, type ModelCall, type Scope, type TokenUsage } from './config.js';
import { callQuietly, type EventSink, type RunInfo, type RunListeners, type RunType, type StreamEvent } from './events.js';

const State = { Created: 0, Started: 1, Ended: 2 } as const;
const EMPTY: Readonly<Record<string, unknown>> = Object.freeze({});

/**
 * Metadata without its internal keys (those starting with `__`: the server's caller identity, cache partition,
 * trace context), which never leave the process: the object itself when it has none.
 */
export function publicMetadata(metadata: Readonly<Record<string, unknown>>): Record<string, unknown> {
  let hasInternal = false;
  for (const key in metadata) {
    if (key.startsWith('__')) {
      hasInternal = true;
      break;
    }
  }
  if (!hasInternal) return metadata as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(metadata)) if (!key.startsWith('__')) out[key] = value;
  return out;
}

function errorMessage(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' ? `${code}: ${error.message}` : `${error.name}: ${error.message}`;
  }
  return String(error);
}

/** What a run asks of its runnable (`Runnable._eventMetadata`): metadata of its own for the run's events. */
interface MetadataSource {
  _eventMetadata?(options: Readonly<Record<string, unknown>>): Record<string, unknown>;
}

/** One execution of a runnable; see the module comment. @internal */
export class Run {
  readonly name: string;
  readonly runType: RunType;
  private readonly inherited: Scope;
  private _id: string | undefined;
  private _scope: Scope | undefined;
  private state: number = State.Created;
  private input: unknown = undefined;
  private hasInput = false;
  private startTime = 0;
  /**
   * This run's children that have started and not yet ended, while this run is observed: when it fails with
   * an abort, the ones still open fail first (see {@link Run.fail}).
   */
  private open: Set<Run> | undefined;
  /** What every event of this run repeats, computed on the first event. */
  private stamp: { tags: string[]; parentIds: string[]; metadata: Record<string, unknown> } | undefined;

  /** The runnable this run is of, asked for metadata of its own on this run's events (`Runnable._eventMetadata`). */
  private readonly owner: MetadataSource | undefined;

  constructor(name: string, runType: RunType, scope: Scope, owner?: MetadataSource) {
    this.name = scope.runName ?? name;
    this.runType = runType;
    this.inherited = scope;
    this._id = scope.runId;
    this.owner = owner;
  }

  /** This run's id (a UUID, made on first use unless the config gave one). */
  get id(): string {
    return (this._id ??= randomUUID());
  }

  get parent(): Run | undefined {
    return this.inherited.parent;
  }

  get sink(): EventSink | undefined {
    return this.inherited.sink;
  }

  /** What cancels this run (a token or a signal; `toAbortSignal` makes it a standard one for an SDK). */
  get signal(): Cancellation | undefined {
    return this.inherited.signal;
  }

  /** Call options bound to this run (`bind`), for components such as models. */
  get options(): Readonly<Record<string, unknown>> {
    return this.inherited.options ?? EMPTY;
  }

  get metadata(): Readonly<Record<string, unknown>> {
    return this.inherited.metadata;
  }

  /** The inherited tags and this run's own. */
  get tags(): readonly string[] {
    const { tags, localTags } = this.inherited;
    return localTags === undefined ? tags : [...tags, ...localTags];
  }

  private get listeners(): RunListeners | undefined {
    return this.inherited.listeners;
  }

  /** Ids of the enclosing runs, outermost first. */
  get parentIds(): string[] {
    const ids: string[] = [];
    for (let run = this.parent; run !== undefined; run = run.parent) ids.push(run.id);
    return ids.reverse();
  }

  /** True when events or listeners observe this run. */
  get observed(): boolean {
    return this.inherited.sink !== undefined || this.inherited.listeners !== undefined;
  }

  /** The scope this run hands its children. */
  get scope(): Scope {
    return (this._scope ??= childScope(this.inherited, this, undefined));
  }

  /** The scope for one child, with extra tags of its own (`seq:step:2`). */
  child(localTags: readonly string[]): Scope {
    return childScope(this.inherited, this, localTags);
  }

  get started(): boolean {
    return this.state !== State.Created;
  }

  /** Records input that arrived in chunks, for the end event of a streaming run. */
  setInput(input: unknown): void {
    this.input = input;
    this.hasInput = true;
  }

  /** Emits the start event once; `input` is included when the whole input is known. */
  start(...input: [] | [unknown]): void {
    if (this.state !== State.Created) return;
    this.state = State.Started;
    if (input.length > 0) this.setInput(input[0]);
    const parent = this.inherited.parent;
    if (parent?.observed === true) (parent.open ??= new Set()).add(this);
    if (this.listeners !== undefined) {
      this.startTime = Date.now();
      if (this.listeners.onStart !== undefined) callQuietly(this.listeners.onStart, this.info());
    }
    if (this.sink !== undefined) this.emit('start', input.length > 0 ? { input: input[0] } : {});
  }

  /** Emits one streamed chunk. */
  chunk(chunk: unknown): void {
    if (this.state === State.Created) this.start();
    // A prompt's, a retriever's and a tool's output is one value, not a stream: they report start and end only
    // (LangChain has no on_prompt_stream, on_retriever_stream or on_tool_stream, nor a tool's streamed_output).
    if (this.sink?.streams === true && this.runType !== 'prompt' && this.runType !== 'retriever' && this.runType !== 'tool') this.emit('stream', { chunk });
  }

  /** Emits the end event once. */
  end(output: unknown): void {
    if (this.state === State.Ended) return;
    if (this.state === State.Created) this.start();
    this.state = State.Ended;
    this.inherited.parent?.open?.delete(this);
    if (this.sink !== undefined) this.emit('end', this.hasInput ? { output, input: this.input } : { output });
    if (this.listeners?.onEnd !== undefined) callQuietly(this.listeners.onEnd, { ...this.info(), output, endTime: Date.now() });
  }

  /**
   * Emits the error event once. An abort races every level of a run at once, and the outermost run hears it
   * first; its children still open, cut by the same abort, fail before it does (theirs first, each in the order
   * they started), so a run's events and spans never end after its parent's. A child still open when its parent
   * fails for another reason is left to end on its own unless its own signal has fired.
   */
  fail(error: unknown): void {
    if (this.state === State.Ended) return;
    if (this.state === State.Created) this.start();
    this.state = State.Ended;
    this.inherited.parent?.open?.delete(this);
    const open = this.open;
    if (open !== undefined && open.size > 0) {
      const aborted = isAbortError(error);
      for (const child of [...open]) {
        const signal = child.signal;
        if (signal?.aborted === true) child.fail(abortError(signal));
        else if (aborted) child.fail(error);
      }
    }
    if (this.sink !== undefined) {
      const data = this.hasInput ? { error: errorMessage(error), input: this.input } : { error: errorMessage(error) };
      this.emit('error', data);
    }
    if (this.listeners?.onError !== undefined) callQuietly(this.listeners.onError, { ...this.info(), error, endTime: Date.now() });
  }

  /** Reports the tokens a model call spent to the run's usage handler (`RunnableConfig.onUsage`). */
  reportUsage(usage: TokenUsage): void {
    const handler = this.inherited.onUsage;
    if (handler !== undefined) callQuietly((model) => handler(usage, model), { name: this.name });
  }

  /** Reports one chat model call to its provider to the run's handler (`RunnableConfig.onModelCall`). */
  reportModelCall(call: ModelCall): void {
    const handler = this.inherited.onModelCall;
    if (handler !== undefined) callQuietly(handler, call);
  }

  /** Emits a custom event under this run (`dispatchCustomEvent`). */
  custom(name: string, data: unknown): void {
    this.sink?.emit(this.event('on_custom_event', name, data as StreamEvent['data']));
  }

  private emit(phase: string, data: StreamEvent['data']): void {
    (this.sink as EventSink).emit(this.event(`on_${this.runType}_${phase}`, this.name, data));
  }

  private event(event: string, name: string, data: StreamEvent['data']): StreamEvent {
    const stamp = (this.stamp ??= { tags: this.tags as string[], parentIds: this.parentIds, metadata: this.eventMetadata() });
    return { event, name, run_id: this.id, parent_ids: stamp.parentIds, tags: stamp.tags, metadata: stamp.metadata, data };
  }

  private eventMetadata(): Record<string, unknown> {
    const inherited = publicMetadata(this.metadata);
    // Asked of the runnable itself, not a function taken from it: a configured copy (`configurableFields`) has
    // other fields than the runnable it was copied from.
    const own = this.owner?._eventMetadata?.(this.options);
    return own === undefined ? inherited : { ...inherited, ...own };
  }

  private info(): RunInfo {
    return {
      id: this.id,
      name: this.name,
      runType: this.runType,
      tags: [...this.tags],
      metadata: this.eventMetadata(),
      input: this.input,
      startTime: this.startTime,
    };
  }
}
