/**
 * What every chain endpoint does with a request before running the chain:
 * read the body, decode the `/c/{hash}/` config, build the request context,
 * and tie the run to the client's connection.
 */
import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CancelToken, MAX_JSON_DEPTH, nestedDeeperThan, RunnelError, type EventFilters } from '../core/index.js';
import { originListed } from './config.js';

export { MAX_JSON_DEPTH, nestedDeeperThan };
import type { RequestSpan, Span } from '../observability/index.js';
import { decodeHashText, DecodedTooLong } from './config-hash.js';
import { MAX_PARAM_LENGTH } from './connection-limits.js';
import type { PendingAnswer } from './app.js';
import type { Endpoint, RequestContext } from './registry.js';
import { SseWriter } from './sse.js';

/** Whether a content-type header declares JSON (`application/json`, `application/…+json`, any parameters). */
export function isJsonType(header: string | undefined): boolean {
  if (header === undefined) return false;
  const type = header.split(';', 1)[0]?.trim().toLowerCase() ?? '';
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

/**
 * Refuses a POST that acts without a body (a run's cancel) when a page on another site may have sent it: a
 * browser's (it says its Origin), not declared JSON — a form or a `no-cors` fetch, which need no consent
 * from CORS — from an origin that is neither this page's own nor one CORS lists. A body is refused so by the
 * body parser; a request without one never reaches it. (Declared JSON, a page on another site has to ask
 * CORS first.)
 */
export function refuseCrossSitePost(request: FastifyRequest): void {
  const origin = request.headers.origin;
  if (origin === undefined || isJsonType(request.headers['content-type'])) return;
  // The browser's own word that the page is this server's (a header no page can set).
  if (request.headers['sec-fetch-site'] === 'same-origin') return;
  if (originListed(request.server.runnel.config.corsOrigins, origin)) return;
  if (URL.canParse(origin) && new URL(origin).host === request.headers.host?.toLowerCase()) return;
  throw new RunnelError('RUNNEL_ERR_UNSUPPORTED_MEDIA_TYPE', 'A page on another site must send this request as content-type: application/json (after CORS allows it)');
}

/** The shape of the body a route takes, for an error that says what to send instead (the path's own protocol). */
export function bodyExample(url: string): string {
  const path = url.split('?', 1)[0] ?? '';
  if (path.startsWith('/v1/')) return '{"model": "...", "messages": [{"role": "user", "content": "..."}]}';
  if (path.endsWith('/ui_stream')) return '{"messages": [{"role": "user", "parts": [{"type": "text", "text": "..."}]}]}';
  if (path.endsWith('/batch')) return '{"inputs": [{...}]}';
  return '{"input": {...}}';
}

/** The body as an object, or `RUNNEL_ERR_BODY_INVALID` saying what the route at `url` takes. */
export function bodyObject(body: unknown, url = ''): Record<string, unknown> {
  if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new RunnelError('RUNNEL_ERR_BODY_INVALID', body === undefined ? `The request body is empty: send a JSON object, such as ${bodyExample(url)}` : 'The request body must be a JSON object', {
      detail: [{ type: body === undefined ? 'json_invalid' : 'model_type', loc: [], msg: body === undefined ? 'Invalid JSON body' : 'Input should be a valid dictionary' }],
    });
  }
  return body as Record<string, unknown>;
}

/**
 * `RUNNEL_ERR_BODY_INVALID` for a `webhook` where none would be called (a run that lives as long as its
 * request): a client that sent one would wait for a call that never comes.
 */
export function refuseWebhook(body: Record<string, unknown>, path: string, durable = false): void {
  // null is no webhook, as a submission reads it (a client that writes its unset fields out).
  if (body.webhook === undefined || body.webhook === null) return;
  const where = `POST ${path}/runs${durable ? ', or this route with on_disconnect "continue"' : ''}`;
  const msg = `A webhook is called when a background run ends (${where}); this request's run ends with its answer, and calls none`;
  throw new RunnelError('RUNNEL_ERR_BODY_INVALID', msg, { detail: [{ type: 'extra_forbidden', loc: ['webhook'], msg }] });
}

