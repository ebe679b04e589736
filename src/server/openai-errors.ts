/**
 * Errors on the OpenAI-compatible routes (`/v1/*`) in OpenAI's shape,
 * `{error: {message, type, param, code}}`, which the `openai` SDKs read into
 * their typed errors. The status is Runnel's, except that a request error
 * Runnel answers 422 is 400 here, as OpenAI answers it. `code` is OpenAI's
 * where OpenAI has one (`invalid_api_key`, `model_not_found`,
 * `rate_limit_exceeded`, `missing_required_parameter`, ...), otherwise
 * Runnel's stable code (`RUNNEL_ERR_REDIS_UNAVAILABLE`, see docs/errors.md).
 */
import { isRunnelError, type ErrorCode, type ErrorDetailItem, type JsonSchema } from '../core/index.js';
import { toHttpError } from './http-errors.js';
import { paramOf } from './openai-request.js';

/** An error answer in OpenAI's shape. */
export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** OpenAI's codes that body errors carry in their detail item's `type`. */
const OPENAI_BODY_CODES = new Set(['missing_required_parameter', 'invalid_type', 'invalid_value', 'unsupported_value', 'tools_not_supported']);

/** OpenAI's `type`: what kind of failure, by status. */
function typeFor(status: number): string {
  if (status === 429) return 'requests';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

function firstItem(error: unknown): ErrorDetailItem | undefined {
  if (!isRunnelError(error) || !Array.isArray(error.detail)) return undefined;
  const item: unknown = error.detail[0];
  if (item === null || typeof item !== 'object' || !Array.isArray((item as ErrorDetailItem).loc)) return undefined;
  return item as ErrorDetailItem;
}

/** OpenAI's `param` and `code` for a Runnel error. */
function locate(code: ErrorCode, item: ErrorDetailItem | undefined): { param: string | null; code: string } {
  switch (code) {
    case 'RUNNEL_ERR_UNAUTHORIZED':
      return { param: null, code: 'invalid_api_key' };
    case 'RUNNEL_ERR_RATE_LIMITED':
    case 'RUNNEL_ERR_PROVIDER_RATE_LIMITED':
      return { param: null, code: 'rate_limit_exceeded' };
    case 'RUNNEL_ERR_NOT_FOUND':
      return item?.type === 'model_not_found' ? { param: 'model', code: 'model_not_found' } : { param: null, code };
    case 'RUNNEL_ERR_BODY_INVALID': {
      // A body that is not JSON, or not an object: OpenAI has no code for it.
      if (item === undefined || item.loc.length === 0) return { param: null, code };
      const openai = OPENAI_BODY_CODES.has(item.type) ? item.type : item.type === 'missing' ? 'missing_required_parameter' : 'invalid_value';
      return { param: paramOf(item.loc), code: openai };
    }
    // The chain's input is made from the messages: a problem with it is a problem with them.
    case 'RUNNEL_ERR_INPUT_INVALID':
      return { param: 'messages', code: 'invalid_value' };
    // What the adapter configures comes from the body: `session_id` from `metadata.session_id`.
    case 'RUNNEL_ERR_CONFIG_INVALID':
      return { param: item?.loc.at(-1) === 'session_id' ? 'metadata.session_id' : null, code: 'invalid_value' };
    default:
      return { param: null, code };
  }
}

/**
 * The status and OpenAI-shaped body for `error`; `code` is Runnel's (for the headers a status needs),
 * `internal` true when it was not an error Runnel raised on purpose (log it).
 *
 * @example
 * const { status, body } = toOpenAIError(new RunnelError('RUNNEL_ERR_UNAUTHORIZED', 'Missing or invalid API key'));
 * // 401, { error: { message: 'Missing or invalid API key', type: 'invalid_request_error', param: null, code: 'invalid_api_key' } }
 */
export function toOpenAIError(error: unknown): { status: number; code: ErrorCode; body: OpenAIErrorBody; internal: boolean } {
  const http = toHttpError(error);
  const status = http.status === 422 ? 400 : http.status;
  const where = locate(http.body.code, http.internal ? undefined : firstItem(error));
  const message = http.body.code === 'RUNNEL_ERR_INPUT_INVALID' ? `The messages do not make an input this model takes: ${http.body.message}` : http.body.message;
  return { status, code: http.body.code, body: { error: { message, type: typeFor(status), param: where.param, code: where.code } }, internal: http.internal };
}

/** The error body's JSON Schema, for the OpenAPI document. */
export const openAIErrorSchema: JsonSchema = {
  $id: 'OpenAIError',
  title: 'OpenAIError',
  type: 'object',
  required: ['error'],
  description:
    "OpenAI's error shape. `type`: `invalid_request_error` (4xx), `requests` (429), `server_error` (5xx). `code`: OpenAI's where it has one " +
    '(`invalid_api_key`, `model_not_found`, `tools_not_supported`, `rate_limit_exceeded`, `missing_required_parameter`, `invalid_type`, `invalid_value`), else a Runnel code from docs/errors.md.',
  properties: {
    error: {
      type: 'object',
      required: ['message', 'type', 'param', 'code'],
      properties: {
        message: { type: 'string' },
        type: { type: 'string' },
        param: { type: ['string', 'null'], description: 'The request field at fault, OpenAI-style (`messages[1].content`)' },
        code: { type: ['string', 'null'] },
      },
    },
  },
};
