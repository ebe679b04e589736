/**
 * Provider SDK clients, made on first use: a missing key is a clear
 * `RUNNEL_ERR_PROVIDER_REJECTED` at the first call (never at import), and the
 * key goes only into the client. What the SDKs log goes to the logger set with
 * `setProviderLogger` (the server's), as their message alone.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { RunnelError } from '../core/index.js';
import { providerRetryAfter } from './errors.js';

/** What every client takes. */
export interface ClientOptions {
  apiKey?: string | undefined;
  baseURL?: string | undefined;
  maxRetries?: number | undefined;
  timeout?: number | undefined;
}

/** The explicit key, else the environment's; `who` names the component in the error. */
export function apiKeyFor(explicit: string | undefined, envName: string, who: string): string {
  const key = explicit ?? process.env[envName];
  if (key === undefined || key === '') throw new RunnelError('RUNNEL_ERR_PROVIDER_REJECTED', `${who} has no API key: set ${envName} or pass apiKey`);
  return key;
}

/** A logger of pino's shape: fields, then the message. */
export type ProviderLogger = Record<'error' | 'warn' | 'info' | 'debug', (fields: Record<string, unknown>, message: string) => void>;

let providerLogger: ProviderLogger | undefined;

/**
 * Where the provider SDKs' own log messages go from now on; unset, to the console. Only the message is
 * kept, never the values logged with it: with a frame it cannot parse, an SDK logs the provider's raw
 * frame, which holds the model's output (the failure itself reaches the caller as a Runnel error).
 *
 * @example
 * setProviderLogger(app.log.child({ component: 'provider-sdk' }));
 */
export function setProviderLogger(logger: ProviderLogger | undefined): void {
  providerLogger = logger;
}

/** The `logger` option of a provider's SDK client: each call goes to the current provider logger. */
function sdkLogger(provider: string): Record<'error' | 'warn' | 'info' | 'debug', (message: unknown) => void> {
  const at = (level: 'error' | 'warn' | 'info' | 'debug') => (message: unknown) => {
    const text = typeof message === 'string' ? message : String(message);
    if (providerLogger !== undefined) providerLogger[level]({ provider_sdk: provider }, text);
    else console[level](`${provider} SDK: ${text}`);
  };
  return { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') };
}

/** SDK warnings already logged, by text: the same one on every request would flood the log. */
const warned = new Set<string>();

/**
 * Runs `call` — a synchronous SDK call that may `console.warn` before it sends anything (the Anthropic SDK
 * does, on every request, for a deprecated model) — with those warnings sent to the provider logger, once
 * each per process, instead of the console: a line outside the JSON logs breaks a log pipeline. Only
 * warnings made inside `call`'s synchronous part are caught (nothing else runs meanwhile); its result is
 * returned as it is.
 *
 * @example
 * const answer = await withSdkWarnings('anthropic', () => client.messages.create(body, options));
 */
export function withSdkWarnings<T>(provider: string, call: () => T): T {
  const warn = console.warn;
  console.warn = (...args: unknown[]) => {
    const text = args.map((arg) => (typeof arg === 'string' ? arg : String(arg))).join(' ');
    if (warned.has(text)) return;
    if (warned.size < 100) warned.add(text);
    // Without a provider logger, the console's own warn (this function's stand-in would call itself).
    if (providerLogger !== undefined) providerLogger.warn({ provider_sdk: provider }, text);
    else warn.call(console, `${provider} SDK: ${text}`);
  };
  try {
    return call();
  } finally {
    console.warn = warn;
  }
}

/**
 * The longest wait, in seconds, that a provider's answer (a 429, a 5xx) may ask for before a retry and still
 * be retried within the request. A longer one ends the request at once with the provider's error, and its
 * wait is passed on (`retry-after`): the Anthropic SDK would sleep for whatever it is asked (minutes), the
 * OpenAI SDK for up to a minute, while the caller waits on a request that then times out.
 */
export const LONGEST_RETRY_WAIT_S = 10;

/** A line of an event stream that says it is over (OpenAI's `data: [DONE]`), as the SDK reads the data: after a line break. */
const DONE_LINE = /[\r\n]data: ?\[DONE\][^\r\n]*[\r\n]/;

/** How much of a line's start tells whether it is the `[DONE]` line (`data: [DONE]` is 12 characters). */
const DONE_PREFIX = 13;

/**
 * An event stream's body that ends at its `data: [DONE]` line, its connection closed there: the OpenAI SDK reads
 * on after it until the server ends the response, and one that holds it open (a compatible server, a proxy)
 * would turn a whole answer into the idle timeout's failure. The bytes pass as they are.
 *
 * @internal exported for its test
 */
export function endAtDone(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  // The start of the line the last read ended in, carried to the next: a line starts only after a break, never
  // where a read began (an answer quoting "data: [DONE]" in its text, a read ending just before it, once ended
  // the stream there).
  let lineStart = '';
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await reader.read();
      if (done) return controller.close();
      controller.enqueue(value);
      const text = `\n${lineStart}${decoder.decode(value, { stream: true })}`;
      if (DONE_LINE.test(text)) {
        controller.close();
        await reader.cancel().catch(() => undefined);
        return;
      }
      const lastBreak = Math.max(text.lastIndexOf('\n'), text.lastIndexOf('\r'));
      lineStart = text.slice(lastBreak + 1, lastBreak + 1 + DONE_PREFIX);
    },
    cancel: (reason) => reader.cancel(reason),
  });
}

