/**
 * `RemoteRunnable`: a chain served by Runnel (or LangServe), used as a
 * runnable — it pipes into local chains like any other. invoke, batch,
 * stream, streamEvents and streamLog go over HTTP; messages and documents
 * come back as objects; aborting closes the connection.
 */
import {
  errorCodes,
  isRunnelError,
  Runnable,
  RunnelError,
  scopeFor,
  type BatchOptions,
  type ErrorCode,
  type EventFilters,
  type Run,
  type RunLogPatch,
  type RunnableConfig,
  type StreamEvent,
} from '../core/index.js';
import { revive } from './revive.js';
import { parseSse } from './sse.js';

/** Options of {@link RemoteRunnable}. */
export interface RemoteRunnableOptions {
  /** The chain's base URL: `http://host:8000/joke` (a `/c/{hash}` URL works too). */
  url: string;
  /** Sent with every request (e.g. `authorization`). */
  headers?: Record<string, string>;
  /** Milliseconds a whole call may take (streams included). */
  timeout?: number;
}

function errorFrom(status: number, body: unknown): RunnelError {
  const record = (body ?? {}) as { code?: unknown; message?: unknown; detail?: unknown; status_code?: unknown };
  const code = typeof record.code === 'string' && Object.hasOwn(errorCodes, record.code) ? (record.code as ErrorCode) : undefined;
  const message = typeof record.message === 'string' ? record.message : typeof record.detail === 'string' ? record.detail : `The server answered ${status}`;
  const fallback: ErrorCode = status === 401 ? 'RUNNEL_ERR_UNAUTHORIZED' : status === 404 ? 'RUNNEL_ERR_NOT_FOUND' : status === 422 ? 'RUNNEL_ERR_INPUT_INVALID' : status === 429 ? 'RUNNEL_ERR_RATE_LIMITED' : 'RUNNEL_ERR_INTERNAL';
  return new RunnelError(code ?? fallback, message, { detail: record.detail });
}

/**
 * A chain on a Runnel or LangServe server.
 *
 * @example
 * const joke = new RemoteRunnable({ url: 'http://127.0.0.1:8000/joke' });
 * await joke.invoke({ topic: 'cats' });
 * for await (const token of joke.stream({ topic: 'cats' })) process.stdout.write(token);
 */
export class RemoteRunnable<I = unknown, O = unknown> extends Runnable<I, O> {
  readonly name = 'RemoteRunnable';
  private readonly url: string;
  private readonly headers: Record<string, string>;
  private readonly timeout: number | undefined;

  constructor(options: RemoteRunnableOptions) {
    super();
    this.url = options.url.replace(/\/+$/, '');
    this.headers = options.headers ?? {};
    this.timeout = options.timeout;
  }

