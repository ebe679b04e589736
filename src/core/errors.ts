/**
 * The one registry of Runnel's error codes. Every error Runnel raises on purpose
 * carries one of these codes, with the HTTP status the server answers with and
 * whether a retry may succeed. `docs/errors.md` documents each code; a test
 * keeps the two in step.
 */
export const errorCodes = {
  RUNNEL_ERR_ABORTED: {
    status: 499,
    retryable: false,
    description: 'The run was cancelled through its AbortSignal (for example, the client disconnected).',
  },
  RUNNEL_ERR_TIMEOUT: {
    status: 504,
    retryable: true,
    description: 'The run exceeded its `timeout` (config) or an idle timeout between streamed chunks.',
  },
  RUNNEL_ERR_RECURSION_LIMIT: {
    status: 500,
    retryable: false,
    description: 'A lambda kept returning runnables past `recursionLimit` (default 25).',
  },
  RUNNEL_ERR_INPUT_INVALID: {
    status: 422,
    retryable: false,
    description: 'The input does not match what the runnable accepts; `detail` lists each problem with its `loc`.',
  },
  RUNNEL_ERR_CONFIG_INVALID: {
    status: 422,
    retryable: false,
    description: 'A config value (for example a `configurable` field) is invalid; `detail` lists each problem.',
  },
  RUNNEL_ERR_INVALID_ARGUMENT: {
    status: 500,
    retryable: false,
    description: 'A runnable was built or called with arguments it cannot use (a programming error in the chain).',
  },
  RUNNEL_ERR_OUTPUT_PARSE: {
    status: 502,
    retryable: true,
    description: "The model's output could not be parsed into the expected shape. In process the error's `detail` carries the raw text and the problems; over HTTP `detail` is the message, as for every 5xx. An answer that `withStructuredOutput`, or a `JsonOutputParser` or `StructuredOutputParser` right after its model, refuses is not cached (nor any a call's `accept` refuses): a retry reaches the model.",
  },
  RUNNEL_ERR_PROVIDER_RATE_LIMITED: {
    status: 429,
    retryable: true,
    description: 'The model provider rate-limited the request, and retries within `maxRetries` did not get through; `retry-after` passes on the wait the provider asked for (1 s when it named none).',
  },
  RUNNEL_ERR_PROVIDER_TIMEOUT: {
    status: 504,
    retryable: true,
    description: 'The model provider did not answer in time, or its stream stalled longer than the idle timeout.',
  },
  RUNNEL_ERR_PROVIDER_UNAVAILABLE: {
    status: 502,
    retryable: true,
    description: 'The model provider failed (a 5xx answer or a broken connection), also after retries.',
  },
  RUNNEL_ERR_PROVIDER_ANSWER_TOO_LONG: {
    status: 502,
    retryable: false,
    description: "The model provider's answer streamed past the model's `maxAnswerChunks` (default 200,000) or `maxAnswerChars` (default 4,000,000), both past every provider's output limit: the provider's request is closed, and the call fails rather than hold an answer that may never end.",
  },
  RUNNEL_ERR_PROVIDER_REJECTED: {
    status: 502,
    retryable: false,
    description: 'The model provider refused the request (bad credentials, unknown model, a request it cannot serve).',
  },
  RUNNEL_ERR_AGENT_MAX_ITERATIONS: {
    status: 500,
    retryable: false,
    description: 'A tool-calling agent reached `maxIterations` without a final answer.',
  },
  RUNNEL_ERR_BODY_INVALID: {
    status: 422,
    retryable: false,
    description: 'The request body is not JSON (or not UTF-8), not an object, or lacks `input`/`inputs`; `detail` says where.',
  },
  RUNNEL_ERR_BODY_TOO_LARGE: {
    status: 413,
    retryable: false,
    description: 'The request body is larger than the limit (`RUNNEL_BODY_LIMIT`, default 1 MiB), or a run larger than the whole embedded run store (256 MB).',
  },
  RUNNEL_ERR_UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    retryable: false,
    description:
      "A browser sent a body not declared `application/json` (a form or `text/plain` post, which a page on any site may send without CORS's consent), or a body came compressed (`content-encoding`, or a `transfer-encoding` other than `chunked`), or declared a charset other than UTF-8; send it uncompressed, in UTF-8, as `content-type: application/json`.",
  },
  RUNNEL_ERR_BODY_TIMEOUT: {
    status: 408,
    retryable: true,
    description: 'The request (headers and body) did not arrive within `RUNNEL_BODY_TIMEOUT_MS` (default 30 s); the connection is closed.',
  },
  RUNNEL_ERR_URI_TOO_LONG: {
    status: 414,
    retryable: false,
    description: 'A path parameter (a session id, a config hash) is longer than the router takes (16 KiB). Node takes a request line with its headers up to 16 KiB by default, so such a request is answered 431 `RUNNEL_ERR_HEADERS_TOO_LARGE` first; 414 comes only when Node is started with a larger `--max-http-header-size`.',
  },
  RUNNEL_ERR_HEADERS_TOO_LARGE: {
    status: 431,
    retryable: false,
    description: "The request line and headers together are larger than Node's limit (16 KiB); a URL that long is refused here.",
  },
  RUNNEL_ERR_PRECONDITION_FAILED: {
    status: 412,
    retryable: false,
    description: 'A conditional request for a static file (the playground, the API docs) whose condition does not hold (`if-match`, `if-unmodified-since`).',
  },
  RUNNEL_ERR_RANGE_NOT_SATISFIABLE: {
    status: 416,
    retryable: false,
    description: 'A `range` request for a static file (the playground, the API docs) that lies outside it.',
  },
  RUNNEL_ERR_EXPECTATION_FAILED: {
    status: 417,
    retryable: false,
    description: 'An `expect` header other than `100-continue`, the one expectation HTTP defines; the body is read and dropped, and the connection goes on.',
  },
  RUNNEL_ERR_BATCH_TOO_LARGE: {
    status: 422,
    retryable: false,
    description: 'A batch has more inputs than the limit (`RUNNEL_MAX_BATCH`, default 100).',
  },
  RUNNEL_ERR_BAD_REQUEST: {
    status: 400,
    retryable: false,
    description: 'The request is malformed before its body is read (for example, a URL with broken percent-encoding).',
  },
  RUNNEL_ERR_CONFIG_HASH_INVALID: {
    status: 400,
    retryable: false,
    description: 'The `/c/{config_hash}/` part of the URL does not decode to a config object.',
  },
  RUNNEL_ERR_UNAUTHORIZED: {
    status: 401,
    retryable: false,
    description: 'API keys are on (`RUNNEL_API_KEYS`) and the request has none, or a wrong one.',
  },
  RUNNEL_ERR_HOST_NOT_ALLOWED: {
    status: 403,
    retryable: false,
    description:
      'API keys are off and the request names a host this server does not answer under: only IP addresses, `localhost` and the names in `RUNNEL_ALLOWED_HOSTS` (a page could otherwise reach a keyless server on your machine by pointing its own name at it).',
  },
  RUNNEL_ERR_FORBIDDEN: {
    status: 403,
    retryable: false,
    description: 'The caller may not use this resource: `/metrics` for a key `RUNNEL_METRICS_KEYS` does not name, or a static file path that leads out of its folder. (Another caller\'s history and runs are not refused but out of sight: a history is kept per key, and another key\'s run is 404.)',
  },
  RUNNEL_ERR_NOT_FOUND: {
    status: 404,
    retryable: false,
    description: 'No such route, chain or endpoint (endpoints a chain has not enabled do not exist).',
  },
  RUNNEL_ERR_METHOD_NOT_ALLOWED: {
    status: 405,
    retryable: false,
    description: 'The route exists but not for this method (`GET /joke/invoke`); the `allow` header lists the methods it takes.',
  },
  RUNNEL_ERR_RATE_LIMITED: {
    status: 429,
    retryable: true,
    description: 'The caller sent more requests than its rate limit allows (`RUNNEL_RATE_LIMIT`), or its address had too many failed authentications (`RUNNEL_AUTH_FAIL_LIMIT`); see `retry-after`.',
  },
  RUNNEL_ERR_TOO_MANY_STREAMS: {
    status: 429,
    retryable: true,
    description: 'The caller (its API key) already has as many streams open as `RUNNEL_MAX_STREAMS_PER_KEY` allows; close one first. Without keys every caller is one.',
  },
  RUNNEL_ERR_TOO_MANY_RUNS: {
    status: 429,
    retryable: true,
    description: 'The caller (its API key) already has as many background runs pending or running as `RUNNEL_MAX_RUNS_PER_KEY` allows; wait for one to end, or cancel one. Without keys every caller is one.',
  },
  RUNNEL_ERR_OVERLOADED: {
    status: 503,
    retryable: true,
    description: 'All stream slots are taken (`RUNNEL_MAX_STREAMS`), or, without Redis, the process holds its most background runs waiting (10,000) or its runs under way hold the 256 MB it keeps for runs; see `retry-after`.',
  },
  RUNNEL_ERR_METRICS_INCOMPLETE: {
    status: 503,
    retryable: true,
    description: 'With `RUNNEL_PROCESSES`, a server process did not hand in its metrics within 2 s: the scrape fails rather than show a sum short of it (which would read as a counter reset).',
  },
  RUNNEL_ERR_SHUTTING_DOWN: {
    status: 503,
    retryable: true,
    description: 'The server is shutting down; another replica will answer.',
  },
  RUNNEL_ERR_REPLICA_UNAVAILABLE: {
    status: 502,
    retryable: true,
    description: "Answered by the shipped nginx (`deploy/nginx.conf`), not by Runnel: the replica that took the request could not be reached, closed the connection before answering (killed mid-request) or outlasted `proxy_read_timeout`. A request that reached a replica may have run partly there; nginx never passes it on to another.",
  },
  RUNNEL_ERR_STREAM_STALLED: {
    status: 408,
    retryable: false,
    description: 'The client read nothing of a stream for longer than `RUNNEL_STREAM_STALL_MS`; the stream was cut.',
  },
  RUNNEL_ERR_REDIS_UNAVAILABLE: {
    status: 503,
    retryable: true,
    description: 'Redis did not answer (down, or slower than its command timeout); features that need it are unavailable until it returns.',
  },
  RUNNEL_ERR_DATABASE_UNAVAILABLE: {
    status: 503,
    retryable: true,
    description: 'Postgres (or the embedded database) could not be reached, refused the credentials, has no database of the configured name, ran out of connections, disk or memory, had its files fail under it (the embedded database\'s directory removed), or a query ran past its statement timeout; features that need vectors are unavailable until it returns.',
  },
  RUNNEL_ERR_COLLECTION_NOT_READY: {
    status: 503,
    retryable: true,
    description: 'The collection a search needs is still being filled — `/rag`\'s `docs` collection, seeded from empty on a server\'s first start (tens of seconds on the embedded database) — so an answer now would miss passages it will have; `/readyz` says ready once it is. (`/agent`\'s `search_docs` tool reports it to the model as its result.)',
  },
  RUNNEL_ERR_VECTOR_EXTENSION_MISSING: {
    status: 503,
    retryable: false,
    description: 'Postgres has no pgvector: the `vector` extension is not installed on the database server, or the database user may not create it. Install pgvector there, or have an administrator run `CREATE EXTENSION vector` once.',
  },
  RUNNEL_ERR_RUN_CANCELLED: {
    status: 499,
    retryable: false,
    description: 'The background run was cancelled (`POST /{path}/runs/{run_id}/cancel`); its record says `cancelled`.',
  },
  RUNNEL_ERR_RUN_LOG_TRIMMED: {
    status: 410,
    retryable: false,
    description:
      "A run's stream cannot be read from where it was asked: from its start, or after an event id, the frames that follow are no longer kept (a run's log keeps its last entries, 10,000 by default), and sending the rest would pass a part of the answer for the whole. The run goes on; its record (`GET /{path}/runs/{run_id}`) has the output once it ends.",
  },
  RUNNEL_ERR_RUN_LOST: {
    status: 500,
    retryable: true,
    description: 'The worker running this background run stopped (killed, crashed) before the run ended; the run is not run twice. Submit it again.',
  },
  RUNNEL_ERR_RUN_WAIT_TIMEOUT: {
    status: 408,
    retryable: true,
    description: '`GET /{path}/runs/{run_id}/wait` waited `timeout_s` and the run has not ended; the body is the run record as it is now.',
  },
  RUNNEL_ERR_WEBHOOK_NOT_ALLOWED: {
    status: 422,
    retryable: false,
    description: "A run's `webhook` is not an https URL on a host listed in `RUNNEL_WEBHOOK_HOSTS` (or webhooks are off: no hosts, no `RUNNEL_WEBHOOK_SECRET`).",
  },
  RUNNEL_ERR_STORED_RECORD_INVALID: {
    status: 500,
    retryable: false,
    description: 'A record read back from storage (a chat history, a run or its event log, the cache, the lexical index of a vector collection, whose statistics could not be counted again) failed validation, or its Redis key holds another type than Runnel stores there; it is rejected, never revived, and logged as `stored record not valid`.',
  },
  RUNNEL_ERR_INTERNAL: {
    status: 500,
    retryable: false,
    description: 'An unexpected error inside a chain. The message sent to clients is generic.',
  },
} as const satisfies Record<string, { status: number; retryable: boolean; description: string }>;