/** `body[key]`, or `RUNNEL_ERR_BODY_INVALID` naming it as missing. */
export function required(body: Record<string, unknown>, key: string): unknown {
  if (!Object.hasOwn(body, key)) {
    // The chain's own fields sent at the top (`{"topic": "cats"}`) are the usual way to miss it: said how it goes.
    const hint = key === 'input' || key === 'inputs' ? ` (the body is {"${key}": ${key === 'inputs' ? '[...]' : '...'}, "config": {...}}: the chain's input goes under "${key}")` : '';
    throw new RunnelError('RUNNEL_ERR_BODY_INVALID', `Field required: ${key}${hint}`, { detail: [{ type: 'missing', loc: [key], msg: 'Field required' }] });
  }
  return body[key];
}

/** A body or config nested past MAX_JSON_DEPTH. */
export const tooDeep = (loc: string[]): RunnelError =>
  new RunnelError('RUNNEL_ERR_BODY_INVALID', `JSON nested deeper than ${MAX_JSON_DEPTH} levels`, {
    detail: [{ type: 'json_invalid', loc, msg: `JSON nested deeper than ${MAX_JSON_DEPTH} levels` }],
  });

/** The longest config hash taken, in characters: the router's own limit on a path parameter. */
export const MAX_CONFIG_HASH = MAX_PARAM_LENGTH;
/** The longest config a hash may hold once decoded, in characters (a larger config goes in the body). */
const MAX_CONFIG_JSON = 64 * 1024;

const invalidHash = (msg: string): RunnelError =>
  new RunnelError('RUNNEL_ERR_CONFIG_HASH_INVALID', msg === 'Invalid config hash' ? msg : `Invalid config hash: ${msg}`, { detail: [{ type: 'value_error', loc: ['config_hash'], msg }] });

/** The config in a `/c/{hash}/` URL: lz-string `compressToEncodedURIComponent(JSON.stringify(config))`. */
export function decodeConfigHash(hash: string | undefined): Record<string, unknown> | undefined {
  if (hash === undefined) return undefined;
  // `/c//invoke`: a link cut short or a template left unfilled, not a config; LangServe's router matches no route.
  if (hash === '') throw invalidHash('it is empty; send the config in the body, or leave /c/{hash} out');
  if (hash.length > MAX_CONFIG_HASH) throw invalidHash(`longer than ${MAX_CONFIG_HASH} characters; send the config in the body`);
  let config: unknown;
  try {
    // Decoded with a bound: lz-string's own decoder can spend half a second on one URL's worth of hash.
    const json = decodeHashText(hash, MAX_CONFIG_JSON);
    if (json !== null && nestedDeeperThan(json)) throw invalidHash(`its config is nested deeper than ${MAX_JSON_DEPTH} levels`);
    config = json === null || json === '' ? undefined : JSON.parse(json);
  } catch (error) {
    if (error instanceof DecodedTooLong) throw invalidHash(`its config is longer than ${MAX_CONFIG_JSON} characters; send it in the body`);
    if (error instanceof RunnelError) throw error;
    config = undefined;
  }
  if (config === null || typeof config !== 'object' || Array.isArray(config)) throw invalidHash('Invalid config hash');
  return config as Record<string, unknown>;
}

const FILTER_KEYS = ['include_names', 'include_types', 'include_tags', 'exclude_names', 'exclude_types', 'exclude_tags'] as const;

/** The include/exclude filters of `stream_log` and `stream_events` (lists of strings, or null). */
export function eventFilters(body: Record<string, unknown>): EventFilters {
  const filters: Record<string, string[] | null> = {};
  for (const key of FILTER_KEYS) {
    const value = body[key];
    if (value === undefined || value === null) continue;
    if (!Array.isArray(value)) {
      throw new RunnelError('RUNNEL_ERR_BODY_INVALID', `${key} must be a list of strings`, { detail: [{ type: 'list_type', loc: [key], msg: 'Input should be a valid list' }] });
    }
    value.forEach((item, index) => {
      if (typeof item !== 'string') {
        throw new RunnelError('RUNNEL_ERR_BODY_INVALID', `${key} must be a list of strings`, { detail: [{ type: 'string_type', loc: [key, index], msg: 'Input should be a valid string' }] });
      }
    });
    filters[key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())] = value as string[];
  }
  return filters as EventFilters;
}

