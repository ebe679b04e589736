/**
 * Errors as HTTP answers: a status and a body `{code, message, detail}`. A
 * Runnel error keeps its code, status and message; anything else is a bug in
 * a chain and answers 500 with a generic message — the real error goes to
 * the log, never to the client.
 */
import { errorCodes, isRunnelError, type ErrorCode } from '../core/index.js';

/** The JSON body of every error answer. */
export interface ErrorBody {
  code: ErrorCode;
  message: string;
  detail: unknown;
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

/** A 4xx from a Fastify plugin, by status: each status its own code. */
const STATUS_CODES: Partial<Record<number, ErrorCode>> = {
  400: 'RUNNEL_ERR_BAD_REQUEST',
  401: 'RUNNEL_ERR_UNAUTHORIZED',
  404: 'RUNNEL_ERR_NOT_FOUND',
  408: 'RUNNEL_ERR_BODY_TIMEOUT',
  413: 'RUNNEL_ERR_BODY_TOO_LARGE',
  414: 'RUNNEL_ERR_URI_TOO_LONG',
  429: 'RUNNEL_ERR_RATE_LIMITED',
  431: 'RUNNEL_ERR_HEADERS_TOO_LARGE',
};

/** The status and body for `error`; `internal` is true when it was not an error Runnel raised on purpose. */
export function toHttpError(error: unknown): { status: number; body: ErrorBody; internal: boolean } {
  if (isRunnelError(error)) {
    const detail = error.detail ?? (error.code === 'RUNNEL_ERR_INTERNAL' ? null : error.message);
    return { status: error.statusCode, body: { code: error.code, message: error.message, detail }, internal: error.code === 'RUNNEL_ERR_INTERNAL' };
  }
  const fastifyCode = (error as { code?: unknown }).code;
  if (typeof fastifyCode === 'string' && Object.hasOwn(FASTIFY_CODES, fastifyCode)) {
    const code = FASTIFY_CODES[fastifyCode] as ErrorCode;
    const message = FASTIFY_MESSAGES[code] ?? 'Invalid request body';
    return { status: errorCodes[code].status, body: { code, message, detail: message }, internal: false };
  }
  const status = (error as { statusCode?: unknown }).statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    // A 4xx from a Fastify plugin (CORS, rate limit, parser): say what it is without its internals.
    const code = STATUS_CODES[status] ?? 'RUNNEL_ERR_BODY_INVALID';
    return { status, body: { code, message: errorCodes[code].description, detail: null }, internal: false };
  }
  return { status: 500, body: { code: 'RUNNEL_ERR_INTERNAL', message: 'Internal Server Error', detail: 'Internal Server Error' }, internal: true };
}

/** The payload of an SSE `error` frame: `{status_code, message, code}`, as LangServe clients read it. */
export function errorFrame(error: unknown): { status_code: number; message: string; code: ErrorCode } {
  const { status, body } = toHttpError(error);
  return { status_code: status, message: body.message, code: body.code };
}
