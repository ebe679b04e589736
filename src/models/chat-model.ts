/**
 * `ChatModel`: a chat model as a runnable. It holds a provider (OpenAI,
 * Anthropic, a fake) and turns the provider's stream into invoke, stream,
 * batch and `on_chat_model_*` events, with the standard parameters, tool
 * binding, structured output, a response cache, the run's AbortSignal handed
 * to the provider, and an idle timeout between streamed chunks.
 */
import { z, type ZodType } from 'zod';
import { runTraceHeaders } from '../observability/propagation.js';
import {
  RunnableLambda,
  onAbort,
  raceAbort,
  Runnable,
  RunnelError,
  toJsonSchema,
  IdleGuard,
  CancelToken,
  toAbortSignal,
  type ConfigSpec,
  type Run,
  type RunType,
} from '../core/index.js';
import {
  addUsage,
  type AIMessage,
  AIMessageChunk,
  aiMessageOutputSchema,
  BaseMessage,
  coerceMessages,
  HumanMessage,
  messagesSchema,
  type UsageMetadata,
} from '../messages/index.js';
import { isPromptValue, type PromptValue } from '../prompts/index.js';
import { cacheKey, type ModelCache } from './cache.js';
import { finishedWhole } from './finish.js';
import { providerError, sendsNothing, sentNothing } from './errors.js';
import type { CallParams, ChatCallOptions, ChatProvider, ChatRequest, ToolChoice, ToolDefinition } from './types.js';

/** What a chat model accepts: a string, a prompt value, or a list of messages. */
export type ChatModelInput = string | PromptValue | BaseMessage[] | unknown[];

/** The standard options of every chat model. */
export interface ChatModelOptions {
  /** The provider's model name. */
  model?: string;
  temperature?: number;
  maxTokens?: number;
  stop?: string[];
  /** Milliseconds the provider has to start answering (the SDK's request timeout). */
  timeout?: number;
  /** Retries of rate limits and 5xx answers, with the provider's `retry-after` (default 2). */
  maxRetries?: number;
  /** Milliseconds a stream may go without a chunk before it fails with `RUNNEL_ERR_PROVIDER_TIMEOUT` (default 60,000). */
  streamIdleTimeoutMs?: number;
  /**
   * The most chunks one answer may stream (default 200,000: past every provider's output limit, a chunk a token
   * or more). Past it the provider's request is closed and the call fails `RUNNEL_ERR_PROVIDER_ANSWER_TOO_LONG`:
   * an upstream that never ends its stream would otherwise be read, its chunks held, for as long as it streamed.
   */
  maxAnswerChunks?: number;
  /**
   * The most characters one answer may stream, its text and its tool calls' arguments (default 4,000,000: eight
   * times the longest answer any provider gives). Past it the call fails as past `maxAnswerChunks`: an upstream
   * sending wide chunks would otherwise be held whole long before it reached their count.
   */
  maxAnswerChars?: number;
  /** Where answers are cached; nothing is cached without one. */
  cache?: ModelCache;
}

/** Something `bindTools` accepts: a tool (name, description, zod schema) or a ready definition. */
export type ToolLike = ToolDefinition | { name: string; description?: string; schema: ZodType };

/** Reports the usage the provider gave across `chunks`, if any, to the run's usage handler; returns it. */
function reportSpent(run: Run, chunks: readonly AIMessageChunk[]): UsageMetadata | undefined {
  const usage = chunks.reduce<UsageMetadata | undefined>((sum, chunk) => addUsage(sum, chunk.usage_metadata), undefined);
  if (usage !== undefined) run.reportUsage(usage);
  return usage;
}

/** Whether the answer these chunks make has a tool call whose arguments do not parse (merged only when it has tool calls). */
function malformedCalls(chunks: readonly AIMessageChunk[]): boolean {
  if (!chunks.some((chunk) => chunk.tool_call_chunks.length > 0 || chunk.invalid_tool_calls.length > 0)) return false;
  return AIMessageChunk.merge(chunks).invalid_tool_calls.length > 0;
}

