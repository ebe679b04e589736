/**
 * Talking to the chain: every URL is relative to the page (so it works
 * under a prefix and behind a proxy), the API key (when the server asks for
 * one) lives in session storage, and runs are durable streams read from
 * `fetch`: a connection that drops mid-run is rejoined where it left off
 * (`Last-Event-ID`), and stopping a run cancels it on the server.
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

/** One SSE frame, with its `id` when the server gave one. */
export interface SseFrame {
  event: string;
  data: unknown;
  id?: string;
}

/**
 * Reads an event stream, calling `onFrame` for each frame: `'end'` after the
 * `end` frame, `'cut'` when the body ends or fails before one (a network
 * error, an aborted read); an `error` frame throws its ApiError.
 */
async function readFrames(res: Response, onFrame: (frame: SseFrame) => void): Promise<'end' | 'cut'> {
  if (res.body === null) return 'cut';
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    let chunk: ReadableStreamReadResult<string>;
    try {
      chunk = await reader.read();
    } catch {
      return 'cut';
    }
    if (chunk.done) return 'cut';
    // A piece of the stream may end between the \r and the \n of a line's end: the \r kept goes with the \n.
    // (Only the new piece is rewritten: a frame of megabytes arrives in many pieces.)
    if (buffer.endsWith('\r') && chunk.value.startsWith('\n')) buffer = buffer.slice(0, -1);
    buffer += chunk.value.replace(/\r\n/g, '\n');
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const raw = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = 'message';
      let id: string | undefined;
      const data: string[] = [];
      for (const line of raw.split('\n')) {
        if (line.startsWith(':')) continue;
        if (line.startsWith('event:')) event = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
        else if (line.startsWith('id:')) id = line.slice(3).trim();
      }
      if (data.length === 0 && event === 'message') continue;
      const parsed: unknown = data.length === 0 ? undefined : JSON.parse(data.join('\n'));
      if (event === 'error') {
        const e = (parsed ?? {}) as { status_code?: number; code?: string; message?: string };
        throw new ApiError(e.status_code ?? 500, e.code ?? 'RUNNEL_ERR_INTERNAL', e.message ?? 'The stream failed');
      }
      onFrame(id === undefined ? { event, data: parsed } : { event, data: parsed, id });
      if (event === 'end') return 'end';
    }
  }
}

/** Rejoining a dropped run: the first wait, its ceiling (it doubles), and how long to keep trying. */
export const RECONNECT = { firstMs: 500, maxMs: 5_000, giveUpMs: 120_000 };

/** Waits `ms`, or less once the browser says it is back online or `stop` aborts. */
function pause(ms: number, stop: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      window.removeEventListener('online', done);
      stop.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    window.addEventListener('online', done);
    stop.addEventListener('abort', done);
  });
}

/** Answers worth another try: a replica shutting down or overloaded, a proxy without an upstream, a timeout. */
const retryable = (status: number): boolean => [408, 429, 502, 503, 504].includes(status);

/** A run as the server shows it (`GET {chain}runs/{id}`, and the cancel's answer). */
export interface RunView {
  run_id: string;
  status: string;
  output?: unknown;
  error?: { code?: string; message?: string };
}

/**
 * Why a durable run's promise rejects after a Stop: an AbortError, with the run as the cancel's answer showed
 * it — `cancelled`, or `success` when it finished before the cancel reached the server (then its output is
 * there) — or without one (stopped before the run had an id, or the cancel never got through).
 */
export class RunStopped extends Error {
  override readonly name = 'AbortError';
  constructor(
    readonly run: RunView | undefined,
    /** The cancel was retried until it gave up: the run may go on on the server. */
    readonly unreachable = false,
  ) {
    super('The run was stopped');
  }
}

/**
 * Cancels a run on the server (`POST {chain}runs/{id}/cancel`, which answers
 * once the run has ended) and resolves with the run as it answered. A request
 * that cannot get through is retried with the backoff of a reconnect (at
 * once when the browser comes back online), for up to
 * {@link RECONNECT}.giveUpMs; `onWaiting` hears each wait.
 */
export async function cancelRun(chain: string, runId: string, onWaiting?: () => void): Promise<{ reached: boolean; run?: RunView }> {
  const attempt = async (): Promise<{ done: boolean; reached?: boolean; run?: RunView }> => {
    try {
      // Declared JSON (an empty object): a browser's bodiless post is taken only from the server's own origin,
      // which a proxy that rewrites Host hides; declared JSON is taken from any page CORS lets send it.
      const res = await fetch(`${chain}runs/${encodeURIComponent(runId)}/cancel`, { method: 'POST', headers: headers(true), body: '{}' });
      if (retryable(res.status)) return { done: false };
      // Answered: cancelled (the run as it ended), or gone (404: nothing runs). Any other refusal (a key no
      // longer good) is an answer too, but not a cancel: the run may go on.
      const run = res.ok ? ((await res.json().catch(() => undefined)) as RunView | undefined) : undefined;
      return { done: true, reached: res.ok || res.status === 404, run };
    } catch {
      return { done: false };
    }
  };
  const never = new AbortController().signal;
  const deadline = Date.now() + RECONNECT.giveUpMs;
  for (let delay = RECONNECT.firstMs; ; delay = Math.min(delay * 2, RECONNECT.maxMs)) {
    const result = await attempt();
    if (result.done) return { reached: result.reached === true, run: result.run };
    if (Date.now() >= deadline) return { reached: false };
    onWaiting?.();
    await pause(delay, never);
  }
}

