/**
 * Sends an error answer, whatever its body's shape (Runnel's, or OpenAI's on
 * `/v1/*`), with what its status asks of the connection: `retry-after` on a
 * 503 and on a provider's rate limit (the wait the provider asked for),
 * `connection: close` while draining, and a lingering close when the
 * request's body is still arriving.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { errorCodes, isRunnelError, type ErrorCode } from '../core/index.js';
import { providerFailure, providerRetryAfter } from '../models/index.js';
import { answerAndLinger, awaitsContinue } from './connection-limits.js';

/**
 * Answers `status` with `body`; `code` is the Runnel code behind it.
 *
 * @example
 * app.setErrorHandler((error, request, reply) => {
 *   const { status, body } = toHttpError(error);
 *   sendErrorAnswer(request, reply, { status, code: body.code, body });
 * });
 */
export function sendErrorAnswer(request: FastifyRequest, reply: FastifyReply, answer: { status: number; code: ErrorCode; body: object; error?: unknown }): void {
  for (const [name, value] of Object.entries(errorAnswerHeaders(request, answer))) {
    // A retry-after set already (the rate limiter's own) stands.
    if (name !== 'retry-after' || !reply.hasHeader(name)) reply.header(name, value);
  }
  // An answer that closes the connection while the body still arrives (one over the limit, or any refusal of a
  // request that asked for `100 Continue`, whose connection Node closes) reads the rest first.
  if (!request.raw.complete && !request.raw.readableEnded && (reply.getHeader('connection') === 'close' || awaitsContinue(request.raw))) {
    answerAndLinger(request, reply, { status: answer.status, body: answer.body });
    return;
  }
  // Fastify closes the connection after any body parser failure, in case more of the body comes; Runnel's parser
  // reads the body whole first. A body that arrived whole and did not parse leaves the connection open for the
  // requests behind it: pipelined ones were dropped unanswered, and a keep-alive pool's next request failed.
  if (request.raw.complete && answer.code !== 'RUNNEL_ERR_SHUTTING_DOWN' && reply.getHeader('connection') === 'close') reply.removeHeader('connection');
  void reply.code(answer.status).type('application/json; charset=utf-8').send(answer.body);
}

/** The statuses the `openai` and `@anthropic-ai/sdk` SDKs retry by themselves, unless told not to. */
const RETRIED_STATUSES = new Set([408, 409, 429]);

/**
 * The headers every error answer carries by its status and code: `retry-after` where it asks for one; the
 * request's id (the client's own `x-request-id` when it sent a valid one), what its log lines carry and what to
 * quote when asking about a failure — on error answers only, as a header on every answer is a cost every
 * request pays; `connection: close` while draining, so the client's next request goes to another replica;
 * `x-should-retry: false` on a status the SDKs retry when its code is not retryable (a bug, the agent out of
 * iterations, a request the provider refused): the SDK would run the chain twice more for the same failure.
 */
export function errorAnswerHeaders(request: FastifyRequest, answer: { status: number; code: ErrorCode; error?: unknown }): Record<string, string> {
  const headers: Record<string, string> = { 'x-request-id': request.id };
  const wait = retryAfter(answer);
  if (wait !== undefined) headers['retry-after'] = wait;
  if ((answer.status >= 500 || RETRIED_STATUSES.has(answer.status)) && !errorCodes[answer.code].retryable) headers['x-should-retry'] = 'false';
  if (answer.code === 'RUNNEL_ERR_SHUTTING_DOWN') headers.connection = 'close';
  return headers;
}

/**
 * The `retry-after` an error answer carries, if any: 1 s on a 503 and on a caller's stream or run limit (a
 * stream or run of its own may end any moment); on a provider's rate limit (after the model's own retries), the wait the
 * provider asked for, or 1 s when it named none.
 */
export function retryAfter(answer: { status: number; code: ErrorCode; error?: unknown }): string | undefined {
  if (answer.code === 'RUNNEL_ERR_PROVIDER_RATE_LIMITED') return String(providerRetryAfter(answer.error) ?? 1);
  // A provider outage that said how long to wait (a 503 or 529 with retry-after): that wait.
  if (answer.code === 'RUNNEL_ERR_PROVIDER_UNAVAILABLE') {
    const wait = providerRetryAfter(answer.error);
    if (wait !== undefined) return String(wait);
  }
  return answer.status === 503 || answer.code === 'RUNNEL_ERR_TOO_MANY_STREAMS' || answer.code === 'RUNNEL_ERR_TOO_MANY_RUNS' ? '1' : undefined;
}

