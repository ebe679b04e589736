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
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { lifecycleCallback, type EventCallback, type StreamEvent } from '../core/index.js';
import type { TracingConfig } from './config.js';
import { openSpans } from './propagation.js';

const propagator = new W3CTraceContextPropagator();

/** A span's W3C `traceparent`. */
function traceparentOf(span: Span): string {
  const { traceId, spanId, traceFlags } = span.spanContext();
  return `00-${traceId}-${spanId}-${traceFlags.toString(16).padStart(2, '0')}`;
}

/** The context a `traceparent` header names (the root context for none or a malformed one). */
export function contextFromTraceparent(traceparent: string | undefined, tracestate?: string): Context {
  if (traceparent === undefined) return ROOT_CONTEXT;
  const carrier: Record<string, string> = { traceparent };
  if (tracestate !== undefined) carrier.tracestate = tracestate;
  return propagator.extract(ROOT_CONTEXT, carrier, { get: (c, key) => c[key], keys: (c) => Object.keys(c) });
}

/** Content recorded on a span is cut at this many characters. */
const CONTENT_LIMIT = 8_192;

function json(value: unknown): string {
  let text: string;
  try {
    text = typeof value === 'string' ? value : JSON.stringify(value);
  } catch {
    text = String(value);
  }
  return text.length > CONTENT_LIMIT ? `${text.slice(0, CONTENT_LIMIT)}…` : text;
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

/** The attributes a run's span opens with. */
function startAttributes(event: StreamEvent, type: string, content: boolean): Attributes {
  const metadata = event.metadata as Record<string, unknown>;
  const attributes: Attributes = { 'runnel.run_id': event.run_id, 'runnel.run_type': type };
  if (type === 'chat_model' || type === 'llm') {
    attributes['gen_ai.operation.name'] = 'chat';
    if (typeof metadata.ls_provider === 'string') {
      attributes['gen_ai.provider.name'] = metadata.ls_provider;
      attributes['gen_ai.system'] = metadata.ls_provider;
    }
    if (typeof metadata.ls_model_name === 'string') attributes['gen_ai.request.model'] = metadata.ls_model_name;
    if (typeof metadata.ls_temperature === 'number') attributes['gen_ai.request.temperature'] = metadata.ls_temperature;
    if (typeof metadata.ls_max_tokens === 'number') attributes['gen_ai.request.max_tokens'] = metadata.ls_max_tokens;
    if (content && event.data.input !== undefined) attributes['gen_ai.input.messages'] = json((event.data.input as { messages?: unknown })?.messages ?? event.data.input);
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
    const message = output as { usage_metadata?: { input_tokens?: number; output_tokens?: number }; response_metadata?: Record<string, unknown>; text?: string; content?: unknown } | undefined;
    const usage = message?.usage_metadata;
    if (typeof usage?.input_tokens === 'number') span.setAttribute('gen_ai.usage.input_tokens', usage.input_tokens);
    if (typeof usage?.output_tokens === 'number') span.setAttribute('gen_ai.usage.output_tokens', usage.output_tokens);
    const finish = message?.response_metadata?.finish_reason ?? message?.response_metadata?.stop_reason;
    if (typeof finish === 'string') span.setAttribute('gen_ai.response.finish_reasons', [finish]);
    const model = message?.response_metadata?.model_name ?? message?.response_metadata?.model;
    if (typeof model === 'string') span.setAttribute('gen_ai.response.model', model);
    if (content) span.setAttribute('gen_ai.output.messages', json(typeof message?.text === 'string' ? [{ role: 'assistant', content: message.text }] : output));
    return;
  }
  if (type === 'retriever' && Array.isArray(output)) span.setAttribute('runnel.retriever.documents', output.length);
  if (content && output !== undefined) span.setAttribute('runnel.output', json(output));
}

/** The sampler `config` names. */
function sampler(config: TracingConfig): Sampler {
  switch (config.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(config.ratio);
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(config.ratio) });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
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
 * The server's tracing: spans for HTTP requests and for every run, exported in batches.
 *
 * @example
 * const tracing = new Tracing(loadTracingConfig(process.env)!);
 * const callbacks = [tracing.runCallback(request.traceparent)];
 */
export class Tracing {
  readonly tracer: Tracer;
  readonly content: boolean;
  private readonly provider: BasicTracerProvider;

  constructor(config: TracingConfig, options: { version?: string; processor?: SpanProcessor } = {}) {
    const exporter: SpanExporter = config.protocol === 'http/json' ? new JsonTraceExporter({ url: config.url, headers: config.headers }) : new ProtobufTraceExporter({ url: config.url, headers: config.headers });
    this.provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ ...config.resourceAttributes, 'service.name': config.serviceName, ...(options.version === undefined ? {} : { 'service.version': options.version }) }),
      sampler: sampler(config),
      spanProcessors: [options.processor ?? new BatchSpanProcessor(exporter)],
    });
    this.tracer = this.provider.getTracer('runnel', options.version);
    this.content = config.content;
  }

  /** Opens the span of an HTTP request, continuing the caller's `traceparent` when it sends one. */
  startRequest(method: string, route: string | undefined, path: string, headers: Record<string, string | string[] | undefined>): RequestSpan {
    const header = (name: string): string | undefined => {
      const value = headers[name];
      return Array.isArray(value) ? value[0] : value;
    };
    const parent = contextFromTraceparent(header('traceparent'), header('tracestate'));
    const span = this.tracer.startSpan(
      route === undefined ? method : `${method} ${route}`,
      { kind: SpanKind.SERVER, attributes: { 'http.request.method': method, 'url.path': path, ...(route === undefined ? {} : { 'http.route': route }) } },
      parent,
    );
    const { traceId, spanId } = span.spanContext();
    return { span, traceparent: traceparentOf(span), traceId, spanId };
  }

  /** Names a request's span after the route it matched (`POST /joke/invoke`), once routing has found it. */
  routed(request: RequestSpan, method: string, route: string | undefined): void {
    if (route === undefined) return;
    request.span.updateName(`${method} ${route}`);
    request.span.setAttribute('http.route', route);
  }

  /** Ends a request's span with its status code (5xx is an error). */
  endRequest(request: RequestSpan, statusCode: number): void {
    request.span.setAttribute('http.response.status_code', statusCode);
    if (statusCode >= 500) request.span.setStatus({ code: SpanStatusCode.ERROR });
    request.span.end();
  }

  /**
   * A run-event callback that turns one run tree into spans under `traceparent` (an HTTP request's
   * span, or the one a background run was submitted under).
   */
  runCallback(traceparent: string | undefined): EventCallback {
    const parent = contextFromTraceparent(traceparent);
    const spans = new Map<string, { span: Span; type: string }>();
    const content = this.content;
    // Starts, ends and errors are all a span needs: the runs' chunks are not turned into events for it.
    return lifecycleCallback((event) => {
      const phase = event.event.slice(event.event.lastIndexOf('_') + 1);
      if (phase === 'stream') return;
      const type = event.event.slice(3, event.event.lastIndexOf('_'));
      if (phase === 'start') {
        const above = spans.get(event.parent_ids.at(-1) ?? '');
        const root = event.parent_ids.length === 0;
        const span = this.tracer.startSpan(
          spanName(event, type, root),
          { kind: type === 'chat_model' || type === 'llm' || type === 'embedding' ? SpanKind.CLIENT : SpanKind.INTERNAL, attributes: startAttributes(event, type, content) },
          above === undefined ? parent : trace.setSpan(ROOT_CONTEXT, above.span),
        );
        spans.set(event.run_id, { span, type });
        if (type === 'chat_model' || type === 'llm') openSpans.set(event.run_id, traceparentOf(span));
        return;
      }
      const open = spans.get(event.run_id);
      if (open === undefined || (phase !== 'end' && phase !== 'error')) return;
      spans.delete(event.run_id);
      openSpans.delete(event.run_id);
      if (phase === 'end') {
        endAttributes(open.span, open.type, event.data.output, content);
      } else {
        const code = errorCode(event.data.error);
        open.span.setAttribute('error.type', code);
        if (code.startsWith('RUNNEL_ERR_')) open.span.setAttribute('runnel.error.code', code);
        open.span.setStatus({ code: SpanStatusCode.ERROR, message: String(event.data.error ?? '') });
      }
      open.span.end();
    });
  }

  /** Sends what is batched now (tests, shutdown). */
  flush(): Promise<void> {
    return this.provider.forceFlush();
  }

  /** Flushes and stops the exporter. */
  shutdown(): Promise<void> {
    return this.provider.shutdown();
  }
}