/** What a durable run tells its page. */
export interface RunCallbacks {
  /** Every frame of the run but `metadata`: `data`…, then `end`. */
  onFrame(frame: SseFrame): void;
  /** The connection dropped mid-run; rejoining. */
  onReconnecting?(): void;
  /** Rejoined: the frames after the last one seen follow. */
  onReconnected?(): void;
  /** Stopped, and the cancel cannot reach the server yet (offline): it is being retried. */
  onCancelWaiting?(): void;
  /** The run's id, once the server has named it (the `metadata` frame). */
  onRunId?(runId: string): void;
  /**
   * The server cannot keep runs apart from their connection now (Redis is
   * down): this one runs as a plain stream, and ends if the connection drops.
   */
  onNotDurable?(reason: string): void;
}

/**
 * Runs `{chain}{endpoint}` (`stream` or `stream_events`) with
 * `on_disconnect: "continue"`, so the run lives on the server whatever
 * happens to this connection. The `metadata` frame gives the run's id, and
 * every frame its own; when the connection drops (a network error, or a
 * body that ends before `end` or `error`), it rejoins through
 * `{chain}runs/{run_id}/stream` with `Last-Event-ID` — waiting
 * {@link RECONNECT}.firstMs, doubling up to maxMs, for up to giveUpMs per
 * outage, and at once when the browser comes back online — and goes on
 * with the frames after the last one seen: none lost, none twice.
 *
 * When the server cannot keep the run (503 `RUNNEL_ERR_REDIS_UNAVAILABLE`:
 * Redis is down), the run is asked for again as a plain stream, tied to this
 * connection as LangServe's are: it still runs and streams, Stop closes the
 * connection (which cancels it), and a drop ends it with an error saying so.
 *
 * Aborting `signal` stops it: the run is cancelled on the server (closing
 * the connection no longer does that), and the promise rejects with a
 * {@link RunStopped} once the server has answered the cancel. Stopped before the run
 * id is known, it rejects at once and cancels the run when its id arrives.
 * Throws ApiError for an HTTP error or an `error` frame.
 */
export function durableStream(chain: string, endpoint: 'stream' | 'stream_events', body: Record<string, unknown>, signal: AbortSignal, on: RunCallbacks): Promise<void> {
  return durableRun(chain, { endpoint, body }, signal, on);
}

/**
 * Follows a run this page started before (a reload mid-run): its frames from the first, as
 * {@link durableStream} reads a run it started — rejoined after a drop, stopped by `signal`. An ended run
 * replays to its end; one the server no longer knows is an ApiError 404.
 */
export function joinRun(chain: string, runId: string, signal: AbortSignal, on: RunCallbacks): Promise<void> {
  return durableRun(chain, { runId }, signal, on);
}

