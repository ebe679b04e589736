/**
 * Errors as HTTP answers: a status and a body `{code, message, detail}`. A
 * Runnel error keeps its code, status and message; anything else is a bug in
 * a chain and answers 500 with a generic message — the real error goes to
 * the log, never to the client.
 */
import { errorCodes, isRunnelError, type ErrorCode, type ErrorDetailItem } from '../core/index.js';

/**
 * The JSON body of every error answer. `message` is always a string;
 * `detail` is a list of `{type, loc, msg}` for every request error (400,
 * 408, 413, 414, 422, 431: pydantic's shape, as LangServe answers
 * validation errors), and a string everywhere else (as FastAPI answers
 * `{"detail": "Not Found"}`).
 */
export interface ErrorBody {
  code: ErrorCode;
  message: string;
  detail: ErrorDetailItem[] | string;
}

/** Statuses whose `detail` is a list of `{type, loc, msg}`: what was wrong with the request, and where. */
const LIST_STATUSES = new Set([400, 408, 413, 414, 422, 431]);

const isItem = (value: unknown): value is ErrorDetailItem =>
  value !== null && typeof value === 'object' && typeof (value as ErrorDetailItem).type === 'string' && Array.isArray((value as ErrorDetailItem).loc) && typeof (value as ErrorDetailItem).msg === 'string';

/** `detail` in the one shape its status has (see {@link ErrorBody}). */
function detailFor(status: number, code: ErrorCode, message: string, detail: unknown): ErrorDetailItem[] | string {
  if (!LIST_STATUSES.has(status)) return typeof detail === 'string' ? detail : message;
  const type = code.replace(/^RUNNEL_ERR_/, '').toLowerCase();
  if (Array.isArray(detail) && detail.length > 0) {
    return detail.map((item) => (isItem(item) ? { type: item.type, loc: item.loc, msg: item.msg } : { type, loc: [], msg: typeof item === 'string' ? item : message }));
  }
  return [{ type, loc: [], msg: typeof detail === 'string' ? detail : message }];
}

/** An error body, its `detail` in the shape of its status. */
export function errorBody(status: number, code: ErrorCode, message: string, detail?: unknown): ErrorBody {
  return { code, message, detail: detailFor(status, code, message, detail) };
}

/** Fastify's own error codes that Runnel answers with its codes. */
const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: 'RUNNEL_ERR_BODY_TOO_LARGE',
  FST_ERR_CTP_INVALID_JSON_BODY: 'RUNNEL_ERR_BODY_INVALID',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'RUNNEL_ERR_BODY_INVALID',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'RUNNEL_ERR_BODY_INVALID',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'RUNNEL_ERR_BODY_INVALID',
  FST_ERR_NOT_FOUND: 'RUNNEL_ERR_NOT_FOUND',
  FST_ERR_BAD_URL: 'RUNNEL_ERR_BAD_REQUEST',
  FST_ERR_MAX_PARAM_LENGTH: 'RUNNEL_ERR_URI_TOO_LONG',
  FST_ERR_ASYNC_CONSTRAINT: 'RUNNEL_ERR_BAD_REQUEST',
};

const FASTIFY_MESSAGES: Partial<Record<ErrorCode, string>> = {
  RUNNEL_ERR_BODY_TOO_LARGE: 'Request body is too large',
  RUNNEL_ERR_NOT_FOUND: 'Not Found',
  RUNNEL_ERR_BAD_REQUEST: 'Malformed request',
  RUNNEL_ERR_URI_TOO_LONG: 'A path parameter is too long',
};

/**
 * A 4xx from a Fastify plugin (a parser, the rate limit, the static files' `send`), by status: each status its
 * own code. Another 4xx is answered as a 400 `RUNNEL_ERR_BAD_REQUEST`, so the status always is its code's.
 */
const STATUS_CODES: Partial<Record<number, ErrorCode>> = {
  400: 'RUNNEL_ERR_BAD_REQUEST',
  401: 'RUNNEL_ERR_UNAUTHORIZED',
  403: 'RUNNEL_ERR_FORBIDDEN',
  404: 'RUNNEL_ERR_NOT_FOUND',
  405: 'RUNNEL_ERR_METHOD_NOT_ALLOWED',
  408: 'RUNNEL_ERR_BODY_TIMEOUT',
  412: 'RUNNEL_ERR_PRECONDITION_FAILED',
  413: 'RUNNEL_ERR_BODY_TOO_LARGE',
  414: 'RUNNEL_ERR_URI_TOO_LONG',
  415: 'RUNNEL_ERR_UNSUPPORTED_MEDIA_TYPE',
  416: 'RUNNEL_ERR_RANGE_NOT_SATISFIABLE',
  417: 'RUNNEL_ERR_EXPECTATION_FAILED',
  422: 'RUNNEL_ERR_BODY_INVALID',
  429: 'RUNNEL_ERR_RATE_LIMITED',
  431: 'RUNNEL_ERR_HEADERS_TOO_LARGE',
};

/** The status and body for `error`; `internal` is true when it was not an error Runnel raised on purpose. */
export function toHttpError(error: unknown): { status: number; body: ErrorBody; internal: boolean } {
  if (isRunnelError(error)) {
    // Internal by its code: its message is for the log (as a background run's error frame already had it).
    if (error.code === 'RUNNEL_ERR_INTERNAL') return { status: 500, body: errorBody(500, error.code, 'Internal Server Error'), internal: true };
    return { status: error.statusCode, body: errorBody(error.statusCode, error.code, error.message, error.detail), internal: false };
  }
  const fastifyCode = (error as { code?: unknown }).code;
  if (typeof fastifyCode === 'string' && Object.hasOwn(FASTIFY_CODES, fastifyCode)) {
    const code = FASTIFY_CODES[fastifyCode] as ErrorCode;
    const message = FASTIFY_MESSAGES[code] ?? 'Invalid request body';
    return { status: errorCodes[code].status, body: errorBody(errorCodes[code].status, code, message), internal: false };
  }
  const status = (error as { statusCode?: unknown }).statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    // A 4xx from a Fastify plugin (CORS, rate limit, parser, static files): say what it is without its internals.
    const code = STATUS_CODES[status] ?? 'RUNNEL_ERR_BAD_REQUEST';
    const answered = errorCodes[code].status;
    return { status: answered, body: errorBody(answered, code, errorCodes[code].description), internal: false };
  }
  return { status: 500, body: errorBody(500, 'RUNNEL_ERR_INTERNAL', 'Internal Server Error'), internal: true };
}

/** The payload of an SSE `error` frame: `{status_code, message, code}`, as LangServe clients read it. */
export function errorFrame(error: unknown): { status_code: number; message: string; code: ErrorCode } {
  const { status, body } = toHttpError(error);
  return { status_code: status, message: body.message, code: body.code };
}