  /** The config a server may accept from a client: tags, metadata, configurable. */
  private wireConfig(config: { tags?: readonly string[]; metadata?: Readonly<Record<string, unknown>>; configurable?: Readonly<Record<string, unknown>> } | undefined): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    if (config?.tags !== undefined && config.tags.length > 0) out.tags = config.tags;
    if (config?.metadata !== undefined && Object.keys(config.metadata).length > 0) out.metadata = config.metadata;
    if (config?.configurable !== undefined && Object.keys(config.configurable).length > 0) out.configurable = config.configurable;
    return out;
  }

  private signal(signal: AbortSignal | undefined): AbortSignal | undefined {
    const signals = [signal, this.timeout === undefined ? undefined : AbortSignal.timeout(this.timeout)].filter((s): s is AbortSignal => s !== undefined);
    return signals.length <= 1 ? signals[0] : AbortSignal.any(signals);
  }

  private async post(path: string, body: unknown, signal: AbortSignal | undefined): Promise<Response> {
    let response: Response;
    try {
      response = await fetch(`${this.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: path.startsWith('/stream') ? 'text/event-stream' : 'application/json', ...this.headers },
        body: JSON.stringify(body),
        signal: this.signal(signal),
      });
    } catch (error) {
      if (signal?.aborted === true) throw new RunnelError('RUNNEL_ERR_ABORTED', 'The run was aborted', { cause: error });
      if ((error as Error).name === 'TimeoutError') throw new RunnelError('RUNNEL_ERR_TIMEOUT', `${this.url}${path} timed out`, { cause: error });
      throw new RunnelError('RUNNEL_ERR_PROVIDER_UNAVAILABLE', `Could not reach ${this.url}${path}`, { cause: error });
    }
    if (!response.ok) {
      const text = await response.text();
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = { message: text };
      }
      throw errorFrom(response.status, parsed);
    }
    return response;
  }

  protected override async _call(input: I, run: Run): Promise<O> {
    const response = await this.post('/invoke', { input, config: this.wireConfig(run.scope), kwargs: {} }, run.signal);
    return revive(((await response.json()) as { output: unknown }).output) as O;
  }

  /** The SSE `data` payloads of a streaming endpoint, revived; an `error` frame throws. */
  private async *frames(path: string, body: Record<string, unknown>, signal: AbortSignal | undefined): AsyncGenerator<unknown> {
    const response = await this.post(path, body, signal);
    if (response.body === null) return;
    try {
      for await (const message of parseSse(response.body as unknown as AsyncIterable<Uint8Array>)) {
        if (message.event === 'error') {
          let payload: unknown;
          try {
            payload = JSON.parse(message.data);
          } catch {
            payload = { message: message.data };
          }
          throw errorFrom(Number((payload as { status_code?: unknown }).status_code) || 500, payload);
        }
        if (message.event !== 'data' || message.data === '') continue;
        yield revive(JSON.parse(message.data));
      }
    } catch (error) {
      if (isRunnelError(error)) throw error;
      if (signal?.aborted === true) throw new RunnelError('RUNNEL_ERR_ABORTED', 'The run was aborted', { cause: error });
      throw new RunnelError('RUNNEL_ERR_PROVIDER_UNAVAILABLE', `${this.url}${path} broke off the stream`, { cause: error });
    }
  }

  protected override _stream(input: I, run: Run): AsyncGenerator<O> {
    return this.frames('/stream', { input, config: this.wireConfig(run.scope), kwargs: {} }, run.signal) as AsyncGenerator<O>;
  }

  /** One request to `/batch` for all inputs. */
  override batch(inputs: I[], config?: RunnableConfig | RunnableConfig[], options?: BatchOptions & { returnExceptions?: false }): Promise<O[]>;
  override batch(inputs: I[], config: RunnableConfig | RunnableConfig[] | undefined, options: BatchOptions & { returnExceptions: true }): Promise<(O | Error)[]>;
  override batch(inputs: I[], config?: RunnableConfig | RunnableConfig[], options?: BatchOptions): Promise<(O | Error)[]>;
  override async batch(inputs: I[], config?: RunnableConfig | RunnableConfig[], options: BatchOptions = {}): Promise<(O | Error)[]> {
    const configs = Array.isArray(config) ? config : inputs.map(() => config);
    const signal = (Array.isArray(config) ? config[0] : config)?.signal;
    try {
      const response = await this.post('/batch', { inputs, config: configs.map((c) => this.wireConfig(c)), kwargs: {} }, signal);
      return revive(((await response.json()) as { output: unknown[] }).output) as O[];
    } catch (error) {
      if (options.returnExceptions !== true) throw error;
      return inputs.map(() => error as Error);
    }
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
  override streamEvents(input: I, config?: RunnableConfig, filters?: EventFilters): AsyncGenerator<StreamEvent> {
    const scope = scopeFor(config);
    return this.frames('/stream_events', { input, config: this.wireConfig(config), kwargs: {}, ...this.filterBody(filters) }, scope.signal) as AsyncGenerator<StreamEvent>;
  }

  /** The remote chain's run log (from its `/stream_log`). */
  override streamLog(input: I, config?: RunnableConfig, filters?: EventFilters): AsyncGenerator<RunLogPatch> {
    const scope = scopeFor(config);
    return this.frames('/stream_log', { input, config: this.wireConfig(config), kwargs: {}, ...this.filterBody(filters) }, scope.signal) as AsyncGenerator<RunLogPatch>;
  }
}