function durableRun(chain: string, start: { endpoint: 'stream' | 'stream_events'; body: Record<string, unknown> } | { runId: string }, signal: AbortSignal, on: RunCallbacks): Promise<void> {
  let runId: string | undefined = 'runId' in start ? start.runId : undefined;
  let lastId: string | undefined;
  /** Aborted by Stop: gates the callbacks and wakes a waiting reconnect. */
  const halt = new AbortController();
  /** The connection of the moment: cut by Stop, and when the browser goes offline (a dead socket may never fail by itself). */
  let connection = new AbortController();
  const cutConnection = (): void => connection.abort(new Error('The browser went offline'));
  window.addEventListener('offline', cutConnection);

  let stopped: Promise<{ reached: boolean; run?: RunView }> | undefined;
  /** A plain stream (the server could not keep the run): closing its connection is what cancels it. */
  let plain = false;
  const stop = (): void => {
    halt.abort();
    if (runId !== undefined && !plain) stopped ??= cancelRun(chain, runId, on.onCancelWaiting);
    // Before the run's id, the connection reads on to its first frame, which names the run: this is called
    // again then, and cancels it. (Cut, the run went on without it: a durable run outlives its connection.)
    if (runId !== undefined || plain) cutConnection();
  };

  const onFrame = (frame: SseFrame): void => {
    if (frame.id !== undefined) lastId = frame.id;
    if (frame.event === 'metadata') {
      const id = (frame.data as { run_id?: unknown } | undefined)?.run_id;
      if (runId === undefined && typeof id === 'string') {
        runId = id;
        on.onRunId?.(id);
      }
      if (halt.signal.aborted) stop();
      return;
    }
    if (!halt.signal.aborted) on.onFrame(frame);
  };

  /** Rejoins the run after a cut (or, `atOnce`, joins it) and reads on: `'end'`, or `'cut'` when stopped. */
  const rejoin = async (id: string, atOnce = false): Promise<'end' | 'cut'> => {
    let deadline = Date.now() + RECONNECT.giveUpMs;
    let delay = RECONNECT.firstMs;
    let first = atOnce;
    for (;;) {
      if (halt.signal.aborted) return 'cut';
      if (Date.now() >= deadline) throw new Error(`Lost the connection to the server; the run may go on there (run ${id})`);
      if (!first) {
        on.onReconnecting?.();
        await pause(delay, halt.signal);
        delay = Math.min(delay * 2, RECONNECT.maxMs);
      }
      first = false;
      if (halt.signal.aborted) return 'cut';
      connection = new AbortController();
      let res: Response;
      try {
        const resume: Record<string, string> = lastId === undefined ? {} : { 'last-event-id': lastId };
        res = await fetch(`${chain}runs/${encodeURIComponent(id)}/stream`, { headers: { ...headers(false), accept: 'text/event-stream', ...resume }, signal: connection.signal });
      } catch {
        continue;
      }
      if (retryable(res.status)) {
        res.body?.cancel().catch(() => undefined);
        continue;
      }
      if (!res.ok) throw await failure(res);
      if (!halt.signal.aborted && !atOnce) on.onReconnected?.();
      atOnce = false;
      const before = lastId;
      if ((await readFrames(res, onFrame)) === 'end') return 'end';
      if (lastId !== before) {
        // Frames came through: a new outage starts its own clock.
        deadline = Date.now() + RECONNECT.giveUpMs;
        delay = RECONNECT.firstMs;
      } else if (!halt.signal.aborted) {
        // Nothing new and no end: the run may have ended with its log gone. Its record says.
        const record = await getJson<{ status: string; error?: { code?: string; message?: string } }>(`${chain}runs/${encodeURIComponent(id)}`).catch(() => undefined);
        if (record?.status === 'success') return 'end';
        if (record?.status === 'error' || record?.status === 'cancelled') throw new ApiError(500, record.error?.code ?? 'RUNNEL_ERR_INTERNAL', record.error?.message ?? `The run ended ${record.status}`);
      }
    }
  };

  const work = (async (): Promise<void> => {
    if ('runId' in start) {
      if ((await rejoin(start.runId, true)) === 'end') return;
    }
    let outcome: 'end' | 'cut' = 'cut';
    if ('endpoint' in start) {
      const post = (body: Record<string, unknown>): Promise<Response> =>
        fetch(`${chain}${start.endpoint}`, { method: 'POST', headers: { ...headers(true), accept: 'text/event-stream' }, body: JSON.stringify(body), signal: connection.signal });
      let res = await post({ ...start.body, on_disconnect: 'continue' });
      if (res.status === 503) {
        const refused = await failure(res);
        if (refused.code !== 'RUNNEL_ERR_REDIS_UNAVAILABLE') throw refused;
        // Stopped meanwhile: nothing runs yet, and nothing is asked for.
        if (halt.signal.aborted) return;
        plain = true;
        on.onNotDurable?.(refused.message);
        res = await post(start.body);
      }
      if (!res.ok || res.body === null) throw await failure(res);
      outcome = await readFrames(res, onFrame);
    }
    if (plain && outcome === 'cut' && !halt.signal.aborted) {
      throw new Error('The connection was lost, and the run with it: the server could not keep the run apart from its connection (Redis is unavailable)');
    }
    while (outcome === 'cut' && !halt.signal.aborted) {
      // Without its id the run cannot be rejoined (it comes in the first frame).
      if (runId === undefined) throw new Error('The connection was lost before the run started');
      outcome = await rejoin(runId);
    }
  })();
  // After a Stop, `work` goes on only to learn the run id (to cancel it); how it ends is nobody's concern.
  void work.catch(() => undefined).finally(() => window.removeEventListener('offline', cutConnection));

  return new Promise<void>((resolve, reject) => {
    work.then(
      () => (halt.signal.aborted ? undefined : resolve()),
      (error: unknown) => (halt.signal.aborted ? undefined : reject(error)),
    );
    const onAbort = (): void => {
      stop();
      void (stopped ?? Promise.resolve<{ reached: boolean; run?: RunView }>({ reached: true })).then((cancel) => reject(new RunStopped(cancel.run, !cancel.reached)));
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
}
