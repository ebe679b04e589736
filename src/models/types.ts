/** What chat models are called with, and what providers implement. */
import type { Cancellation, RunnableConfig } from '../core/index.js';
import type { AIMessage, AIMessageChunk, BaseMessage } from '../messages/index.js';

/** A tool as a model sees it: a name, what it does, and a JSON Schema of its arguments. */
export interface ToolDefinition {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/** Which tool the model must call: `auto` (its choice), `any`/`required` (some tool), `none`, or a tool's name. */
export type ToolChoice = 'auto' | 'any' | 'required' | 'none' | (string & {});

/** Per-call options of a chat model (beyond the run config). */
export interface ChatCallOptions extends RunnableConfig {
  stop?: string[];
  tools?: ToolDefinition[];
  toolChoice?: ToolChoice;
  /** Provider response format (OpenAI's `response_format`), passed through. */
  responseFormat?: Record<string, unknown>;
  /**
   * Whether the chain can use an answer (a structured output checks it against its schema): one it refuses
   * is not cached, and an entry it refuses is a miss, so a retry reaches the provider. Not sent, not in the key.
   */
  accept?: (answer: AIMessage) => boolean;
}

/** Everything that decides a model's answer besides the messages; the cache key covers all of it. */
export interface CallParams {
  model: string;
  temperature?: number | undefined;
  maxTokens?: number | undefined;
  stop?: string[] | undefined;
  tools?: ToolDefinition[] | undefined;
  toolChoice?: ToolChoice | undefined;
  responseFormat?: Record<string, unknown> | undefined;
}

/** One request to a provider. */
export interface ChatRequest {
  messages: BaseMessage[];
  params: CallParams;
  /** Fires when the run is aborted or the stream stalls; the provider must close its HTTP request. */
  signal: AbortSignal;
  /**
   * The same cancellation as the core's light token, when the request has one: a provider that only
   * checks `aborted` between chunks reads it here, and no `AbortSignal` is made for a call that never
   * needs one (`signal` is made when first read). Not enumerable: a copy of the request (`{ ...request,
   * signal }`) does not carry it, and it is gone once a provider sets or redefines `signal`, so a provider
   * that gives its own signal is read by that signal.
   */
  cancellation?: Cancellation | undefined;
  /** Headers the provider's HTTP request carries on (the trace's `traceparent` when tracing is on). */
  headers?: Record<string, string> | undefined;
}

/**
 * A model provider: turns a request into a stream of message chunks. The
 * chunk that ends a whole answer carries `response_metadata.finish_reason`
 * (the provider's own word that it finished); a stream that ends without one
 * is a broken-off answer — an error, never cached nor saved.
 */
export interface ChatProvider {
  /** The provider's id, part of the cache key (`openai`, `anthropic`, `fake`). */
  readonly id: string;
  /**
   * Where its requests go (an API's base URL), part of the cache key with the id: two servers behind one
   * provider (`baseURL`: a local model and OpenAI, two vLLM hosts) answer the same request differently.
   */
  readonly endpoint?: string;
  stream(request: ChatRequest): AsyncIterable<AIMessageChunk>;
  /**
   * The whole answer in one piece, for calls nobody streams (invoke without
   * observers). Optional: without it, invoke collects the stream.
   */
  generate?(request: ChatRequest): Promise<AIMessageChunk>;
}
