/**
 * OpenTelemetry traces of every run, built on the core's own run events: a
 * run-event callback opens a span when a run starts and ends it when the run
 * ends or fails, nested as the runs nest, under the span of the HTTP request
 * that started the tree (which continues a caller's `traceparent`). Chat
 * model spans follow the GenAI semantic conventions; retriever spans count
 * their documents; a failed run's span has an error status and its Runnel
 * code. A model's own HTTP request carries its span's `traceparent`
 * (`traceHeaders` in propagation.ts). Content (inputs, outputs, prompts, completions) is
 * recorded only when the config says so.
 *
 * Off (no OTLP endpoint), nothing here runs: no callback is attached and the
 * runs stay unobserved.
 */
import { randomFillSync } from 'node:crypto';
import { cutText, lifecycleCallback, type EventCallback, type StreamEvent, type TokenUsage } from '../core/index.js';
import type { TracingConfig } from './config.js';
import { BatchExporter, SpanKinds, StatusCodes, type AttributeValue, type SpanData } from './otlp.js';
import { openSpans } from './propagation.js';
import { redactUrlCredentials } from './redact.js';

/** A W3C trace context: the trace, the parent span, whether the caller samples it, its `tracestate`. */
export interface TraceContext {
  traceId: string;
  spanId: string;
  sampled: boolean;
  traceState: string;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZEROS = /^0+$/;
const PRINTABLE = /^[\x20-\x7e]*$/;

/**
 * The context a `traceparent` header names, or undefined for none or a malformed one (W3C Trace Context:
 * version `ff` and all-zero ids are invalid; a later version may add fields after the four it knows).
 *
 * @example
 * parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')?.sampled; // true
 */
export function parseTraceparent(traceparent: string | undefined, tracestate?: string): TraceContext | undefined {
  if (traceparent === undefined) return undefined;
  const match = TRACEPARENT.exec(traceparent.trim());
  if (match === null) return undefined;
  const [, version, traceId, spanId, flags, rest] = match as unknown as [string, string, string, string, string, string | undefined];
  if (version === 'ff' || (version === '00' && rest !== undefined) || ZEROS.test(traceId) || ZEROS.test(spanId)) return undefined;
  // tracestate is kept as the caller sent it, when it is within the spec's 512 characters and its printable
  // ASCII (it goes on to the model providers' requests, whose clients refuse other header bytes).
  const state = tracestate !== undefined && tracestate.length <= 512 && PRINTABLE.test(tracestate) ? tracestate.trim() : '';
  return { traceId, spanId, sampled: (Number.parseInt(flags, 16) & 1) === 1, traceState: state };
}

/** Random ids from a pooled buffer: one system call per 256 spans. */
const idPool = Buffer.allocUnsafe(4096);
let idAt = idPool.length;
function randomHex(bytes: number): string {
  for (;;) {
    if (idAt + bytes > idPool.length) {
      randomFillSync(idPool);
      idAt = 0;
    }
    const id = idPool.toString('hex', idAt, idAt + bytes);
    idAt += bytes;
    if (!ZEROS.test(id)) return id;
  }
}

const timeOrigin = performance.timeOrigin;
const nowNanos = (): number => (timeOrigin + performance.now()) * 1e6;

/** One span: recorded and exported when it ends if its trace is sampled; otherwise it only carries ids. */
export class Span implements SpanData {
  readonly spanId = randomHex(8);
  readonly startNanos = nowNanos();
  endNanos = 0;
  readonly attributes: Record<string, AttributeValue>;
  statusCode: number = StatusCodes.unset;
  statusMessage = '';

  constructor(
    private readonly exporter: BatchExporter | undefined,
    readonly traceId: string,
    readonly parentSpanId: string,
    readonly traceState: string,
    public name: string,
    readonly kind: number,
    attributes: Record<string, AttributeValue>,
  ) {
    this.attributes = attributes;
  }

  /** Whether the span is recorded (its trace is sampled). */
  get sampled(): boolean {
    return this.exporter !== undefined;
  }

  /** The span's W3C `traceparent`, for what runs under it. */
  get traceparent(): string {
    return `00-${this.traceId}-${this.spanId}-${this.sampled ? '01' : '00'}`;
  }

