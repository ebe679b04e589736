/**
 * Provider failures as Runnel errors with stable codes: a rate limit is
 * `RUNNEL_ERR_PROVIDER_RATE_LIMITED` (429), a timeout
 * `RUNNEL_ERR_PROVIDER_TIMEOUT` (504), a 5xx or broken connection
 * `RUNNEL_ERR_PROVIDER_UNAVAILABLE` (502), a refusal (bad key, unknown model)
 * `RUNNEL_ERR_PROVIDER_REJECTED` (502). Messages name the provider and the
 * status (and a refusal the provider's code for it), never the provider's
 * message or the request's credentials; the SDK's error stays as `cause`.
 */
import { abortError, isRunnelError, RunnelError } from '../core/index.js';

/** Refusals made before anything was sent (see {@link sentNothing}). */
const unsent = new WeakSet<RunnelError>();

/**
 * Marks `error` as a provider's refusal of a request it did not send (a content block it cannot send): no model
 * call was made, so `onModelCall` and `/metrics` hear of none. A custom {@link ChatProvider} marks its own so.
 *
 * @example
 * throw sendsNothing(new RunnelError('RUNNEL_ERR_INPUT_INVALID', 'MyProvider takes text only'));
 */
export function sendsNothing(error: RunnelError): RunnelError {
  unsent.add(error);
  return error;
}

/**
 * Whether `error` is a refusal {@link sendsNothing} marked: no request went to the provider.
 *
 * @example
 * if (sentNothing(failure)) return; // no model call to report
 */
export function sentNothing(error: unknown): boolean {
  return error instanceof RunnelError && unsent.has(error);
}

/**
 * A content block of a user's message that the adapter cannot send (`sends`: what it sends): refused rather
 * than left out, or the model would answer as if it had seen the file or the sound.
 *
 * @example
 * throw unsendableBlock('ChatAnthropic', 'input_audio', 'text, images and documents'); // RUNNEL_ERR_INPUT_INVALID
 */
export function unsendableBlock(provider: string, type: unknown, sends: string): RunnelError {
  const kind = typeof type === 'string' ? JSON.stringify(type.slice(0, 64)) : 'without a type';
  return sendsNothing(new RunnelError('RUNNEL_ERR_INPUT_INVALID', `${provider} cannot send a message content block ${typeof type === 'string' ? `of type ${kind}` : kind} (it sends ${sends}); nothing was sent`, {
    detail: [{ type: 'value_error', loc: ['content'], msg: `content blocks of type ${kind} are not supported by ${provider}` }],
  }));
}

/**
 * A content block naming a file stored in the provider account (`file_id`): the deployment's account, not the
 * caller's, so a caller could have the model read a file of another. Refused; the file's data may be sent.
 *
 * @example
 * throw accountFile('ChatOpenAI', '`file_data`'); // RUNNEL_ERR_INPUT_INVALID
 */
export function accountFile(provider: string, instead: string): RunnelError {
  return sendsNothing(new RunnelError('RUNNEL_ERR_INPUT_INVALID', `${provider} does not send a file stored in the provider account (it is the deployment's, not the caller's): send its content instead (${instead})`, {
    detail: [{ type: 'value_error', loc: ['content'], msg: 'files stored in the provider account are not sent' }],
  }));
}

/** Converts whatever a provider SDK threw into a Runnel error. */
export function providerError(provider: string, error: unknown, signal?: { readonly aborted: boolean; readonly reason: unknown }): RunnelError {
  if (isRunnelError(error)) return error;
  if (signal?.aborted === true) return abortError(signal);
  const status = (error as { status?: unknown }).status;
  const name = error instanceof Error ? error.constructor.name : '';
  if (typeof status === 'number') {
    if (status === 429) return new RunnelError('RUNNEL_ERR_PROVIDER_RATE_LIMITED', `${provider} rate-limited the request (429)`, { cause: error });
    if (status === 408 || status === 504) return new RunnelError('RUNNEL_ERR_PROVIDER_TIMEOUT', `${provider} timed out (${status})`, { cause: error });
    if (status >= 500) return new RunnelError('RUNNEL_ERR_PROVIDER_UNAVAILABLE', `${provider} failed (${status})`, { cause: error });
    // The provider's own name for the refusal says why (`tools_not_supported`, `invalid_api_key`): its message
    // is left out, which can quote the key.
    const why = [providerKind(error), providerParam(error)].filter((part) => part !== undefined).join(' ');
    return new RunnelError('RUNNEL_ERR_PROVIDER_REJECTED', `${provider} refused the request (${status}${why === '' ? '' : `, ${why}`})`, { cause: error });
  }
  // An error the provider sent within a streamed answer has no HTTP status (that was 200): its type says what it is.
  const { type, code } = error as { type?: unknown; code?: unknown };
  const kinds = [type, code].filter((kind): kind is string => typeof kind === 'string');
  if (kinds.some((kind) => /rate_limit/.test(kind))) return new RunnelError('RUNNEL_ERR_PROVIDER_RATE_LIMITED', `${provider} rate-limited the request mid-answer`, { cause: error });
  const refusal = kinds.find((kind) => /^(invalid_request_error|authentication_error|permission_error|not_found_error|request_too_large|billing_error)$/.test(kind));
  if (refusal !== undefined) return new RunnelError('RUNNEL_ERR_PROVIDER_REJECTED', `${provider} refused the request mid-answer (${refusal})`, { cause: error });
  if (/Timeout/i.test(name)) return new RunnelError('RUNNEL_ERR_PROVIDER_TIMEOUT', `${provider} did not answer in time`, { cause: error });
  if (/Abort/i.test(name)) return new RunnelError('RUNNEL_ERR_ABORTED', 'The run was aborted', { cause: error });
  return new RunnelError('RUNNEL_ERR_PROVIDER_UNAVAILABLE', `${provider} could not be reached or broke off the answer`, { cause: error });
}

