/**
 * `withMessageHistory(runnable, {getHistory, ...})`: a chain that remembers.
 * The conversation is chosen by the configurable field `session_id`
 * (missing → 422) and scoped to the caller (the server's authenticated
 * identity is part of its key, so one key never reads another's history).
 *
 * Rules: history is saved only after a run succeeds — a streamed answer
 * whole, when the stream ends; an aborted or failed run saves nothing. Each
 * save is reported to the config's `onSave` with the means to take it back
 * (an answer that fails takes back what its runs saved).
 * Requests on one session run one after another in a process (the second
 * waits for the first to save), and each request's messages are appended in
 * one atomic write, so across replicas nothing interleaves or is lost.
 */
import { z, type ZodType } from 'zod';
import { abortError, ChunkSum, once, raceAbort, Runnable, RunnelError, type Cancellation, type Run, type TakeBack } from '../core/index.js';
import { AIMessage, BaseMessage, coerceMessages, HumanMessage } from '../messages/index.js';
import type { ConfigSpec } from '../core/index.js';
import { checkSessionId, SESSION_ID, type ChatMessageHistory } from './history.js';

/** Options of {@link withMessageHistory}. */
export interface WithHistoryOptions {
  /** The history of one conversation of one caller. */
  getHistory: (sessionId: string, caller: { identity: string }) => ChatMessageHistory;
  /** Where the new message is in an object input (default: the input is the message(s)). */
  inputMessagesKey?: string;
  /** Where the past messages go in an object input (default: before the new messages, in a message-list input). */
  historyMessagesKey?: string;
  /** Where the answer is in an object output (default: the output is the answer). */
  outputMessagesKey?: string;
}

function messagesOf(value: unknown, loc: string[]): BaseMessage[] {
  if (typeof value === 'string') return [new HumanMessage(value)];
  if (value instanceof BaseMessage) return [value];
  return coerceMessages(value, loc);
}

function answerOf(value: unknown, key: string | undefined): BaseMessage[] {
  const answer = key === undefined ? value : (value as Record<string, unknown> | undefined)?.[key];
  if (typeof answer === 'string') return [new AIMessage(answer)];
  if (answer instanceof BaseMessage) return [answer];
  if (Array.isArray(answer)) return coerceMessages(answer);
  throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'withMessageHistory: the chain answered with no message to save (set outputMessagesKey?)');
}

/**
 * Fails a run whose signal fired, whatever its chain returned: a step may end
 * "normally" when aborted (the model SDKs do), and its answer is then partial.
 */
function checkNotAborted(run: Run): void {
  const signal = run.signal;
  if (signal?.aborted === true) throw abortError(signal);
}

/** Hands a saved turn's take-back to whoever answers for the run (`RunnableConfig.onSave`), to run if the answer fails. */
function saved(run: Run, takeBack: TakeBack | void): void {
  if (takeBack !== undefined) run.scope.onSave?.(takeBack);
}

/** A runnable with chat history; see {@link withMessageHistory}. */
export class RunnableWithMessageHistory<I, O> extends Runnable<I, O> {
  readonly name = 'RunnableWithMessageHistory';
  readonly bound: Runnable<unknown, O>;
  private readonly options: WithHistoryOptions;
  private readonly queues = new Map<string, Promise<void>>();

  constructor(bound: Runnable<unknown, O>, options: WithHistoryOptions) {
    super();
    this.bound = bound;
    this.options = options;
  }

  override get inputSchema(): ZodType {
    const inner = this.bound.inputSchema;
    const key = this.options.historyMessagesKey;
    if (key !== undefined && inner instanceof z.ZodObject) return inner.omit({ [key]: true } as never);
    return inner;
  }

  override get outputSchema(): ZodType {
    return this.bound.outputSchema;
  }

  override _ownConfigSpecs(): ConfigSpec[] {
    return [{ id: 'session_id', name: 'Session ID', description: 'The conversation to continue', default: undefined, required: true, schema: z.string().regex(SESSION_ID) }];
  }

  override _children(): Runnable<never, unknown>[] {
    return [this.bound as Runnable<never, unknown>];
  }

