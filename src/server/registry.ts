/**
 * Chains as the server knows them: `defineChain` checks a registration (path,
 * endpoints, config keys) where it is written, and `createRegistry` checks
 * the set (no duplicate paths). A bad registration fails at start, never at
 * the first request.
 */
import type { ZodType } from 'zod';
import { isRunnable, RunnelError, type Runnable, type RunnableConfig } from '../core/index.js';
import type { ChatMessageHistory } from '../history/index.js';

/** The endpoints a chain may enable. */
export const ENDPOINTS = [
  'invoke',
  'batch',
  'stream',
  'stream_log',
  'stream_events',
  'input_schema',
  'output_schema',
  'config_schema',
  'playground',
  'config_hashes',
  'runs',
  'ui_stream',
  'chat_completions',
] as const;

/** One endpoint name. */
export type Endpoint = (typeof ENDPOINTS)[number];

/** The endpoints that speak in chat messages: a chain serves them only with a messages adapter. */
const NEEDS_MESSAGES: ReadonlySet<Endpoint> = new Set(['ui_stream', 'chat_completions']);

/** Config keys a client may set, when the chain allows them (snake_case as LangServe names them). */
export const CLIENT_CONFIG_KEYS = ['configurable', 'tags', 'metadata', 'run_id', 'recursion_limit', 'max_concurrency'] as const;

/** One client-settable config key. */
export type ClientConfigKey = (typeof CLIENT_CONFIG_KEYS)[number];

/** What a per-request config modifier learns about the request. */
export interface RequestContext {
  /** The authenticated caller (`anonymous` when API keys are off). */
  identity: string;
  headers: Readonly<Record<string, string | string[] | undefined>>;
  endpoint: Endpoint;
  path: string;
  /** The W3C `traceparent` of the request's span, when tracing is on (to carry the trace onward). */
  traceparent?: string | undefined;
  /**
   * True for a run that executes from its stored config (a background run, a durable stream): the handlers a
   * config carries (`onUsage`, `onModelCall`, `onSave`) cannot go with it, and a config that sets them is refused.
   */
  stored?: boolean;
}

/** One turn of a conversation as a chat frontend sends it (AI SDK UI messages, OpenAI chat messages). */
export interface ChatTurn {
  role: 'system' | 'user' | 'assistant' | 'tool';
  /** The turn's text (its text parts joined). */
  text: string;
  /** An assistant turn's tool calls (OpenAI clients that run tools themselves). */
  tool_calls?: { id: string; name: string; args: Record<string, unknown> }[];
  /** A tool turn: the call it answers. */
  tool_call_id?: string;
}

/** A conversation as `/ui_stream` and `/v1/chat/completions` hand it to a chain's {@link MessagesAdapter}. */
export interface Conversation {
  /**
   * The conversation's id when the client names one: the AI SDK chat's `id` on `/ui_stream`,
   * `metadata.session_id` on `/v1/chat/completions`. Scoped to the caller, as `session_id` is.
   */
  id: string | undefined;
  /** Every turn the client sent, oldest first; the last is the user's new message. */
  turns: ChatTurn[];
  /**
   * `'regenerate'`: the client asks for its last answer again (the AI SDK's `regenerate()`), the
   * conversation ending with the user's message that answer replied to; `'edit'`: the client replaced an
   * earlier message of its own (the AI SDK's `sendMessage` with a `messageId`), the conversation ending with
   * the new text and every turn after the old one dropped; `'submit'` otherwise.
   */
  trigger?: 'submit' | 'regenerate' | 'edit';
  /** Tools the client offers (OpenAI `tools`, as function definitions); only for an adapter with `tools: true`. */
  tools?: { name: string; description?: string; parameters?: Record<string, unknown> }[];
}

/**
 * How a chain serves chat frontends: the conversation a client sends, as the chain's input. A chain with
 * one gets `POST /{path}/ui_stream` (the AI SDK's UI message stream) and is a model of `/v1/chat/completions`.
 */
export interface MessagesAdapter<I = unknown> {
  /**
   * The chain's input for a conversation, and `configurable` values to run it with (a `session_id`).
   * Throw a `RunnelError` (`RUNNEL_ERR_BODY_INVALID`) to refuse one, with a message the client can act on.
   */
  toInput(conversation: Conversation): { input: I; configurable?: Record<string, unknown> };
  /**
   * `'events'`: the chain runs through its events, so each tool call and result shows as a tool part
   * (an agent); `'output'` (default): only its output stream, the lighter path. Text is the chain's
   * output chunks either way (strings, or message chunks' text).
   */
  stream?: 'output' | 'events';
  /** True when the chain takes the client's tools (`conversation.tools`) and may answer with tool calls. */
  tools?: boolean;
}