  setAttribute(key: string, value: AttributeValue): void {
    if (this.exporter !== undefined && this.endNanos === 0) this.attributes[key] = value;
  }

  /** Marks the span failed (OTLP status ERROR) with `message`. */
  setError(message: string): void {
    this.statusCode = StatusCodes.error;
    this.statusMessage = message;
  }

  end(): void {
    if (this.endNanos !== 0) return;
    this.endNanos = nowNanos();
    this.exporter?.add(this);
  }
}

/** Content recorded on a span is cut at this many characters. */
const CONTENT_LIMIT = 8_192;

/** A content attribute's text: JSON (a string as it is), cut at CONTENT_LIMIT characters. @internal */
export function json(value: unknown): string {
  let text: string;
  try {
    text = typeof value === 'string' ? value : JSON.stringify(value);
  } catch {
    text = String(value);
  }
  return cutText(text, CONTENT_LIMIT);
}

/** The Runnel code in a run event's error text (`RUNNEL_ERR_X: message`), else the error's name. */
function errorCode(error: unknown): string {
  const text = String(error ?? '');
  return /^([A-Z][A-Z0-9_]*|[A-Za-z]*Error):/.exec(text)?.[1] ?? 'Error';
}

/** What the GenAI conventions call the operation of a run type, where they name one. */
function spanName(event: StreamEvent, type: string, root: boolean): string {
  const metadata = event.metadata as Record<string, unknown>;
  if (type === 'chat_model' || type === 'llm') return `chat ${String(metadata.ls_model_name ?? event.name)}`;
  if (type === 'tool') return `execute_tool ${event.name}`;
  if (type === 'embedding') return `embeddings ${event.name}`;
  return root ? event.name : `${type} ${event.name}`;
}

/** A message as the GenAI conventions' JSON schemas write it: a role and its parts. */
interface GenAiMessage {
  role: string;
  parts: Record<string, unknown>[];
  name?: string;
  finish_reason?: string;
}

const GEN_AI_ROLES: Record<string, string> = { human: 'user', HumanMessageChunk: 'user', ai: 'assistant', AIMessageChunk: 'assistant', system: 'system', SystemMessageChunk: 'system', tool: 'tool', ToolMessageChunk: 'tool' };

/** A content's parts: text as `text` parts, an image's URL as a `uri` part, any other block as it is (a generic part). */
function contentParts(content: unknown): Record<string, unknown>[] {
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', content }];
  if (!Array.isArray(content)) return content === undefined || content === null ? [] : [{ type: 'text', content: json(content) }];
  return content.map((block: unknown) => {
    const part = (block ?? {}) as Record<string, unknown>;
    if (typeof block === 'string') return { type: 'text', content: block };
    if (part.type === 'text' && typeof part.text === 'string') return { type: 'text', content: part.text };
    if (part.type === 'image_url') {
      const url = typeof part.image_url === 'string' ? part.image_url : (part.image_url as { url?: unknown } | undefined)?.url;
      if (typeof url === 'string') return { type: 'uri', modality: 'image', uri: url };
    }
    return typeof part.type === 'string' ? part : { type: 'unknown', content: json(block) };
  });
}

/**
 * A message (Runnel's, or its LangServe JSON) as a GenAI message: `human` → `user`, `ai` → `assistant`, a
 * `chat` message's own role; its tool calls as `tool_call` parts, a tool's answer as a `tool_call_response`.
 */
function genAiMessage(value: unknown): GenAiMessage {
  if (typeof value === 'string') return { role: 'user', parts: contentParts(value) };
  const message = (value ?? {}) as { type?: unknown; role?: unknown; content?: unknown; name?: unknown; tool_calls?: unknown; tool_call_id?: unknown };
  const type = typeof message.type === 'string' ? message.type : '';
  const role = GEN_AI_ROLES[type] ?? (typeof message.role === 'string' ? message.role : type === '' ? 'user' : type);
  const parts =
    role === 'tool'
      ? [{ type: 'tool_call_response', ...(typeof message.tool_call_id === 'string' ? { id: message.tool_call_id } : {}), response: typeof message.content === 'string' ? message.content : message.content ?? null }]
      : contentParts(message.content);
  if (Array.isArray(message.tool_calls)) {
    for (const call of message.tool_calls as { id?: unknown; name?: unknown; args?: unknown }[]) {
      parts.push({ type: 'tool_call', ...(typeof call.id === 'string' ? { id: call.id } : {}), name: String(call.name ?? ''), arguments: call.args ?? {} });
    }
  }
  return typeof message.name === 'string' && message.name !== '' ? { role, parts, name: message.name } : { role, parts };
}

/**
 * A chat model run's messages, as GenAI's `gen_ai.input.messages` lists them: one conversation, not
 * LangServe's batch of them (the start event's `{messages: [[...]]}`), each message in the conventions' shape.
 */
function inputMessages(input: unknown): GenAiMessage[] {
  let messages = (input as { messages?: unknown } | null)?.messages ?? input;
  if (Array.isArray(messages) && messages.length === 1 && Array.isArray(messages[0])) messages = messages[0];
  if (typeof messages === 'string') return [{ role: 'user', parts: [{ type: 'text', content: messages }] }];
  return Array.isArray(messages) ? messages.map(genAiMessage) : [genAiMessage(messages)];
}

/** A provider's finish reason as the conventions name it (`stop`, `length`, `content_filter`, `tool_call`), else as it came. */
function genAiFinishReason(reason: string): string {
  if (reason === 'end_turn' || reason === 'stop_sequence') return 'stop';
  if (reason === 'max_tokens') return 'length';
  if (reason === 'tool_calls' || reason === 'tool_use' || reason === 'function_call') return 'tool_call';
  return reason;
}

/** The attributes a run's span opens with. */
function startAttributes(event: StreamEvent, type: string, content: boolean): Record<string, AttributeValue> {
  const metadata = event.metadata as Record<string, unknown>;
  const attributes: Record<string, AttributeValue> = { 'runnel.run_id': event.run_id, 'runnel.run_type': type };
  if (type === 'chat_model' || type === 'llm') {
    attributes['gen_ai.operation.name'] = 'chat';
    if (typeof metadata.ls_provider === 'string') {
      attributes['gen_ai.provider.name'] = metadata.ls_provider;
      attributes['gen_ai.system'] = metadata.ls_provider;
    }
    if (typeof metadata.ls_model_name === 'string') attributes['gen_ai.request.model'] = metadata.ls_model_name;
    if (typeof metadata.ls_temperature === 'number') attributes['gen_ai.request.temperature'] = metadata.ls_temperature;
    if (typeof metadata.ls_max_tokens === 'number') attributes['gen_ai.request.max_tokens'] = metadata.ls_max_tokens;
    if (content && event.data.input !== undefined) attributes['gen_ai.input.messages'] = json(inputMessages(event.data.input));
  } else if (type === 'tool') {
    attributes['gen_ai.operation.name'] = 'execute_tool';
    attributes['gen_ai.tool.name'] = event.name;
    const call = event.data.input as { id?: unknown } | undefined;
    if (typeof call?.id === 'string') attributes['gen_ai.tool.call.id'] = call.id;
    if (content && event.data.input !== undefined) attributes['runnel.input'] = json(event.data.input);
  } else if (content && event.data.input !== undefined) {
    attributes['runnel.input'] = json(event.data.input);
  }
  return attributes;
}

/** What a run's end adds to its span. */
function endAttributes(span: Span, type: string, output: unknown, content: boolean): void {
  if (type === 'chat_model' || type === 'llm') {
    const message = output as { usage_metadata?: Partial<TokenUsage>; response_metadata?: Record<string, unknown>; text?: string; content?: unknown } | undefined;
    const usage = message?.usage_metadata;
    if (typeof usage?.input_tokens === 'number') span.setAttribute('gen_ai.usage.input_tokens', usage.input_tokens);
    if (typeof usage?.output_tokens === 'number') span.setAttribute('gen_ai.usage.output_tokens', usage.output_tokens);
    // Parts of the counts above, as the GenAI conventions name them.
    const { cache_read, cache_creation } = usage?.input_token_details ?? {};
    if (typeof cache_read === 'number') span.setAttribute('gen_ai.usage.cache_read.input_tokens', cache_read);
    if (typeof cache_creation === 'number') span.setAttribute('gen_ai.usage.cache_creation.input_tokens', cache_creation);
    const reasoning = usage?.output_token_details?.reasoning;
    if (typeof reasoning === 'number') span.setAttribute('gen_ai.usage.reasoning.output_tokens', reasoning);
    const finish = message?.response_metadata?.finish_reason ?? message?.response_metadata?.stop_reason;
    if (typeof finish === 'string') span.setAttribute('gen_ai.response.finish_reasons', [finish]);
    const model = message?.response_metadata?.model_name ?? message?.response_metadata?.model;
    if (typeof model === 'string') span.setAttribute('gen_ai.response.model', model);
    if (content) span.setAttribute('gen_ai.output.messages', json([{ ...genAiMessage(output), role: 'assistant', finish_reason: typeof finish === 'string' ? genAiFinishReason(finish) : 'stop' }]));
    return;
  }
  if (type === 'retriever' && Array.isArray(output)) span.setAttribute('runnel.retriever.documents', output.length);
  if (content && output !== undefined) span.setAttribute('runnel.output', json(output));
}

/** Whether a new trace (no parent) is sampled, by the root sampler `config` names. */
function rootSampler(config: TracingConfig): (traceId: string) => boolean {
  switch (config.sampler) {
    case 'always_off':
    case 'parentbased_always_off':
      return () => false;
    case 'traceidratio':
    case 'parentbased_traceidratio': {
      // Decided by the trace id's last 56 bits (the W3C random part), so every Runnel process sampling at the
      // same ratio keeps the same traces. (Other OpenTelemetry SDKs each use their own rule.)
      const bound = config.ratio * 2 ** 56;
      return (traceId) => Number.parseInt(traceId.slice(18), 16) < bound;
    }
    default:
      return () => true;
  }
}

/** An HTTP request's span, and the `traceparent` its runs continue. */
export interface RequestSpan {
  span: Span;
  traceparent: string;
  traceId: string;
  spanId: string;
}

/**
 * The server's tracing: spans for HTTP requests and for every run, exported in batches over OTLP/HTTP.
 * Spans are Runnel's own small records, encoded straight to OTLP (`otlp.ts`), not the OpenTelemetry
 * SDK's (see docs/decisions/2026-12-02-own-span-recorder.md).
 *
 * @example
 * const tracing = new Tracing(loadTracingConfig(process.env)!);
 * const callbacks = [tracing.runCallback(request.traceparent)];
 */
export class Tracing {
  readonly content: boolean;
  readonly exporter: BatchExporter;
  private readonly sampleRoot: (traceId: string) => boolean;
  private readonly parentBased: boolean;

