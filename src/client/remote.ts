/**
 * `RemoteRunnable`: a chain served by Runnel (or LangServe), used as a
 * runnable — it pipes into local chains like any other. invoke, batch,
 * stream, streamEvents and streamLog go over HTTP; messages and documents
 * come back as objects; aborting closes the connection. On Runnel, it also
 * submits background runs, waits for, joins and cancels them, and streams
 * durably: `onDisconnect: 'continue'` rejoins the run after a dropped
 * connection, so no chunk is lost or repeated.
 */
import {
  isRunnelError,
  publicMetadata,
  Runnable,
  RunnelError,
  scopeFor,
  toAbortSignal,
  type BatchOptions,
  type Cancellation,
  type EventFilters,
  type Run,
  type RunLogPatch,
  type RunnableConfig,
  type StreamEvent,
  type TokenUsage,
} from '../core/index.js';
import { errorFrom, errorFromFrame, errorFromResponse } from './errors.js';
import { DEFAULT_RESUME, followRun, runStream, type ResumeOptions, type RunCursor, type RunStream } from './follow.js';
import { revive } from './revive.js';
import { parseSse, type SseMessage } from './sse.js';

/** Options of {@link RemoteRunnable}. */
export interface RemoteRunnableOptions {
  /** The chain's base URL: `http://host:8000/joke` (a `/c/{hash}` URL works too); no user name or password in it (`headers` carry credentials). */
  url: string;
  /** Sent with every request (e.g. `authorization`). */
  headers?: Record<string, string>;
  /** Milliseconds a whole call may take (streams included, with their rejoins). */
  timeout?: number;
  /** The default of {@link RemoteCallOptions.onDisconnect} for this chain's streams (`'cancel'`). */
  onDisconnect?: 'cancel' | 'continue';
  /** How a durable stream or a join rejoins its run (5 rejoins in a row without a frame; at once, then 250 ms doubling up to 5 s). */
  resume?: ResumeOptions;
}

/** The options of one call: a {@link RunnableConfig}, and what to do when a stream's connection drops. */
export interface RemoteCallOptions extends RunnableConfig {
  /**
   * For `stream` and `streamEvents`: `'cancel'` (the default) — the server
   * aborts the run when the connection closes; `'continue'` (Runnel only) —
   * the server runs it in the background, and a dropped connection is
   * rejoined from the last frame received. Aborting then closes the
   * connection only: `cancel(runId)` stops the run.
   */
  onDisconnect?: 'cancel' | 'continue';
  /**
   * With `onDisconnect: 'continue'`: hears the run's id as soon as the server names it (the `metadata`
   * frame) — to `cancel` it, or `join` it later, after breaking out of the loop.
   */
  onRunId?: (runId: string) => void;
}

/** The state of a background run. */
export type RemoteRunStatus = 'pending' | 'running' | 'success' | 'error' | 'cancelled';

/** A background run's record, as the server gives it (docs/runs.md); `output` revived. */
export interface RemoteRunRecord<O = unknown> {
  run_id: string;
  chain: string;
  status: RemoteRunStatus;
  /** On success: the output, as `invoke` would give it. */
  output?: O;
  /** On error or cancellation: the code and message. */
  error?: { code: string; message: string };
  usage?: TokenUsage;
  created_at: string;
  updated_at: string;
}

/** Options of {@link RemoteRunnable.submit}. */
export interface SubmitOptions extends Pick<RunnableConfig, 'tags' | 'metadata' | 'configurable' | 'signal'> {
  /** An https URL on one of the server's `RUNNEL_WEBHOOK_HOSTS`: the record is POSTed there, signed, when the run ends. */
  webhook?: string;
}

/** Options of {@link RemoteRunnable.wait}. */
export interface WaitOptions {
  /** Seconds the server waits for the end (0–300; the server's default is 30). */
  timeoutS?: number;
  signal?: AbortSignal;
}

/** Options of {@link RemoteRunnable.join}. */
export interface JoinOptions {
  /** The id of the last frame already received: the stream goes on after it (without: from the start). */
  lastEventId?: string;
  signal?: AbortSignal;
}

/** One call's signals: the caller's, and the one requests use (with the client's timeout). */
interface Call {
  caller: AbortSignal | undefined;
  signal: AbortSignal | undefined;
}