/** What a chunk adds to its answer's length: its text and its tool calls' arguments. */
function charsOf(chunk: AIMessageChunk): number {
  const { content } = chunk;
  let chars = 0;
  if (typeof content === 'string') chars = content.length;
  else for (const part of content) if (part.type === 'text' && typeof part.text === 'string') chars += part.text.length;
  for (const call of chunk.tool_call_chunks) chars += call.args?.length ?? 0;
  return chars;
}

/** Why the provider said an answer ended (`finish_reason`, Anthropic's `stop_reason` at `message_stop`); undefined while it has not. */
function finishReason(chunks: readonly AIMessageChunk[]): string | undefined {
  for (let i = chunks.length - 1; i >= 0; i--) {
    const reason = (chunks[i] as AIMessageChunk).response_metadata.finish_reason;
    if (typeof reason === 'string' && reason !== '') return reason;
  }
  return undefined;
}

/** Whether the answer is a refusal (OpenAI's `refusal`, streamed in place of content): a filter's, as Anthropic's is. */
function refused(chunks: readonly AIMessageChunk[]): boolean {
  return chunks.some((chunk) => chunk.additional_kwargs.refusal !== undefined);
}

/**
 * Whether the answer says anything: text or a tool call. A stream always has chunks (the role's, the usage's),
 * and a model that ends its turn at once (Claude's empty `end_turn`, say) gave no answer a retry should get again.
 */
function saysSomething(chunks: readonly AIMessageChunk[]): boolean {
  return chunks.some((chunk) => chunk.text.trim() !== '' || chunk.tool_call_chunks.length > 0 || chunk.tool_calls.length > 0);
}

/**
 * Whether an answer is one the cache stores: the provider said the model finished it (not cut by a token
 * limit, a filter or a pause: passed on with its reason, but the next identical call asks the provider
 * again; nor ended for a reason Runnel does not know, nor without one), not a refusal, not empty, its tool
 * calls whole. A stored entry that is not so (planted, or written by an earlier version) is a miss.
 */
function storable(chunks: readonly AIMessageChunk[]): boolean {
  return finishedWhole(finishReason(chunks)) && !refused(chunks) && saysSomething(chunks) && !malformedCalls(chunks);
}

/**
 * What an identical call under way hands to the calls waiting on it: its answer; its failure (a provider's
 * error, which they share, as they asked the same at the same time); `lead` when the leader's own caller
 * left (one of them leads now, and the others wait on it); or nothing, when its tool calls did not parse —
 * they then call for themselves.
 */
type Shared = { chunks: AIMessageChunk[] } | { error: RunnelError } | 'lead' | undefined;

/** A leader's failure, as its waiters take it: a provider's error, shared; the leader's own cancellation, `lead`. */
function sharedFailure(failure: RunnelError | undefined, run: Run): Shared {
  if (failure === undefined || run.signal?.aborted === true || failure.code === 'RUNNEL_ERR_ABORTED' || failure.code === 'RUNNEL_ERR_TIMEOUT') return 'lead';
  return { error: failure };
}

/** Whether the call's chain can use the answer (`ChatCallOptions.accept`; without it, any answer). */
function accepted(options: Readonly<Record<string, unknown>>, chunks: readonly AIMessageChunk[]): boolean {
  const accept = (options as ChatCallOptions).accept;
  if (accept === undefined) return true;
  try {
    return accept((chunks.length === 0 ? new AIMessageChunk('') : AIMessageChunk.merge([...chunks])).toMessage()) === true;
  } catch {
    return false;
  }
}

/**
 * A streamed call's request. Its `AbortSignal` is made when the provider first reads it (an SDK does; a fake
 * need not): an own, enumerable property, so a copy of the request (`{ ...request }`) has it, and a provider
 * may give its own (set, or defined anew: a narrowed signal). `cancellation` is the token only while
 * `signal` is the request's own: not enumerable, so a copy does not carry it, and gone once the provider
 * gives a signal of its own, so the provider is read by the signal it gave.
 */