  constructor(config: TracingConfig, options: { version?: string } = {}) {
    this.exporter = new BatchExporter(config, {
      resource: { ...config.resourceAttributes, 'service.name': config.serviceName, ...(options.version === undefined ? {} : { 'service.version': options.version }) },
      scope: { name: 'runnel', version: options.version },
    });
    this.sampleRoot = rootSampler(config);
    this.parentBased = config.sampler.startsWith('parentbased_');
    this.content = config.content;
  }

  /**
   * Says each export the collector did not take (a wrong endpoint, a collector down or refusing) through `warn`,
   * a minute at most apart, with why and the spans dropped since; never the endpoint, whose URL may hold credentials.
   */
  warnOnDroppedSpans(warn: (fields: Record<string, unknown>, message: string) => void): void {
    this.exporter.onFailure = (reason, dropped) => warn({ dropped_spans: dropped }, `tracing: spans dropped: ${reason}; ${dropped} spans dropped since the last warning`);
  }

  /** Starts a span under `parent` (a new trace when there is none), sampled as the configuration says. */
  startSpan(name: string, kind: number, parent: TraceContext | Span | undefined, attributes: () => Record<string, AttributeValue>): Span {
    if (parent === undefined) {
      const traceId = randomHex(16);
      const sampled = this.sampleRoot(traceId);
      return new Span(sampled ? this.exporter : undefined, traceId, '', '', name, kind, sampled ? attributes() : {});
    }
    const sampled = parent instanceof Span ? parent.sampled : this.parentBased ? parent.sampled : this.sampleRoot(parent.traceId);
    return new Span(sampled ? this.exporter : undefined, parent.traceId, parent.spanId, parent.traceState, name, kind, sampled ? attributes() : {});
  }

