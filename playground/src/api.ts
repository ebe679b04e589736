/**
 * Talking to the chain: every URL is relative to the page (so it works
 * under a prefix and behind a proxy), the API key (when the server asks for
 * one) lives in session storage, and streams are read from `fetch` — an
 * aborted fetch closes the connection, and the server aborts the run.
 */

const KEY_STORAGE = 'runnel:api-key';

/** An error as the server reports it: `{code, message, detail}` or an SSE error frame. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly detail?: unknown,
  ) {
    super(message);
  }
}

export function apiKey(): string | null {
  return sessionStorage.getItem(KEY_STORAGE);
}

export function setApiKey(key: string | null): void {
  if (key === null || key === '') sessionStorage.removeItem(KEY_STORAGE);
  else sessionStorage.setItem(KEY_STORAGE, key);
}

function headers(json: boolean): Record<string, string> {
  const out: Record<string, string> = { accept: 'application/json' };
  if (json) out['content-type'] = 'application/json';
  const key = apiKey();
  if (key !== null) out['x-api-key'] = key;
  return out;
}

async function failure(res: Response): Promise<ApiError> {
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text) as { code?: string; message?: string; detail?: unknown };
    return new ApiError(res.status, body.code ?? `HTTP_${res.status}`, body.message ?? res.statusText, body.detail);
  } catch {
    return new ApiError(res.status, `HTTP_${res.status}`, text.slice(0, 300) || res.statusText);
  }
}

export async function getJson<T>(url: string): Promise<T> {
  const res = await fetch(url, { headers: headers(false) });
  if (!res.ok) throw await failure(res);
  return (await res.json()) as T;
}

/** One SSE frame. */
export interface SseFrame {
  event: string;
  data: unknown;
}

/** POSTs `body` and calls `onFrame` for each frame until the stream ends; throws ApiError for an HTTP error or an `error` frame. */
export async function stream(url: string, body: unknown, signal: AbortSignal, onFrame: (frame: SseFrame) => void): Promise<void> {
  const res = await fetch(url, { method: 'POST', headers: { ...headers(true), accept: 'text/event-stream' }, body: JSON.stringify(body), signal });
  if (!res.ok || res.body === null) throw await failure(res);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n/g, '\n');
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const raw = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = 'message';
      const data: string[] = [];
      for (const line of raw.split('\n')) {
        if (line.startsWith(':')) continue;
        if (line.startsWith('event:')) event = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
      if (data.length === 0 && event === 'message') continue;
      const parsed: unknown = data.length === 0 ? undefined : JSON.parse(data.join('\n'));
      if (event === 'error') {
        const e = (parsed ?? {}) as { status_code?: number; code?: string; message?: string };
        throw new ApiError(e.status_code ?? 500, e.code ?? 'RUNNEL_ERR_INTERNAL', e.message ?? 'The stream failed');
      }
      onFrame({ event, data: parsed });
      if (event === 'end') return;
    }
  }
}