/** Refuses a new run while the server drains after SIGTERM; runs and streams already going finish. */
export function checkAcceptingRuns(request: FastifyRequest): void {
  if (request.server.runnel.shuttingDown) throw new RunnelError('RUNNEL_ERR_SHUTTING_DOWN', 'The server is shutting down');
}

/**
 * Where a traced request keeps its span, from its logger's creation (before Fastify's request exists) on: a
 * property of Node's request itself. A WeakMap keyed by the request kept every span, its attributes and its
 * closures alive through young-generation collections: a traced server's collections kept about 8 times the
 * bytes an untraced one's did, and paused 5–10 times as long as they do now (docs/observability.md, "Where
 * the request span waits").
 */
export const REQUEST_SPAN = Symbol('runnel.requestSpan');
export type SpannedRequest = IncomingMessage & { [REQUEST_SPAN]?: RequestSpan };

/**
 * Where a request context carries its request's span for the server's own tracing: a property that is not
 * enumerable, so a modifier that logs, copies or spreads its context never meets the span (whose exporter
 * holds the OTLP headers).
 */
export const TRACE_SPAN = Symbol('runnel.traceSpan');

/** A request context as the server hands it on: with its request's span, when tracing is on. */
export type TracedContext = RequestContext & { readonly [TRACE_SPAN]?: Span };

/** The request context a chain's per-request modifier sees. */
export function requestContext(request: FastifyRequest, endpoint: Endpoint, path: string): RequestContext {
  const context: RequestContext = { identity: request.identity, headers: request.headers, endpoint, path, traceparent: request.traceparent };
  const traced = (request.raw as SpannedRequest)[REQUEST_SPAN];
  if (traced !== undefined) Object.defineProperty(context, TRACE_SPAN, { value: traced.span });
  return context;
}

/**
 * A cancellation token (the core's light one: a real AbortSignal is made only
 * if user code or an SDK asks) that fires when the client goes away before the answer is
 * sent (Fastify 5's `request.signal` fires falsely for POST bodies, so this
 * watches the raw response instead). `dispose()`, once the run has settled,
 * ends the request's story for a client that went away: a completion line in
 * the log and a 499 in `/metrics` — Fastify writes neither for a response
 * that never finished.
 */
export function disconnectSignal(request: FastifyRequest, reply: FastifyReply, endpoint: Endpoint, chainPath: string): { signal: CancelToken; gone: () => boolean; dispose: () => void } {
  const controller = new CancelToken();
  let gone = false;
  const onClose = (): void => {
    if (reply.raw.writableEnded) return;
    gone = true;
    controller.abort(new RunnelError('RUNNEL_ERR_ABORTED', 'The client disconnected'));
  };
  whenClientGone(reply, onClose);
  // A shutdown past its grace ends the run with its own error, which the request answers (a 503).
  const pending = new Answering(request.server.runnel.answers, (reason) => controller.abort(reason));
  return {
    signal: controller,
    gone: () => gone,
    dispose: () => {
      reply.raw.off('close', onClose);
      pending.finish();
      if (gone) clientGone(request, endpoint, chainPath, reply.elapsedTime);
    },
  };
}

/**
 * A request holding its answer open, as shutdown sees it ({@link PendingAnswer}), among `answers` from its
 * making to its `finish()`: `done()`'s promise is made only if shutdown asks for it, not by every request.
 */
export class Answering implements PendingAnswer {
  private finished = false;
  private waiting: Promise<void> | undefined;
  private wake: (() => void) | undefined;

  constructor(
    private readonly answers: Set<PendingAnswer>,
    readonly stop: (reason: RunnelError) => void,
    readonly reader = false,
  ) {
    answers.add(this);
  }

  done(): Promise<void> {
    return (this.waiting ??= this.finished ? Promise.resolve() : new Promise<void>((resolve) => (this.wake = resolve)));
  }

  /** The request has its answer (or its client went away): it leaves the answers shutdown waits for. */
  finish(): void {
    this.answers.delete(this);
    this.finished = true;
    this.wake?.();
  }
}


/**
 * Calls `onGone` when the response's connection closes — at once when it closed already: a client that left
 * while the handler awaited (reading the run, resolving the config) sent its `close` before anyone listened,
 * and a wait or a run started then would go on for nobody (a probe: `/wait`s so left polled Redis for their
 * full `timeout_s`, 9 KB each). Returns the listener's removal.
 *
 * @example
 * const gone = new AbortController();
 * const stop = whenClientGone(reply, () => gone.abort());
 */