  /** Opens the span of an HTTP request, continuing the caller's `traceparent` when it sends one. */
  startRequest(method: string, route: string | undefined, path: string, headers: Record<string, string | string[] | undefined>): RequestSpan {
    const header = (name: string): string | undefined => {
      const value = headers[name];
      return Array.isArray(value) ? value[0] : value;
    };
    const span = this.startSpan(route === undefined ? method : `${method} ${route}`, SpanKinds.server, parseTraceparent(header('traceparent'), header('tracestate')), () => ({
      'http.request.method': method,
      'url.path': path,
      ...(route === undefined ? {} : { 'http.route': route }),
    }));
    return { span, traceparent: span.traceparent, traceId: span.traceId, spanId: span.spanId };
  }

  /** Names a request's span after the route it matched (`POST /joke/invoke`), once routing has found it. */
  routed(request: RequestSpan, method: string, route: string | undefined): void {
    if (route === undefined) return;
    request.span.name = `${method} ${route}`;
    request.span.setAttribute('http.route', route);
  }

  /** Ends a request's span with its status code (5xx is an error). */
  endRequest(request: RequestSpan, statusCode: number): void {
    request.span.setAttribute('http.response.status_code', statusCode);
    if (statusCode >= 500) request.span.setError('');
    request.span.end();
  }