/** A code from the registry, such as `'RUNNEL_ERR_ABORTED'`. */
export type ErrorCode = keyof typeof errorCodes;

/** One problem in a validation error, LangServe-style: `loc` is relative to the checked value. */
export interface ErrorDetailItem {
  type: string;
  loc: (string | number)[];
  msg: string;
}

/** Options for {@link RunnelError}. */
export interface RunnelErrorOptions {
  cause?: unknown;
  detail?: unknown;
}

/**
 * An error with a stable code. Its shape (`code`, `message`, `statusCode`)
 * is the one Fastify's error serializer already understands, and it keeps
 * whatever caused it in `cause`.
 *
 * @example
 * throw new RunnelError('RUNNEL_ERR_INPUT_INVALID', 'input.topic must be a string', {
 *   detail: [{ type: 'string_type', loc: ['topic'], msg: 'expected string' }],
 * });
 */
export class RunnelError extends Error {
  readonly code: ErrorCode;
  readonly statusCode: number;
  readonly retryable: boolean;
  readonly detail: unknown;

  constructor(code: ErrorCode, message: string, options: RunnelErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'RunnelError';
    this.code = code;
    this.statusCode = errorCodes[code].status;
    this.retryable = errorCodes[code].retryable;
    this.detail = options.detail;
  }
}

/** True when `error` is a {@link RunnelError}, optionally with the given code. */
export function isRunnelError(error: unknown, code?: ErrorCode): error is RunnelError {
  return error instanceof RunnelError && (code === undefined || error.code === code);
}

/** True for the errors cancellation produces: never retried, never sent to a fallback. */
export function isAbortError(error: unknown): boolean {
  return isRunnelError(error, 'RUNNEL_ERR_ABORTED') || isRunnelError(error, 'RUNNEL_ERR_TIMEOUT');
}

/** The error a run ends with when `signal` fires: a timeout or a cancellation, keeping the reason as `cause`. */
export function abortError(signal: { readonly reason: unknown }): RunnelError {
  const reason: unknown = signal.reason;
  if (reason instanceof RunnelError) return reason;
  if (reason instanceof Error && reason.name === 'TimeoutError') {
    return new RunnelError('RUNNEL_ERR_TIMEOUT', 'The run timed out', { cause: reason });
  }
  return new RunnelError('RUNNEL_ERR_ABORTED', 'The run was aborted', { cause: reason });
}