export function whenClientGone(reply: FastifyReply, onGone: () => void): () => void {
  reply.raw.on('close', onGone);
  if (reply.raw.destroyed) onGone();
  return () => void reply.raw.off('close', onGone);
}

/** Logs and counts a request whose client went away before its answer (status 499, as nginx logs it). */
export function clientGone(request: FastifyRequest, endpoint: string, chainPath: string, elapsedMs: number): void {
  request.countedByHandler = true;
  request.log.info({ res: { statusCode: 499 }, responseTime: elapsedMs }, 'request aborted by the client');
  request.server.runnel.metrics.route(chainPath, endpoint).answered(499, elapsedMs / 1000);
}

/**
 * Takes the response over for an event stream: Fastify lets go of it (the
 * stream counts itself in `/metrics`), and an `SseWriter` with the server's
 * ping and stall settings and the headers set so far (CORS, request id)
 * writes it. The caller opens it.
 */
export function takeOverForEvents(request: FastifyRequest, reply: FastifyReply, headers?: Readonly<Record<string, string>>): SseWriter {
  const { config } = request.server.runnel;
  reply.hijack();
  request.countedByHandler = true;
  return new SseWriter(reply.raw, {
    pingMs: config.pingMs,
    stallMs: config.streamStallMs,
    headers: headers === undefined ? replyHeaders(reply) : { ...replyHeaders(reply), ...headers },
  });
}

/** The headers set on a reply so far, as strings: for an answer written to Node's response directly. */
export function replyHeaders(reply: FastifyReply): Record<string, string> {
  return Object.fromEntries(Object.entries(reply.getHeaders()).map(([k, v]) => [k, String(v)]));
}

/**
 * 503 `RUNNEL_ERR_OVERLOADED` when every stream slot is taken; 429 `RUNNEL_ERR_TOO_MANY_STREAMS` when the caller
 * holds its share already (`RUNNEL_MAX_STREAMS_PER_KEY`), so one key cannot take every slot. The key's share
 * counts its streams whose client is there, and a durable run whose clients have all gone as one (it holds its
 * place until it ends): `runId`, the run a join reads, which takes that place. Streams whose client has gone
 * and whose run is still stopping, and a durable run's own stream beside its reader, take slots beyond the share:
 * at most as many again.
 */
export function checkStreamSlot(request: FastifyRequest, runId?: string): void {
  const state = request.server.runnel;
  const { maxStreams, maxStreamsPerKey } = state.config;
  if (state.streams.size >= maxStreams) {
    throw new RunnelError('RUNNEL_ERR_OVERLOADED', `All ${maxStreams} stream slots are taken; retry shortly`);
  }
  if (maxStreamsPerKey > 0 && maxStreamsPerKey < maxStreams) {
    let own = 0;
    // Live streams whose client has gone, their runs still stopping (a take-back under way): as many as the
    // share are let go, so a client may cut and reopen at once, but no more, or cutting in a loop would pile
    // them up past the share.
    let spared = maxStreamsPerKey;
    // Each run's streams whose client is there; a run holds one place while none is.
    const runs = new Map<string, number>();
    // Every slot the key holds, whatever its client does: at most twice its share (a review: spared streams, a
    // durable run and its reader, readers gone but still in a Redis call, took three times the share and more).
    let slots = 0;
    for (const stream of state.streams) {
      if (stream.identity !== request.identity) continue;
      slots++;
      if (stream.runId !== undefined) runs.set(stream.runId, (runs.get(stream.runId) ?? 0) + (stream.clientGone === true ? 0 : 1));
      else if (stream.clientGone !== true) own++;
      else if (spared > 0) spared--;
      else own++;
    }
    for (const present of runs.values()) own += Math.max(present, 1);
    // A rejoin of a run whose clients have all gone takes the place the run holds.
    if (runId !== undefined && runs.get(runId) === 0 && slots < 2 * maxStreamsPerKey) return;
    if (own >= maxStreamsPerKey || slots >= 2 * maxStreamsPerKey) {
      throw new RunnelError('RUNNEL_ERR_TOO_MANY_STREAMS', `This caller has ${own} streams open, its most (RUNNEL_MAX_STREAMS_PER_KEY); close one first`);
    }
  }
}
