/**
 * A server's error, as the client raises it: the JSON body of a 4xx/5xx
 * answer, or an SSE `error` frame, becomes a {@link RunnelError} with the
 * server's code and message (a LangServe server's `detail` too), or a code
 * from the HTTP status when the body has none of Runnel's.
 */
import { errorCodes, RunnelError, type ErrorCode } from '../core/index.js';

/** The error a server's answer (status and JSON body) stands for. */
export function errorFrom(status: number, body: unknown): RunnelError {
  const record = (body ?? {}) as { code?: unknown; message?: unknown; detail?: unknown; status_code?: unknown };
  const code = typeof record.code === 'string' && Object.hasOwn(errorCodes, record.code) ? (record.code as ErrorCode) : undefined;
  const message = typeof record.message === 'string' ? record.message : typeof record.detail === 'string' ? record.detail : `The server answered ${status}`;
  const fallback: ErrorCode = status === 401 ? 'RUNNEL_ERR_UNAUTHORIZED' : status === 404 ? 'RUNNEL_ERR_NOT_FOUND' : status === 422 ? 'RUNNEL_ERR_INPUT_INVALID' : status === 429 ? 'RUNNEL_ERR_RATE_LIMITED' : 'RUNNEL_ERR_INTERNAL';
  return new RunnelError(code ?? fallback, message, { detail: record.detail });
}

/** The error of a failed response, from its body (JSON, or text as the message). */
export async function errorFromResponse(response: Response): Promise<RunnelError> {
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = { message: text };
  }
  return errorFrom(response.status, parsed);
}

/** The error an SSE `error` frame carries (`{status_code, code, message}`). */
export function errorFromFrame(data: string): RunnelError {
  let payload: unknown;
  try {
    payload = JSON.parse(data);
  } catch {
    payload = { message: data };
  }
  return errorFrom(Number((payload as { status_code?: unknown } | null)?.status_code) || 500, payload);
}