  private session(run: Run): { key: string; history: ChatMessageHistory } {
    const given = run.scope.configurable.session_id;
    if (given === undefined || given === '') {
      throw new RunnelError('RUNNEL_ERR_CONFIG_INVALID', 'This chain keeps history: set config.configurable.session_id', {
        detail: [{ type: 'missing', loc: ['configurable', 'session_id'], msg: 'Field required' }],
      });
    }
    const sessionId = checkSessionId(given);
    const identity = typeof run.metadata.__identity === 'string' ? run.metadata.__identity : 'anonymous';
    return { key: `${identity}\u0000${sessionId}`, history: this.options.getHistory(sessionId, { identity }) };
  }

  /**
   * Waits for the session's earlier requests; the returned function lets the
   * next one go. A request aborted while it waits leaves the queue at once
   * (those after it still wait for the ones before it).
   */
  private async acquire(key: string, signal: Cancellation | undefined): Promise<() => void> {
    const previous = this.queues.get(key) ?? Promise.resolve();
    let settle!: () => void;
    const mine = new Promise<void>((resolve) => (settle = resolve));
    const tail = previous.then(() => mine);
    this.queues.set(key, tail);
    const release = (): void => {
      settle();
      if (this.queues.get(key) === tail) this.queues.delete(key);
    };
    try {
      await raceAbort(previous, signal);
    } catch (error) {
      // Left while the requests before it still run: its turn is let go, but the session's tail stays until they
      // end — dropped now, as `release` would, it let a request that came next run beside them.
      settle();
      void tail.then(() => {
        if (this.queues.get(key) === tail) this.queues.delete(key);
      });
      throw error;
    }
    return release;
  }

  private prepare(input: I, past: BaseMessage[]): { input: unknown; added: BaseMessage[] } {
    const { inputMessagesKey, historyMessagesKey } = this.options;
    const added = messagesOf(inputMessagesKey === undefined ? input : (input as Record<string, unknown>)[inputMessagesKey], inputMessagesKey === undefined ? [] : [inputMessagesKey]);
    if (historyMessagesKey !== undefined) return { input: { ...(input as object), [historyMessagesKey]: past }, added };
    return { input: [...past, ...added], added };
  }

  protected override async _call(input: I, run: Run): Promise<O> {
    const { key, history } = this.session(run);
    const release = await this.acquire(key, run.signal);
    try {
      const prepared = this.prepare(input, await history.getMessages());
      const output = await this.bound._invokeIn(prepared.input, run.scope);
      checkNotAborted(run);
      saved(run, await history.addMessages([...prepared.added, ...answerOf(output, this.options.outputMessagesKey)]));
      return output;
    } finally {
      release();
    }
  }

  protected override async *_stream(input: I, run: Run): AsyncGenerator<O> {
    const { key, history } = this.session(run);
    // Hold the session for the whole stream: the next request sees this answer.
    const release = await this.acquire(key, run.signal);
    // The answer's chunks added up (ChunkSum: message chunks in one pass once it ends; a concat per chunk re-read a
    // tool call's arguments so far at every token).
    const chunks = new ChunkSum<O>();
    try {
      const prepared = this.prepare(input, await history.getMessages());
      for await (const chunk of this.bound._streamIn(once(prepared.input), run.scope, { value: prepared.input })) {
        chunks.push(chunk);
        yield chunk;
      }
      checkNotAborted(run);
      saved(run, await history.addMessages([...prepared.added, ...answerOf(chunks.value(), this.options.outputMessagesKey)]));
    } finally {
      release();
    }
  }
}

/**
 * Wraps a chain so it continues a stored conversation.
 *
 * @example
 * const store = new MemoryHistoryStore();
 * const chat = withMessageHistory(prompt.pipe(model), {
 *   getHistory: (sessionId, { identity }) => store.history(`${identity}:${sessionId}`),
 *   inputMessagesKey: 'question',
 *   historyMessagesKey: 'history',
 * });
 * await chat.invoke({ question: 'Hi!' }, { configurable: { session_id: 's1' } });
 */
export function withMessageHistory<I, O>(runnable: Runnable<never, O>, options: WithHistoryOptions): RunnableWithMessageHistory<I, O> {
  return new RunnableWithMessageHistory<I, O>(runnable as unknown as Runnable<unknown, O>, options);
}