/** A chain registration; see {@link defineChain}. */
export interface ChainDefinition<I = unknown, O = unknown> {
  /** Where the chain is mounted: `/joke`, `/team/summarise`. */
  path: string;
  runnable: Runnable<I, O>;
  description?: string;
  /** The endpoints to serve (default: all). */
  enabledEndpoints?: Endpoint[];
  /** Config keys clients may set (default `['configurable']`). */
  configKeys?: ClientConfigKey[];
  /**
   * Adjusts each request's config, e.g. to put the caller's identity into `configurable`. The handlers it sets
   * (`onUsage` to bill a caller's tokens, `onModelCall`, `onSave`) are called beside the server's own; `onSave`
   * hears a request's saves once it has answered. Background runs and durable streams run from their stored
   * config, which keeps no functions: a config with these handlers is refused there, rather than run unmetered
   * (the context says `stored` for them).
   */
  perRequestConfigModifier?: (config: RunnableConfig, request: RequestContext) => RunnableConfig | Promise<RunnableConfig>;
  /**
   * Who shares the model response cache's entries: `'caller'` (default) keys
   * entries by the caller's identity too, so one caller never receives an
   * answer computed for another, nor learns from a fast answer what another
   * asked; `'shared'` lets every caller get an answer cached for the same
   * request (see docs/persistence.md).
   */
  cacheScope?: 'shared' | 'caller';
  /** The playground to serve (default `'default'`). */
  playground?: 'default' | 'chat';
  /** Override the input schema derived from the runnable. */
  inputSchema?: ZodType;
  /** Override the output schema derived from the runnable. */
  outputSchema?: ZodType;
  /**
   * For chains that keep history (`withMessageHistory`): the same accessor,
   * which adds `GET` and `DELETE /{path}/history/{session_id}` for the caller's
   * own conversations.
   */
  history?: (sessionId: string, caller: { identity: string }) => ChatMessageHistory;
  /**
   * The chain as a chat model for web frontends: maps a conversation to its input. With it the chain
   * gets `/{path}/ui_stream` and is listed by `/v1/models`; without it, neither.
   */
  messages?: MessagesAdapter<I>;
}

/** A registration after its checks, with every default filled in. */
export interface ChainSpec<I = unknown, O = unknown> extends Omit<ChainDefinition<I, O>, 'messages'> {
  /** The adapter, its input checked by the chain's input schema where it is used (so any chain's spec fits one list). */
  messages?: MessagesAdapter;
  enabledEndpoints: Endpoint[];
  configKeys: ClientConfigKey[];
  playground: 'default' | 'chat';
}

const PATH = /^(\/[a-z0-9][a-z0-9_-]*)+$/;
const RESERVED = new Set(['docs', 'openapi.json', 'healthz', 'readyz', 'metrics', 'c', 'v1']);

function invalid(message: string): RunnelError {
  return new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', message);
}

/**
 * Registers a chain. Checks the path, the endpoint names and the config keys
 * at once, so a typo fails when the server starts.
 *
 * @example
 * export default defineChain({ path: '/joke', runnable: jokeChain, description: 'Tells a joke', playground: 'default' });
 */
export function defineChain<I, O>(definition: ChainDefinition<I, O>): ChainSpec<I, O> {
  const { path } = definition;
  if (!PATH.test(path)) throw invalid(`Chain path ${JSON.stringify(path)} must look like /name or /group/name (lower case, digits, - and _)`);
  if (RESERVED.has(path.split('/')[1] as string)) throw invalid(`Chain path ${path} collides with a built-in route (/${path.split('/')[1]}): a chain's first segment is none of ${[...RESERVED].join(', ')}`);
  // A plain function pipes into a sequence, but a chain is served through its Runnable methods (schemas, streams).
  if (!isRunnable(definition.runnable)) {
    throw invalid(
      typeof definition.runnable === 'function'
        ? `${path}: runnable is a plain function; wrap it: lambda(fn)`
        : `${path}: runnable must be a Runnable (lambda(fn), sequence(...), prompt.pipe(model)), got ${definition.runnable === null ? 'null' : typeof definition.runnable}`,
    );
  }
  // By default every endpoint the chain can serve: the chat ones only with a messages adapter (without one,
  // GET / and the OpenAPI document would list routes that answer 404).
  const chat = definition.messages !== undefined;
  const enabled = definition.enabledEndpoints ?? ENDPOINTS.filter((endpoint) => chat || !NEEDS_MESSAGES.has(endpoint));
  if (!Array.isArray(enabled)) throw invalid(`${path}: enabledEndpoints must be a list`);
  for (const endpoint of enabled) {
    if (!(ENDPOINTS as readonly string[]).includes(endpoint)) {
      throw invalid(`${path}: unknown endpoint ${JSON.stringify(endpoint)}; known: ${ENDPOINTS.join(', ')}`);
    }
    if (!chat && NEEDS_MESSAGES.has(endpoint)) throw invalid(`${path}: endpoint ${endpoint} needs a messages adapter (\`messages\` in defineChain)`);
  }
  if (definition.cacheScope !== undefined && definition.cacheScope !== 'shared' && definition.cacheScope !== 'caller') {
    throw invalid(`${path}: cacheScope must be 'shared' or 'caller'`);
  }
  if (definition.messages !== undefined && typeof definition.messages?.toInput !== 'function') throw invalid(`${path}: messages.toInput must be a function`);
  const configKeys = definition.configKeys ?? ['configurable'];
  for (const key of configKeys) {
    if (!(CLIENT_CONFIG_KEYS as readonly string[]).includes(key)) {
      throw invalid(`${path}: config key ${JSON.stringify(key)} cannot be set by clients; allowed: ${CLIENT_CONFIG_KEYS.join(', ')}`);
    }
  }
  return { ...definition, enabledEndpoints: [...new Set(enabled)], configKeys: [...new Set(configKeys)], playground: definition.playground ?? 'default' };
}

/** Checks a set of chains: every path once. */
export function createRegistry(chains: readonly ChainSpec<never, unknown>[]): ChainSpec<never, unknown>[] {
  const seen = new Set<string>();
  for (const chain of chains) {
    if (seen.has(chain.path)) throw invalid(`Two chains are registered at ${chain.path}`);
    for (const other of seen) {
      if (chain.path.startsWith(`${other}/`) || other.startsWith(`${chain.path}/`)) throw invalid(`Chain paths ${other} and ${chain.path} overlap`);
    }
    seen.add(chain.path);
  }
  return [...chains];
}