/** Driver messages that say what happened and quote nothing of the connection: their kind, for the log. */
const SERVICE_FAILURES: [RegExp, string][] = [
  [/Query read timeout/, 'query_timeout'],
  [/timeout exceeded when trying to connect|Connection terminated due to connection timeout/, 'connect_timeout'],
  [/Connection terminated/, 'connection_terminated'],
  [/Command timed out/, 'command_timeout'],
  [/Connection is closed/, 'connection_closed'],
  [/Stream isn't writeable/, 'not_connected'],
  // A Redis at its maxmemory under noeviction: it answers, and refuses every write (its PING, so /readyz, is fine).
  // Anywhere in the message: a script's error quotes it after its own words.
  [/OOM command not allowed/, 'out_of_memory'],
];

/**
 * Of a database or Redis failure, what the log needs to find its cause: Runnel's code, and the driver's —
 * an SQLSTATE (`57014`: the statement timeout), a socket error (`ECONNREFUSED`) or a timeout's kind — never
 * its message, which can quote the connection string. Undefined for any other error.
 *
 * @example
 * serviceFailure(error); // { code: 'RUNNEL_ERR_DATABASE_UNAVAILABLE', service_error: 'ECONNREFUSED' }
 */
export function serviceFailure(error: unknown): Record<string, string> | undefined {
  if (!isRunnelError(error) || (error.code !== 'RUNNEL_ERR_DATABASE_UNAVAILABLE' && error.code !== 'RUNNEL_ERR_REDIS_UNAVAILABLE')) return undefined;
  const out: Record<string, string> = { code: error.code };
  for (let cause = error.cause, depth = 0; cause !== null && typeof cause === 'object' && depth < 3; cause = (cause as { cause?: unknown }).cause, depth++) {
    const { code, message } = cause as { code?: unknown; message?: unknown };
    if (typeof code === 'string' && /^[A-Z0-9_]{2,40}$/.test(code)) {
      out.service_error = code;
      break;
    }
    const kind = typeof message === 'string' ? SERVICE_FAILURES.find(([pattern]) => pattern.test(message))?.[1] : undefined;
    if (kind !== undefined) {
      out.service_error = kind;
      break;
    }
  }
  return out;
}

/**
 * Logs the failure of what a request depends on, as a warning (the dependency's, not a bug here), with what
 * the operator needs to find its cause and nothing of its message: a model provider's (`model provider
 * failed`: a wrong base URL, a refused key, a rate limit; see {@link providerFailure}) and the database's or
 * Redis's (`service unavailable`; see {@link serviceFailure}); a model's answer its parser could not read
 * (`model output not parsed`); and a stored record that is not valid (`stored record not valid`). Anything else is not logged here.
 */
export function logDependencyFailure(request: FastifyRequest, error: unknown, runId?: string): void {
  const failure = providerFailure(error);
  if (failure !== undefined) {
    request.log.warn(runId === undefined ? failure : { ...failure, runId }, 'model provider failed');
    return;
  }
  const service = serviceFailure(error);
  if (service !== undefined) {
    request.log.warn(runId === undefined ? service : { ...service, runId }, 'service unavailable');
    return;
  }
  // A model's answer the chain's parser could not read (a 502): the model's, or the prompt's, to look at — said
  // without the answer's text, which is user data.
  if (isRunnelError(error) && error.code === 'RUNNEL_ERR_OUTPUT_PARSE') {
    request.log.warn(runId === undefined ? { code: error.code } : { code: error.code, runId }, "model output not parsed");
  }
  // A record in Redis or the database that Runnel did not write (changed by hand, another program's key): the
  // operator's to find, by Runnel's own message (which names the record's kind, never its content).
  if (isRunnelError(error) && error.code === 'RUNNEL_ERR_STORED_RECORD_INVALID') {
    request.log.warn({ code: error.code, reason: error.message, ...(runId === undefined ? {} : { runId }) }, 'stored record not valid');
  }
}