interface RequestSpec {
  method: 'GET' | 'POST';
  body?: unknown;
  headers?: Record<string, string>;
  /** Statuses besides 2xx whose body is an answer, not an error. */
  alsoOk?: readonly number[];
}

/** How many `/invoke` calls a `batch` with `returnExceptions` makes at once when its config does not say. */
const PER_ITEM_CONCURRENCY = 4;

/** `config` with a `maxConcurrency` for per-item calls: the first config's (which the batch reads), or the default. */
function withConcurrency(config: RunnableConfig | RunnableConfig[] | undefined): RunnableConfig | RunnableConfig[] | undefined {
  if (Array.isArray(config)) {
    const first = config[0];
    return first === undefined || first.maxConcurrency !== undefined ? config : [{ ...first, maxConcurrency: PER_ITEM_CONCURRENCY }, ...config.slice(1)];
  }
  return config?.maxConcurrency !== undefined ? config : { ...config, maxConcurrency: PER_ITEM_CONCURRENCY };
}

/**
 * A chain on a Runnel or LangServe server.
 *
 * @example
 * const joke = new RemoteRunnable({ url: 'http://127.0.0.1:8000/joke' });
 * await joke.invoke({ topic: 'cats' });
 * for await (const token of joke.stream({ topic: 'cats' })) process.stdout.write(token);
 */
export class RemoteRunnable<I = unknown, O = unknown> extends Runnable<I, O, RemoteCallOptions> {
  readonly name = 'RemoteRunnable';
  private readonly url: string;
  private readonly headers: Record<string, string>;
  private readonly timeout: number | undefined;
  private readonly onDisconnect: 'cancel' | 'continue';
  private readonly resume: Required<ResumeOptions>;