function providerRequest(messages: BaseMessage[], params: CallParams, cancellation: CancelToken, headers: Record<string, string> | undefined): ChatRequest {
  let given: AbortSignal | undefined;
  const request = { messages, params, headers } as ChatRequest;
  const signal = {
    get(this: ChatRequest): AbortSignal {
      return given ?? cancellation.signal;
    },
    set(this: ChatRequest, value: AbortSignal): void {
      // Set on the request itself (a sealed one too); on an object made from it, that object's own.
      if (this === request) given = value;
      else Object.defineProperty(this, 'signal', { value, writable: true, enumerable: true, configurable: true });
    },
  };
  Object.defineProperty(request, 'signal', { ...signal, enumerable: true, configurable: true });
  Object.defineProperty(request, 'cancellation', {
    get(this: ChatRequest): CancelToken | undefined {
      return this === request && given === undefined && Object.getOwnPropertyDescriptor(request, 'signal')?.get === signal.get ? cancellation : undefined;
    },
    enumerable: false,
    configurable: true,
  });
  return request;
}

const DONE_CHUNK: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/**
 * A cached answer as a stream: the chunks it was stored as. An answer stored
 * in one piece (a provider that answered whole) is cut into word tokens again,
 * so a cached answer streams the way a fresh one does; the last chunk keeps
 * the tool calls, metadata and usage, and the chunks add up to the stored answer.
 */
function replay(chunks: AIMessageChunk[]): AIMessageChunk[] {
  const only = chunks.length === 1 ? chunks[0] : undefined;
  if (only === undefined || typeof only.content !== 'string') return chunks;
  const tokens = only.content.match(/\s*\S+|\s+$/g);
  if (tokens === null || tokens.length < 2) return chunks;
  const { id, name } = only;
  return [
    ...tokens.map((token) => new AIMessageChunk({ content: token, id, name })),
    new AIMessageChunk({
      content: '',
      id,
      name,
      additional_kwargs: only.additional_kwargs,
      response_metadata: only.response_metadata,
      tool_calls: only.tool_calls,
      invalid_tool_calls: only.invalid_tool_calls,
      usage_metadata: only.usage_metadata,
    }),
  ];
}

/** Converts a tool-like into the definition sent to the provider. */
export function toToolDefinition(tool: ToolLike): ToolDefinition {
  if ('parameters' in tool) return tool;
  const parameters = toJsonSchema(tool.schema, { io: 'input' });
  return { name: tool.name, description: tool.description ?? '', parameters };
}

/** The messages of a chat model's input. */
export function toMessages(input: unknown): BaseMessage[] {
  if (typeof input === 'string') return [new HumanMessage(input)];
  if (isPromptValue(input)) return input.toMessages();
  if (input instanceof BaseMessage) return [input];
  if (Array.isArray(input)) return coerceMessages(input);
  if (input !== null && typeof input === 'object') {
    // A prompt value that arrived as JSON ({type: 'ChatPromptValueConcrete', messages} or {type: 'StringPromptValue', text}).
    const value = input as { type?: unknown; messages?: unknown; text?: unknown };
    if (value.type === 'ChatPromptValueConcrete' && Array.isArray(value.messages)) return coerceMessages(value.messages, ['messages']);
    if (value.type === 'StringPromptValue' && typeof value.text === 'string') return [new HumanMessage(value.text)];
  }
  throw new RunnelError('RUNNEL_ERR_INPUT_INVALID', 'A chat model takes a string, a prompt value or a list of messages', {
    detail: [{ type: 'model_input', loc: [], msg: 'Expected a string, a prompt value or a list of messages' }],
  });
}

/** `withStructuredOutput`'s step that reads the tool call: a parser, as its events and filters name it. */
class ToolCallParser<T> extends RunnableLambda<AIMessage, T> {
  override readonly runType: RunType = 'parser';
}

/**
 * A chat model. Providers' classes (`ChatOpenAI`, `ChatAnthropic`, the fakes)
 * give it a provider and their options; everything else is here.
 */