  /**
   * A run-event callback that turns one run tree into spans under a parent: an HTTP request's span
   * (its `tracestate` included), or the `traceparent` and `tracestate` a background run was submitted under.
   */
  runCallback(traceparent: string | TraceContext | undefined, tracestate?: string): EventCallback {
    // A span of this process (the request's) is its own parent context: its tracestate included, nothing to parse.
    const parent = typeof traceparent === 'string' ? parseTraceparent(traceparent, tracestate) : traceparent;
    const spans = new Map<string, { span: Span; type: string }>();
    const content = this.content;
    // Starts, ends and errors are all a span needs: the runs' chunks are not turned into events for it.
    return lifecycleCallback((event) => {
      const name = event.event;
      const split = name.lastIndexOf('_');
      const phase = name.slice(split + 1);
      if (phase === 'start') {
        const type = name.slice(3, split);
        const above = event.parent_ids.length === 0 ? undefined : spans.get(event.parent_ids[event.parent_ids.length - 1] as string);
        const model = type === 'chat_model' || type === 'llm';
        const span = this.startSpan(
          spanName(event, type, event.parent_ids.length === 0),
          model || type === 'embedding' ? SpanKinds.client : SpanKinds.internal,
          above?.span ?? parent,
          () => startAttributes(event, type, content),
        );
        spans.set(event.run_id, { span, type });
        if (model) openSpans.set(event.run_id, span.traceState === '' ? { traceparent: span.traceparent } : { traceparent: span.traceparent, tracestate: span.traceState });
        return;
      }
      if (phase !== 'end' && phase !== 'error') return;
      const open = spans.get(event.run_id);
      if (open === undefined) return;
      spans.delete(event.run_id);
      openSpans.delete(event.run_id);
      if (!open.span.sampled) return open.span.end();
      if (phase === 'end') {
        endAttributes(open.span, open.type, event.data.output, content);
      } else {
        const code = errorCode(event.data.error);
        open.span.setAttribute('error.type', code);
        if (code.startsWith('RUNNEL_ERR_')) open.span.setAttribute('runnel.error.code', code);
        // The error's message only with content on: it may quote the run's input (a tool's, user code's). Never
        // the credentials of a URL it quotes (a connection string), which the log leaves out too.
        open.span.setError(content ? redactUrlCredentials(String(event.data.error ?? '')) : code);
      }
      open.span.end();
    });
  }

  /** Sends what is batched now (tests, shutdown). */
  flush(): Promise<void> {
    return this.exporter.flush();
  }

  /** Flushes and stops the exporter. */
  shutdown(): Promise<void> {
    return this.exporter.shutdown();
  }
}