/** The provider's own name for a failure — its SDK error's `code`, else its `type` — when it is a plain token. */
function providerKind(error: unknown): string | undefined {
  const { code, type } = error as { code?: unknown; type?: unknown };
  const kind = typeof code === 'string' ? code : typeof type === 'string' ? type : undefined;
  return kind !== undefined && /^[\w.-]{1,64}$/.test(kind) ? kind : undefined;
}

/** The request parameter an OpenAI refusal names (`param`: `tools`, `messages[1].content`), when it is a plain path. */
function providerParam(error: unknown): string | undefined {
  const { param } = error as { param?: unknown };
  return typeof param === 'string' && /^[\w.[\]-]{1,64}$/.test(param) ? `(${param})` : undefined;
}

/** A plain decimal number of seconds or milliseconds (not `''`, `0x10` or `1e3`, which `Number` would take). */
const DECIMAL = /^\d{1,12}(\.\d{1,6})?$/;

/** The headers of a provider SDK's error: a fetch `Headers` (openai, @anthropic-ai/sdk) or a plain record. */
function headerOf(error: unknown, name: string): string | undefined {
  const headers = (error as { headers?: unknown } | null)?.headers;
  if (headers === null || typeof headers !== 'object') return undefined;
  const value = typeof (headers as Headers).get === 'function' ? (headers as Headers).get(name) : (headers as Record<string, unknown>)[name];
  return typeof value === 'string' ? value : undefined;
}

/**
 * How long the provider asked to wait before a retry, in whole seconds (1 to 3600), from the rate-limited
 * answer behind `error` (its SDK error is a `cause`): `retry-after-ms`, as OpenAI sends it, or
 * `retry-after` in seconds or as an HTTP date. Undefined when the provider said nothing usable.
 *
 * @example
 * reply.header('retry-after', String(providerRetryAfter(error) ?? 1));
 */
export function providerRetryAfter(error: unknown, now = Date.now()): number | undefined {
  for (let cause = error, depth = 0; cause !== null && typeof cause === 'object' && depth < 4; cause = (cause as { cause?: unknown }).cause, depth++) {
    const ms = headerOf(cause, 'retry-after-ms')?.trim();
    let seconds = ms !== undefined && DECIMAL.test(ms) ? Number(ms) / 1000 : undefined;
    const after = headerOf(cause, 'retry-after')?.trim();
    if (seconds === undefined && after !== undefined && after !== '') {
      if (DECIMAL.test(after)) seconds = Number(after);
      else {
        const at = Date.parse(after);
        if (Number.isFinite(at)) seconds = (at - now) / 1000;
      }
    }
    if (seconds !== undefined) return Math.min(3600, Math.max(1, Math.ceil(seconds)));
  }
  return undefined;
}

/**
 * What an operator needs to see of a provider failure, for the log: Runnel's code, and of the SDK's error its
 * class, the provider's status and error code, and the network error under it (a wrong base URL is
 * `ECONNREFUSED` or `ENOTFOUND`). Never its message, which can quote the request's key (masked or not).
 * Undefined for an error that is not a provider's.
 *
 * @example
 * const failure = providerFailure(error);
 * if (failure !== undefined) request.log.warn(failure, 'model provider failed');
 */
export function providerFailure(error: unknown): Record<string, string | number> | undefined {
  if (!isRunnelError(error) || !error.code.startsWith('RUNNEL_ERR_PROVIDER_')) return undefined;
  const out: Record<string, string | number> = { code: error.code };
  const cause = error.cause as { constructor?: { name?: unknown }; status?: unknown; code?: unknown; type?: unknown; cause?: unknown } | undefined;
  if (cause === null || typeof cause !== 'object') return out;
  if (typeof cause.constructor?.name === 'string') out.provider_error = cause.constructor.name;
  if (typeof cause.status === 'number') out.provider_status = cause.status;
  const kind = providerKind(cause);
  if (kind !== undefined) out.provider_code = kind;
  // The network error under a connection failure (fetch's TypeError, its cause Node's system error).
  for (let under = cause.cause, depth = 0; under !== null && typeof under === 'object' && depth < 3; under = (under as { cause?: unknown }).cause, depth++) {
    const code = (under as { code?: unknown }).code;
    if (typeof code === 'string' && /^[A-Z_]{2,40}$/.test(code)) {
      out.network_error = code;
      break;
    }
  }
  return out;
}