export class ChatModel extends Runnable<ChatModelInput, AIMessage, ChatCallOptions> {
  readonly name: string;
  override readonly runType: RunType = 'chat_model';
  readonly provider: ChatProvider;
  model: string;
  temperature: number | undefined;
  maxTokens: number | undefined;
  stop: string[] | undefined;
  streamIdleTimeoutMs: number;
  maxAnswerChunks: number;
  maxAnswerChars: number;
  cache: ModelCache | undefined;
  /** Calls under way per cache key: identical concurrent misses wait for the first (single flight). */
  private readonly inflight = new Map<string, Promise<Shared>>();

  constructor(provider: ChatProvider, options: ChatModelOptions & { name: string; defaultModel: string }) {
    super();
    this.provider = provider;
    this.name = options.name;
    this.model = options.model ?? options.defaultModel;
    this.temperature = options.temperature;
    this.maxTokens = options.maxTokens;
    this.stop = options.stop;
    this.streamIdleTimeoutMs = options.streamIdleTimeoutMs ?? 60_000;
    this.maxAnswerChunks = options.maxAnswerChunks ?? 200_000;
    if (!Number.isSafeInteger(this.maxAnswerChunks) || this.maxAnswerChunks < 1) {
      throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `${this.name}: maxAnswerChunks must be a whole number of 1 or more`);
    }
    this.maxAnswerChars = options.maxAnswerChars ?? 4_000_000;
    if (!Number.isSafeInteger(this.maxAnswerChars) || this.maxAnswerChars < 1) {
      throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `${this.name}: maxAnswerChars must be a whole number of 1 or more`);
    }
    this.cache = options.cache;
  }

  override get inputSchema(): ZodType {
    return z.union([z.string(), messagesSchema, z.object({ type: z.enum(['ChatPromptValueConcrete']), messages: messagesSchema }), z.object({ type: z.enum(['StringPromptValue']), text: z.string() })]);
  }

  override get outputSchema(): ZodType {
    return aiMessageOutputSchema;
  }

  /** With a cache, `configurable.cache = false` bypasses it for a call. */
  override _ownConfigSpecs(): ConfigSpec[] {
    if (this.cache === undefined) return [];
    return [{ id: 'cache', name: 'Use the response cache', description: 'false answers without the response cache (nor stores the answer)', default: true, schema: z.boolean() }];
  }

  /** LangChain's tracing metadata of a chat model call, which tracing UIs group and filter by. */
  override _eventMetadata(options: Readonly<Record<string, unknown>>): Record<string, unknown> {
    const params = this.callParams(options);
    return {
      ls_provider: this.provider.id,
      ls_model_name: params.model,
      ls_model_type: 'chat',
      ...(params.temperature === undefined ? {} : { ls_temperature: params.temperature }),
      ...(params.maxTokens === undefined ? {} : { ls_max_tokens: params.maxTokens }),
      ...(params.stop === undefined ? {} : { ls_stop: params.stop }),
    };
  }

  protected override _eventInput(input: ChatModelInput): unknown {
    try {
      return { messages: [toMessages(input)] };
    } catch {
      return input;
    }
  }

  /** The parameters of a call: the model's own, overridden by the call's options. */
  callParams(options: Readonly<Record<string, unknown>>): CallParams {
    const o = options as ChatCallOptions;
    return {
      model: this.model,
      temperature: this.temperature,
      maxTokens: this.maxTokens,
      stop: o.stop ?? this.stop,
      tools: o.tools,
      toolChoice: o.toolChoice,
      responseFormat: o.responseFormat,
    };
  }

  protected override async _call(input: ChatModelInput, run: Run): Promise<AIMessage> {
    // Nobody reads its tokens (no events, or lifecycle-only callbacks such as tracing): one piece, where the provider can.
    if (run.sink?.streams !== true && this.provider.generate !== undefined) return (await this.generateWhole(input, run)).toMessage();
    const chunks: AIMessageChunk[] = [];
    for await (const chunk of this.generate(input, run)) {
      // Observed runs (streamEvents) stream even under invoke, so tokens show up as they come.
      if (run.sink?.streams === true) run.chunk(chunk);
      chunks.push(chunk);
    }
    return (chunks.length === 0 ? new AIMessageChunk('') : AIMessageChunk.merge(chunks)).toMessage();
  }

  protected override _stream(input: ChatModelInput, run: Run): AsyncGenerator<AIMessageChunk> {
    return this.generate(input, run);
  }

  /** The request of a call, and its cache entry. */
  private prepare(input: ChatModelInput, run: Run): { messages: BaseMessage[]; params: CallParams; cache: ModelCache | undefined; key: string } {
    const messages = toMessages(input);
    const params = this.callParams(run.options);
    const bypass = (run.options as { cache?: unknown }).cache === false || run.scope.configurable.cache === false;
    const cache = bypass ? undefined : this.cache;
    // A chain that scopes its cache by caller (`defineChain({cacheScope: 'caller'})`) puts the caller in the key.
    const partition = run.metadata.__cache_partition;
    const key = cache === undefined ? '' : cacheKey(this.provider.id, params, messages, typeof partition === 'string' ? partition : undefined, this.provider.endpoint);
    return { messages, params, cache, key };
  }

  /**
   * The cached answer, or the answer of an identical call already under way;
   * otherwise this call leads — taken before any await, so concurrent calls
   * find it — and `flight` hands its outcome to the ones waiting ({@link Shared}).
   */
  private async lookupOrLead(cache: ModelCache, key: string, run: Run, model: string): Promise<{ hit?: AIMessageChunk[]; flight?: (outcome: Shared) => void }> {
    const signal = run.signal;
    let pending = this.inflight.get(key);
    while (pending !== undefined) {
      // A waiter aborted while the leader answers stops waiting at once.
      const shared = await raceAbort(pending, signal);
      if (shared === undefined) break;
      if (shared === 'lead') {
        // The leader's caller left: the first waiter to wake leads (it finds no call under way, and takes the
        // lead before any await), and the others wait on it.
        pending = this.inflight.get(key);
        continue;
      }
      if ('chunks' in shared) return { hit: shared.chunks };
      // The leader's provider failed: so does this call, at once (a copy each: each request tells its own),
      // heard as an answer given without a call — unless the leader's was refused before anything was sent,
      // which is heard by no one (and its copy marked so too).
      const copy = new RunnelError(shared.error.code, shared.error.message, { cause: shared.error.cause, detail: shared.error.detail });
      if (sentNothing(shared.error)) throw sendsNothing(copy);
      run.reportModelCall({ provider: this.provider.id, model, seconds: 0, cached: true, error: shared.error.code });
      throw copy;
    }
    let settle!: (outcome: Shared) => void;
    const mine = new Promise<Shared>((resolve) => (settle = resolve));
    this.inflight.set(key, mine);
    const flight = (outcome: Shared): void => {
      if (this.inflight.get(key) === mine) this.inflight.delete(key);
      settle(outcome);
    };
    const hit = await cache.lookup(key).catch(() => undefined);
    // An entry that would not be stored today (written by an earlier version, or not by Runnel: cut at a limit,
    // without a finish reason, with tool calls that do not parse, or one the chain cannot use) is a miss: the
    // provider is asked, and its answer replaces it.
    if (hit !== undefined && storable(hit) && accepted(run.options, hit)) {
      flight({ chunks: hit });
      return { hit };
    }
    return { flight };
  }

  /** The provider's whole answer in one piece (see `ChatProvider.generate`), cached like a stream of one chunk. */
  private async generateWhole(input: ChatModelInput, run: Run): Promise<AIMessageChunk> {
    const { messages, params, cache, key } = this.prepare(input, run);
    const { hit, flight } = cache === undefined ? { hit: undefined, flight: undefined } : await this.lookupOrLead(cache, key, run, params.model);
    if (hit !== undefined) {
      this.reportCached(run, params.model, hit);
      return hit.length === 0 ? new AIMessageChunk('') : AIMessageChunk.merge(hit);
    }
    const signal = toAbortSignal(run.signal) ?? new AbortController().signal;
    let answer: AIMessageChunk | undefined;
    let failed: RunnelError | undefined;
    const began = performance.now();
    try {
      answer = await (this.provider.generate as (request: ChatRequest) => Promise<AIMessageChunk>)({ messages, params, signal, headers: runTraceHeaders(run) });
    } catch (error) {
      failed = providerError(this.name, error, run.signal);
      this.reportCall(run, { model: params.model, began, error: failed.code, failure: failed });
      throw failed;
    } finally {
      flight?.(answer === undefined ? sharedFailure(failed, run) : answer.invalid_tool_calls.length > 0 ? undefined : { chunks: [answer] });
    }
    if (answer.usage_metadata !== undefined) run.reportUsage(answer.usage_metadata);
    const failure = signal.aborted ? providerError(this.name, signal.reason, run.signal) : undefined;
    const reason = finishReason([answer]);
    this.reportCall(run, { model: params.model, began, error: failure?.code, usage: answer.usage_metadata, finishReason: failure === undefined ? reason : undefined });
    if (failure !== undefined) throw failure;
    // Not awaited: storing is best effort, and a slow cache must not hold the answer back. Stored only when the
    // provider said the model finished it, as a stream's answer.
    if (cache !== undefined && storable([answer]) && accepted(run.options, [answer])) void cache.update(key, [answer]).catch(() => undefined);
    return answer;
  }

  /**
   * The answer as a stream: from the cache or an identical call under way when there is one (a generator),
   * else straight from the provider ({@link providerStream}, without a generator's hops on every token).
   */
  private generate(input: ChatModelInput, run: Run): AsyncGenerator<AIMessageChunk> {
    if (this.cache === undefined) return this.providerStream(input, run, undefined);
    return this.generateCached(input, run);
  }

  private async *generateCached(input: ChatModelInput, run: Run): AsyncGenerator<AIMessageChunk> {
    const prepared = this.prepare(input, run);
    const { cache, key } = prepared;
    const { hit, flight } = cache === undefined ? { hit: undefined, flight: undefined } : await this.lookupOrLead(cache, key, run, prepared.params.model);
    if (hit !== undefined) {
      this.reportCached(run, prepared.params.model, hit);
      yield* replay(hit);
      return;
    }
    yield* this.providerStream(input, run, { prepared, flight });
  }

  /**
   * One call to the provider, streamed: each chunk as the provider sends it, within the idle timeout; the
   * run's cancellation closes the provider's request. The answer counts (cached, handed to identical calls
   * waiting) only when the provider said it finished and nobody aborted; tokens spent are reported however
   * it ends, and the call once. A hand-written iterator: it sits on every token's path.
   */
  private providerStream(
    input: ChatModelInput,
    run: Run,
    lead: { prepared: ReturnType<ChatModel['prepare']>; flight: ((outcome: Shared) => void) | undefined } | undefined,
  ): AsyncGenerator<AIMessageChunk> {
    const chunks: AIMessageChunk[] = [];
    let chars = 0;
    // The provider's cancellation: a light token, made an `AbortSignal` only when the provider reads `signal`.
    const upstream = new CancelToken();
    let started: { stream: AsyncIterator<AIMessageChunk>; guard: IdleGuard; params: CallParams; began: number; unlink: (() => void) | undefined } | undefined;
    let ended = false;
    const finish = (complete: boolean, failure?: RunnelError): void => {
      if (ended) return;
      ended = true;
      if (started === undefined) return;
      started.guard.dispose();
      // Callers waiting on this call get its answer — one cut by a limit too (they asked the same), but not one
      // whose tool calls do not parse: they call for themselves — or its provider's failure.
      const malformed = complete && malformedCalls(chunks);
      lead?.flight?.(complete ? (malformed ? undefined : { chunks }) : sharedFailure(failure, run));
      // Tokens the provider reported count even when the stream ended early: they were spent.
      const usage = reportSpent(run, chunks);
      // A stream its reader left before the end (no error of its own) was cut short: an abort.
      const reason = complete ? finishReason(chunks) : undefined;
      this.reportCall(run, { model: started.params.model, began: started.began, error: complete ? undefined : (failure?.code ?? 'RUNNEL_ERR_ABORTED'), failure, usage, finishReason: reason });
      // Only a whole answer of a call nobody aborted is cached — not one cut by a token limit or a filter, nor
      // one whose tool calls do not parse (cut short, say), nor one the chain refuses: a retry must reach the provider.
      const cache = lead?.prepared.cache;
      // Nor a stream that ended without a chunk: an empty answer would be served for the cache's whole TTL.
      if (complete && chunks.length > 0 && cache !== undefined && run.signal?.aborted !== true && storable(chunks) && accepted(run.options, chunks)) {
        void cache.update(lead?.prepared.key ?? '', chunks).catch(() => undefined);
      }
      started.unlink?.();
      // Whoever stopped reading early (an abort, a stall, a consumer gone): close the upstream request.
      if (!complete) upstream.abort(new RunnelError('RUNNEL_ERR_ABORTED', 'The stream was closed before it ended'));
    };
    const fail = (error: unknown): never => {
      const failure = providerError(this.name, upstream.reason instanceof RunnelError ? upstream.reason : error, run.signal);
      finish(false, failure);
      throw failure;
    };
    const start = (): NonNullable<typeof started> => {
      const { messages, params } = lead?.prepared ?? this.prepare(input, run);
      const stopUpstream = (): void => upstream.abort(run.signal?.reason);
      const unlink = run.signal === undefined ? undefined : onAbort(run.signal, stopUpstream);
      if (run.signal?.aborted === true) stopUpstream();
      const guard = new IdleGuard(this.streamIdleTimeoutMs, () => {
        const error = new RunnelError('RUNNEL_ERR_PROVIDER_TIMEOUT', `${this.name}: no chunk for ${this.streamIdleTimeoutMs} ms, stream abandoned`);
        upstream.abort(error);
        return error;
      });
      started = { stream: undefined as unknown as AsyncIterator<AIMessageChunk>, guard, params, began: performance.now(), unlink };
      started.stream = this.provider.stream(providerRequest(messages, params, upstream, runTraceHeaders(run)))[Symbol.asyncIterator]();
      return started;
    };
    const onChunk = (next: IteratorResult<AIMessageChunk>): IteratorResult<AIMessageChunk> => {
      if (next.done !== true) {
        if (chunks.push(next.value) > this.maxAnswerChunks) {
          return fail(new RunnelError('RUNNEL_ERR_PROVIDER_ANSWER_TOO_LONG', `${this.name}: the answer passed ${this.maxAnswerChunks} chunks (maxAnswerChunks), stream abandoned`));
        }
        if ((chars += charsOf(next.value)) > this.maxAnswerChars) {
          return fail(new RunnelError('RUNNEL_ERR_PROVIDER_ANSWER_TOO_LONG', `${this.name}: the answer passed ${this.maxAnswerChars} characters (maxAnswerChars), stream abandoned`));
        }
        return next;
      }
      // The SDKs end an aborted stream as if it were done (openai@6 and @anthropic-ai/sdk return on an abort
      // error): whatever the stream said, a call whose signal fired failed, and an answer is whole only when
      // the provider said it finished.
      if (upstream.aborted) return fail(upstream.reason);
      if (finishReason(chunks) === undefined) return fail(new RunnelError('RUNNEL_ERR_PROVIDER_UNAVAILABLE', `${this.name}: the provider ended the stream before finishing the answer`));
      finish(true);
      return DONE_CHUNK;
    };
    const iterator: AsyncIterableIterator<AIMessageChunk> & { return(): Promise<IteratorResult<AIMessageChunk>>; throw(error: unknown): Promise<IteratorResult<AIMessageChunk>> } = {
      [Symbol.asyncIterator]() {
        return this;
      },
      next: () => {
        if (ended) return Promise.resolve(DONE_CHUNK);
        try {
          const call = started ?? start();
          return call.guard.pull(call.stream, onChunk, fail);
        } catch (error) {
          // Input that is not messages fails as it is; a provider that throws at once, as a provider error.
          if (started === undefined) return Promise.reject(error);
          try {
            return Promise.resolve(fail(error));
          } catch (failure) {
            return Promise.reject(failure);
          }
        }
      },
      return: () => {
        finish(false);
        return Promise.resolve(DONE_CHUNK);
      },
      throw: (error: unknown) => {
        finish(false);
        return Promise.reject(error);
      },
    };
    return iterator as unknown as AsyncGenerator<AIMessageChunk>;
  }

  /**
   * Reports an answer given without a call to the provider — the cache's, or an identical call's — with its
   * finish reason (`RunnableConfig.onModelCall`, `cached`): whoever reports the run's last answer's reason
   * must hear it, while `/metrics` counts it as no request.
   */
  private reportCached(run: Run, model: string, chunks: readonly AIMessageChunk[]): void {
    const reason = finishReason(chunks);
    run.reportModelCall({ provider: this.provider.id, model, seconds: 0, cached: true, ...(reason === undefined ? {} : { finishReason: reason }) });
  }

  /**
   * Reports one call that went to the provider (`RunnableConfig.onModelCall`). One the adapter refused to send
   * (`failure` marked by `sendsNothing`: a content block it cannot send) went nowhere: not a call, nor a
   * provider's error.
   */
  private reportCall(run: Run, call: { model: string; began: number; error?: string | undefined; failure?: unknown; usage?: UsageMetadata | undefined; finishReason?: string | undefined }): void {
    if (sentNothing(call.failure)) return;
    run.reportModelCall({
      provider: this.provider.id,
      model: call.model,
      seconds: (performance.now() - call.began) / 1000,
      ...(call.error === undefined ? {} : { error: call.error }),
      ...(call.usage === undefined ? {} : { usage: call.usage }),
      ...(call.finishReason === undefined ? {} : { finishReason: call.finishReason }),
    });
  }

  /**
   * The same model with tools it may call.
   *
   * @example
   * const withTools = model.bindTools([calculator], { toolChoice: 'auto' });
   */
  bindTools(tools: ToolLike[], options: { toolChoice?: ToolChoice } = {}): Runnable<ChatModelInput, AIMessage, ChatCallOptions> {
    return this.bind({ tools: tools.map(toToolDefinition), ...(options.toolChoice === undefined ? {} : { toolChoice: options.toolChoice }) });
  }

  /**
   * A runnable that answers with an object matching `schema`, through tool
   * calling; a mismatch fails with `RUNNEL_ERR_OUTPUT_PARSE`.
   *
   * @example
   * const extract = model.withStructuredOutput(z.object({ name: z.string(), age: z.number() }));
   */
  withStructuredOutput<T>(schema: ZodType<T>, options: { name?: string; description?: string } = {}): Runnable<ChatModelInput, T> {
    const name = options.name ?? 'extract';
    const description = options.description ?? schema.description ?? 'Answer with the extracted data';
    const callOf = (message: AIMessage) => message.tool_calls.find((c) => c.name === name) ?? message.tool_calls[0];
    const parse = new ToolCallParser(
      (message: AIMessage): T => {
        const call = callOf(message);
        const result = schema.safeParse(call?.args);
        if (result.success) return result.data;
        throw new RunnelError('RUNNEL_ERR_OUTPUT_PARSE', `${this.name} did not answer with the expected structure`, {
          detail: {
            text: JSON.stringify(call?.args ?? message.content),
            issues: result.error.issues.map((issue) => ({ type: issue.code, loc: issue.path.map(String), msg: issue.message })),
          },
        });
      },
      { name: 'StructuredOutputParser' },
    );
    // An answer that does not match is not cached: the 502 says retry, and a retry must reach the model.
    const accept = (message: AIMessage): boolean => schema.safeParse(callOf(message)?.args).success;
    return this.bind({ tools: [toToolDefinition({ name, description, schema })], toolChoice: name, accept })
      .pipe(parse)
      .withTypes({ input: this.inputSchema as ZodType<ChatModelInput>, output: schema });
  }
}