/**
 * `fetch` for the OpenAI client: {@link fetchNoLongWaits}, and an event stream ended at its `data: [DONE]` (the
 * Anthropic SDK stops at its own end, `message_stop`, which the adapter leaves the stream at).
 */
async function fetchOpenAI(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const response = await fetchNoLongWaits(input, init);
  if (response.ok && response.body !== null && response.headers.get('content-type')?.startsWith('text/event-stream') === true) {
    return new Response(endAtDone(response.body), { status: response.status, statusText: response.statusText, headers: response.headers });
  }
  return response;
}

/**
 * `fetch`, with an answer that asks for a longer wait than {@link LONGEST_RETRY_WAIT_S} marked not to be retried
 * (`x-should-retry: false`, which both SDKs honour).
 */
async function fetchNoLongWaits(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const response = await fetch(input, init);
  if (response.status < 400) return response;
  const wait = providerRetryAfter({ headers: response.headers });
  if (wait === undefined || wait <= LONGEST_RETRY_WAIT_S) return response;
  const headers = new Headers(response.headers);
  headers.set('x-should-retry', 'false');
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}

const common = (options: ClientOptions) => ({
  maxRetries: options.maxRetries ?? 2,
  fetch: fetchNoLongWaits,
  ...(options.timeout === undefined ? {} : { timeout: options.timeout }),
});

/** An OpenAI client (`OPENAI_API_KEY`, `OPENAI_BASE_URL`). */
export function openAIClient(options: ClientOptions, who: string): OpenAI {
  return new OpenAI({
    apiKey: apiKeyFor(options.apiKey, 'OPENAI_API_KEY', who),
    baseURL: options.baseURL ?? process.env.OPENAI_BASE_URL ?? undefined,
    logger: sdkLogger('openai'),
    ...common(options),
    fetch: fetchOpenAI,
  });
}

/** An Anthropic client (`ANTHROPIC_API_KEY`). */
export function anthropicClient(options: ClientOptions, who: string): Anthropic {
  return new Anthropic({
    apiKey: apiKeyFor(options.apiKey, 'ANTHROPIC_API_KEY', who),
    ...(options.baseURL === undefined ? {} : { baseURL: options.baseURL }),
    logger: sdkLogger('anthropic'),
    ...common(options),
  });
}