  constructor(options: RemoteRunnableOptions) {
    super();
    // fetch refuses a URL with a user name or password, so every call failed, with an error quoting the URL —
    // which a served chain's clients read ("Could not reach http://user:password@…"). Said here, without the URL.
    const parsed = URL.parse(options.url);
    if (parsed !== null && (parsed.username !== '' || parsed.password !== '')) {
      throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'RemoteRunnable: the url must not carry a user name or password (fetch refuses it); send credentials in headers, e.g. { authorization: "Basic …" }');
    }
    this.url = options.url.replace(/\/+$/, '');
    this.headers = options.headers ?? {};
    this.timeout = options.timeout;
    this.onDisconnect = options.onDisconnect ?? 'cancel';
    this.resume = { ...DEFAULT_RESUME, ...options.resume };
  }

  /**
   * The config a server may accept from a client: tags, metadata, configurable. Internal metadata (keys
   * starting with `__`: the caller's identity and cache partition a Runnel server sets, trace ids) stays in this
   * process: a chain calling a remote one sent its callers' key names to that server (a probe).
   */
  private wireConfig(config: { tags?: readonly string[]; metadata?: Readonly<Record<string, unknown>>; configurable?: Readonly<Record<string, unknown>> } | undefined): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    if (config?.tags !== undefined && config.tags.length > 0) out.tags = config.tags;
    const metadata = config?.metadata === undefined ? {} : publicMetadata(config.metadata);
    if (Object.keys(metadata).length > 0) out.metadata = metadata;
    if (config?.configurable !== undefined && Object.keys(config.configurable).length > 0) out.configurable = config.configurable;
    return out;
  }

  private call(cancellation: Cancellation | undefined): Call {
    const caller = toAbortSignal(cancellation);
    const signals = [caller, this.timeout === undefined ? undefined : AbortSignal.timeout(this.timeout)].filter((s): s is AbortSignal => s !== undefined);
    return { caller, signal: signals.length <= 1 ? signals[0] : AbortSignal.any(signals) };
  }

  /** The error for a failure of a call: aborted, timed out, or `what` (the server could not be reached, a stream broke off). */
  private failure(error: unknown, call: Call, what: string): RunnelError {
    if (isRunnelError(error)) return error;
    if (call.caller?.aborted === true) return new RunnelError('RUNNEL_ERR_ABORTED', 'The run was aborted', { cause: error });
    if (call.signal?.aborted === true) return new RunnelError('RUNNEL_ERR_TIMEOUT', `${this.url} timed out (after ${this.timeout} ms)`, { cause: error });
    return new RunnelError('RUNNEL_ERR_PROVIDER_UNAVAILABLE', what, { cause: error });
  }

  /** One request; a failed answer throws the server's error. */
  private async request(path: string, init: RequestSpec, call: Call): Promise<Response> {
    const sse = path.startsWith('/stream') || path.endsWith('/stream');
    let response: Response;
    try {
      response = await fetch(`${this.url}${path}`, {
        method: init.method,
        headers: {
          ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
          accept: sse ? 'text/event-stream' : 'application/json',
          ...this.headers,
          ...init.headers,
        },
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
        signal: call.signal,
      });
    } catch (error) {
      throw this.failure(error, call, `Could not reach ${this.url}${path}`);
    }
    if (!response.ok && !(init.alsoOk ?? []).includes(response.status)) throw await errorFromResponse(response);
    return response;
  }

  private post(path: string, body: unknown, caller: Cancellation | undefined): Promise<Response> {
    return this.request(path, { method: 'POST', body }, this.call(caller));
  }

  protected override async _call(input: I, run: Run): Promise<O> {
    const response = await this.post('/invoke', { input, config: this.wireConfig(run.scope), kwargs: {} }, run.signal);
    return revive(((await response.json()) as { output: unknown }).output) as O;
  }

  /**
   * The SSE `data` payloads of a streaming endpoint, revived; an `error` frame throws, and so does a body that
   * ends before the `end` frame (a proxy that closed it cleanly): a cut answer is not a whole one.
   */
  private async *frames(path: string, body: Record<string, unknown>, caller: Cancellation | undefined): AsyncGenerator<unknown> {
    const call = this.call(caller);
    const response = await this.request(path, { method: 'POST', body }, call);
    const cut = (): RunnelError => new RunnelError('RUNNEL_ERR_PROVIDER_UNAVAILABLE', `${this.url}${path} broke off the stream before its end`);
    if (response.body === null) throw cut();
    try {
      for await (const message of parseSse(response.body as unknown as AsyncIterable<Uint8Array>)) {
        if (message.event === 'error') throw errorFromFrame(message.data);
        if (message.event === 'end') return;
        if (message.event !== 'data' || message.data === '') continue;
        yield revive(JSON.parse(message.data));
      }
    } catch (error) {
      throw this.failure(error, call, `${this.url}${path} broke off the stream`);
    }
    throw cut();
  }

  /** The SSE messages of a response. */
  private async *messages(response: Response): AsyncGenerator<SseMessage> {
    if (response.body !== null) yield* parseSse(response.body as unknown as AsyncIterable<Uint8Array>);
  }

  /** A run's frames from `/runs/{run_id}/stream`, after the cursor's last frame. */
  private async runFrames(cursor: Readonly<RunCursor>, call: Call): Promise<AsyncIterable<SseMessage>> {
    const headers: Record<string, string> = cursor.lastEventId === undefined ? {} : { 'last-event-id': cursor.lastEventId };
    const response = await this.request(`${this.runPath(cursor.runId as string)}/stream`, { method: 'GET', headers }, call);
    if (response.status !== 204) return this.messages(response);
    // 204: the run has ended, and nothing of its log follows that id (it was its last). Its record says how
    // it ended: that, as the frame a stream ends with.
    await response.body?.cancel().catch(() => undefined);
    const record = (await (await this.request(this.runPath(cursor.runId as string), { method: 'GET' }, call)).json()) as { status?: string; error?: { code?: string; message?: string } };
    const last: SseMessage =
      record.status === 'success'
        ? { event: 'end', data: '' }
        : { event: 'error', data: JSON.stringify(record.error ?? { code: 'RUNNEL_ERR_INTERNAL', message: `The run ended ${record.status ?? 'without a status'}` }) };
    return (async function* () {
      yield last;
    })();
  }

  /** Follows a run from the cursor on, rejoining it when the connection drops. */
  private follow(cursor: RunCursor, first: ((call: Call) => Promise<AsyncIterable<SseMessage>>) | undefined, where: string, caller: AbortSignal | undefined, onRunId?: (runId: string) => void): AsyncGenerator<unknown> {
    const call = this.call(caller);
    return followRun(cursor, {
      connect: (at, rejoin) => (rejoin || first === undefined ? this.runFrames(at, call) : first(call)),
      resume: this.resume,
      signal: call.signal,
      failure: (error) => this.failure(error, call, `${where} broke off the stream`),
      where,
      onRunId,
    });
  }

  /** `/stream` or `/stream_events` with `on_disconnect: "continue"`: a background run, followed and rejoined. */
  private durable(path: '/stream' | '/stream_events', body: Record<string, unknown>, caller: Cancellation | undefined, onRunId: ((runId: string) => void) | undefined): AsyncGenerator<unknown> {
    const first = async (call: Call) => this.messages(await this.request(path, { method: 'POST', body: { ...body, on_disconnect: 'continue' } }, call));
    return this.follow({}, first, `${this.url}${path}`, toAbortSignal(caller), onRunId);
  }

  private streamFrames(path: '/stream' | '/stream_events', body: Record<string, unknown>, options: RemoteCallOptions | undefined, caller: Cancellation | undefined): AsyncGenerator<unknown> {
    return (options?.onDisconnect ?? this.onDisconnect) === 'continue' ? this.durable(path, body, caller, options?.onRunId) : this.frames(path, body, caller);
  }

  protected override _stream(input: I, run: Run): AsyncGenerator<O> {
    const body = { input, config: this.wireConfig(run.scope), kwargs: {} };
    return this.streamFrames('/stream', body, run.options as RemoteCallOptions, run.signal) as AsyncGenerator<O>;
  }

  /** One request to `/batch` for all inputs; with `returnExceptions`, one `/invoke` each (the server refuses a batch whole). */
  override batch(inputs: I[], config?: RunnableConfig | RunnableConfig[], options?: BatchOptions & { returnExceptions?: false }): Promise<O[]>;
  override batch(inputs: I[], config: RunnableConfig | RunnableConfig[] | undefined, options: BatchOptions & { returnExceptions: true }): Promise<(O | Error)[]>;
  override batch(inputs: I[], config?: RunnableConfig | RunnableConfig[], options?: BatchOptions): Promise<(O | Error)[]>;
  override async batch(inputs: I[], config?: RunnableConfig | RunnableConfig[], options: BatchOptions = {}): Promise<(O | Error)[]> {
    // The server answers a batch whole or refuses it whole: each position's own outcome needs its own call —
    // at most PER_ITEM_CONCURRENCY at once unless the config says how many (a server's rate limit counts each).
    if (options.returnExceptions === true) return super.batch(inputs, withConcurrency(config), options);
    const configs = Array.isArray(config) ? config : inputs.map(() => config);
    const signal = (Array.isArray(config) ? config[0] : config)?.signal;
    const response = await this.post('/batch', { inputs, config: configs.map((c) => this.wireConfig(c)), kwargs: {} }, signal);
    return revive(((await response.json()) as { output: unknown[] }).output) as O[];
  }

  private filterBody(filters: EventFilters | undefined): Record<string, unknown> {
    const f = filters ?? {};
    return {
      include_names: f.includeNames ?? null,
      include_types: f.includeTypes ?? null,
      include_tags: f.includeTags ?? null,
      exclude_names: f.excludeNames ?? null,
      exclude_types: f.excludeTypes ?? null,
      exclude_tags: f.excludeTags ?? null,
    };
  }

  /** The remote chain's own events (from its `/stream_events`). */
  override streamEvents(input: I, config?: RemoteCallOptions, filters?: EventFilters): AsyncGenerator<StreamEvent> {
    const scope = scopeFor(config);
    const body = { input, config: this.wireConfig(config), kwargs: {}, ...this.filterBody(filters) };
    return this.streamFrames('/stream_events', body, config, scope.signal) as AsyncGenerator<StreamEvent>;
  }

  /** The remote chain's run log (from its `/stream_log`). */
  override streamLog(input: I, config?: RunnableConfig, filters?: EventFilters): AsyncGenerator<RunLogPatch> {
    const scope = scopeFor(config);
    return this.frames('/stream_log', { input, config: this.wireConfig(config), kwargs: {}, ...this.filterBody(filters) }, scope.signal) as AsyncGenerator<RunLogPatch>;
  }

  private runPath(runId: string): string {
    return `/runs/${encodeURIComponent(runId)}`;
  }

  /** A run record from its response; a body that is not one (a proxy's 408) is an error. */
  private async record(response: Response): Promise<RemoteRunRecord<O>> {
    const text = await response.text();
    let body: Partial<RemoteRunRecord<unknown>> | null = null;
    try {
      body = JSON.parse(text) as Partial<RemoteRunRecord<unknown>> | null;
    } catch {
      // Not JSON: not a record either.
    }
    if (typeof body?.run_id !== 'string' || typeof body.status !== 'string') {
      if (!response.ok) throw errorFrom(response.status, body ?? { message: text });
      throw new RunnelError('RUNNEL_ERR_INTERNAL', `${response.url} answered something that is not a run record`);
    }
    return { ...body, ...(body.output === undefined ? {} : { output: revive(body.output) as O }) } as RemoteRunRecord<O>;
  }

  /**
   * Runs the chain in the background (`POST /runs`), validated as `invoke`
   * validates; answers the record (`pending`).
   *
   * @example
   * const run = await joke.submit({ topic: 'cats' }, { webhook: 'https://hooks.example.com/runnel' });
   */
  async submit(input: I, options: SubmitOptions = {}): Promise<RemoteRunRecord<O>> {
    const body = { input, config: this.wireConfig(options), kwargs: {}, ...(options.webhook === undefined ? {} : { webhook: options.webhook }) };
    return this.record(await this.request('/runs', { method: 'POST', body }, this.call(options.signal)));
  }

  /**
   * A run's record as it is now (`GET /runs/{run_id}`).
   *
   * @example
   * const { status } = await joke.getRun(runId);
   */
  async getRun(runId: string, options: { signal?: AbortSignal } = {}): Promise<RemoteRunRecord<O>> {
    return this.record(await this.request(this.runPath(runId), { method: 'GET' }, this.call(options.signal)));
  }

  /**
   * Waits until the run ends (`GET /runs/{run_id}/wait`) and answers its
   * record. A run still going when the server's wait is over (its 408) is
   * not an error: the record says `pending` or `running`. A run that ended
   * in error is not thrown either: `status` and `error` say so.
   *
   * @example
   * const record = await joke.wait(run.run_id, { timeoutS: 60 });
   * if (record.status === 'success') console.log(record.output);
   */
  async wait(runId: string, options: WaitOptions = {}): Promise<RemoteRunRecord<O>> {
    const query = options.timeoutS === undefined ? '' : `?timeout_s=${encodeURIComponent(options.timeoutS)}`;
    return this.record(await this.request(`${this.runPath(runId)}/wait${query}`, { method: 'GET', alsoOk: [408] }, this.call(options.signal)));
  }

  /**
   * The run's output chunks (`GET /runs/{run_id}/stream`), revived as
   * `stream` revives them: from the start (a finished run replays), or after
   * `lastEventId`. A dropped connection is rejoined after the last frame
   * received, which the returned stream keeps in `lastEventId`; an `error`
   * frame (a failed or cancelled run) throws its error.
   *
   * @example
   * for await (const token of joke.join(runId, { lastEventId })) process.stdout.write(token);
   */
  join(runId: string, options: JoinOptions = {}): RunStream<O> {
    const cursor: RunCursor = { runId, ...(options.lastEventId === undefined ? {} : { lastEventId: options.lastEventId }) };
    return runStream(this.follow(cursor, undefined, `${this.url}${this.runPath(runId)}/stream`, options.signal) as AsyncGenerator<O>, cursor);
  }

  /**
   * Cancels the run wherever it runs (`POST /runs/{run_id}/cancel`); answers
   * its record once it has ended (or after the server's 2 s).
   *
   * @example
   * const { status } = await joke.cancel(runId); // 'cancelled'
   */
  async cancel(runId: string, options: { signal?: AbortSignal } = {}): Promise<RemoteRunRecord<O>> {
    // Declared JSON: from a page, a bodiless post is taken only from the server's own origin (refuseCrossSitePost).
    return this.record(await this.request(`${this.runPath(runId)}/cancel`, { method: 'POST', body: {} }, this.call(options.signal)));
  }
}
