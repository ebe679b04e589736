/**
 * `buildApp(options)`: the Fastify app that serves a registry of chains —
 * LangServe's routes for each, OpenAPI and Swagger UI, health and metrics,
 * API keys, CORS, rate limiting, limits, and graceful shutdown. It does not
 * listen; `main.ts` does.
 */
import { isUtf8 } from 'node:buffer';
import cors from '@fastify/cors';
import rateLimit from '@fastify/rate-limit';
import swagger from '@fastify/swagger';
import fastifyStatic from '@fastify/static';
import swaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyBodyParser, type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import sjson from 'secure-json-parse';
import { RunnelError } from '../core/index.js';
import { chainRoutes } from '../../routes/chain.js';
import { faviconRoutes } from '../../routes/favicon.js';
import { healthRoutes } from '../../routes/health.js';
import { bundleTemplate } from '../../routes/playground.js';
import { historyRoutes } from '../../routes/history.js';
import { indexRoutes } from '../../routes/index-page.js';
import { openAIRoutes } from '../../routes/openai.js';
import { runRoutes } from '../../routes/runs.js';
import { checkKey, KeyRing } from './auth.js';
import { AuthThrottle } from './auth-throttle.js';
import { DEFAULT_SERVER_CONFIG, metricsKeyProblems, originListed, type ServerConfig } from './config.js';
import { clientNetwork } from './client-network.js';
import { answeredOnSocket, connectionOptions, continueWhenRead, cutStalledReaders, MAX_PARAM_LENGTH, refuseConnect, refuseExpectations, unreadBodyRefusal } from './connection-limits.js';
import { logDependencyFailure, sendErrorAnswer } from './error-reply.js';
import { loggedUrl } from './log-options.js';
import { errorBody, toHttpError } from './http-errors.js';
import { Metrics } from './metrics.js';
import { chainComponents, errorSchema, openApiDocument } from './openapi.js';
import { toOpenAIError } from './openai-errors.js';
import { openAIComponents } from './openai-schemas.js';
import { PreparedChain } from './prepared.js';
import { hostCheck, hostName } from './allowed-hosts.js';
import { bodyExample, isJsonType, nestedDeeperThan, REQUEST_SPAN, tooDeep, type SpannedRequest } from './request.js';
import { RouteTable } from './route-table.js';
import { BullRunQueue, MemoryRunQueue, MemoryRunStore, RedisRunStore, type RunMeter, type RunQueue } from '../runs/index.js';
import { Tracing } from '../observability/index.js';
import type { Redis } from 'ioredis';
import { createRegistry, ENDPOINTS, type ChainSpec } from './registry.js';
import type { Services } from './services.js';
import { usageMeter } from './usage.js';

/** An open event stream, as shutdown sees it. */
export interface OpenStream {
  /** Ends the stream's run; the stream then sends its final frame. */
  stop(reason: RunnelError): void;
  /** Resolves when the stream has ended. */
  done: Promise<void>;
  /**
   * A reader of a run's log (a join): stopping it ends nothing but this connection, and its client rejoins on
   * another replica with Last-Event-ID — so a stopping server closes it at once rather than after the grace.
   */
  reader?: boolean;
  /** Whose stream it is (`RUNNEL_MAX_STREAMS_PER_KEY` counts them). */
  identity: string;
  /**
   * Its client has gone, its run stopping (a live stream's) or going on (a durable one's): it no longer counts
   * as its key's as a stream (see `checkStreamSlot`), so the client can open another, or rejoin, at once.
   */
  clientGone?: boolean;
  /** The run it executes or reads (a durable stream, a join): a run whose clients have all gone holds one place. */
  runId?: string;
}

/**
 * A request that holds its answer open while a run or a wait goes on (`/invoke`, `/batch`, `/v1` without
 * `stream`, a run's `/wait`), as shutdown sees it: it ends such a request with `RUNNEL_ERR_SHUTTING_DOWN` (a
 * 503 with `retry-after`) rather than let the process's deadline drop its connection unanswered.
 */
export interface PendingAnswer {
  /** Ends the request's run or wait with `reason`; the request then answers it. */
  stop(reason: RunnelError): void;
  /** Resolves when the request has its answer (or its client has gone); made only when shutdown asks. */
  done(): Promise<void>;
  /** A wait on a run that goes on elsewhere: stopped at once, as its client can wait on another replica. */
  reader?: boolean;
}

/**
 * After the grace, how much longer a request whose run is under way may take before shutdown ends it with a
 * 503: inside the 5 s the process allows past the grace (signals.ts), with time left to answer and close.
 */
const ANSWER_MARGIN_MS = 3_000;

/** What the app shares with its routes. */
export interface RunnelState {
  config: ServerConfig;
  chains: PreparedChain[];
  metrics: Metrics;
  keys: KeyRing;
  streams: Set<OpenStream>;
  /** Requests holding their answer open (see {@link PendingAnswer}). */
  answers: Set<PendingAnswer>;
  shuttingDown: boolean;
  /** Readiness checks of the services the app depends on (none with the embedded defaults). */
  readiness: Map<string, () => Promise<boolean>>;
  /** The background-run queue (BullMQ with Redis, in process without), started on first use or at start. */
  runQueue(): RunQueue;
  /** The run queue if it has started. */
  runs: RunQueue | undefined;
  /** OpenTelemetry tracing, when it is on. */
  tracing: Tracing | undefined;
  /** The methods the routes of `path` take, as an `allow` header (undefined: no route has it): for a 405. */
  allowedMethods(path: string): string | undefined;
}

declare module 'fastify' {
  interface FastifyInstance {
    runnel: RunnelState;
    /** Stops taking work (still listening: /readyz and new runs answer 503), lets open streams run for up to the grace period, ends them, then closes. */
    shutdown(): Promise<void>;
  }
  interface FastifyRequest {
    /** The authenticated caller: the API key's name, or `anonymous` when keys are off. */
    identity: string;
    /** The W3C `traceparent` of this request's span, when tracing is on: its runs' spans go under it. */
    traceparent: string | undefined;
    /**
     * True for requests that count themselves in `/metrics` — event streams when they end, requests whose
     * client went away — which the routes' `onResponse` hook (Fastify runs it for hijacked replies too) skips.
     */
    countedByHandler: boolean;
  }
}

/** Options of {@link buildApp}. */
export interface BuildAppOptions {
  chains: readonly ChainSpec<never, unknown>[];
  /**
   * When the background-run workers start: `'start'` with the app (a server, so runs submitted on any
   * replica find workers), or `'first-use'` (default: apps in tests start none until a run is submitted).
   */
  runWorkers?: 'start' | 'first-use';
  config?: Partial<ServerConfig>;
  /**
   * Fastify's logger option (pino); none by default. `serverLoggerOptions(level)` is `npm start`'s: it keeps
   * keys and the path's conversation ids out of log lines, which a logger of other options does not.
   */
  logger?: FastifyServerOptions['logger'];
  /** Connected services (Redis, Postgres): their checks join `/readyz`, and they close with the app. */
  services?: Services;
  /** The built playground bundle (default `dist/playground` of this package). */
  playgroundDir?: string;
  /** Tracing to use instead of the one `config.tracing` describes. */
  tracing?: Tracing;
}

/**
 * The run queue of an app or a worker process: BullMQ on the services' Redis
 * (workers here when `config.workerConcurrency` > 0), or in this process.
 *
 * @example
 * const queue = createRunQueue({ config, chains: createRegistry(specs), redis: services.redis, log: console.error });
 */
export function createRunQueue(options: {
  config: ServerConfig;
  chains: readonly (PreparedChain | ChainSpec<never, unknown>)[];
  redis: Redis | undefined;
  log: (error: unknown, message: string) => void;
  /** A model provider's failure under a run (see `RunQueueOptions.warn`). */
  warn?: (fields: Record<string, unknown>, message: string) => void;
  tracing?: Tracing | undefined;
  /** The handlers that count a run's model calls in this process's `/metrics`, by chain (a worker process's when it serves one). */
  meter?: (chain: string) => RunMeter;
}): RunQueue {
  const { config, redis, log, warn, tracing, meter } = options;
  const trace = tracing === undefined ? undefined : (traceparent: string | undefined, tracestate: string | undefined) => tracing.runCallback(traceparent, tracestate);
  const chains = new Map(options.chains.map((chain) => ('spec' in chain ? chain.spec : chain)).map((spec) => [spec.path, spec.runnable]));
  const webhooks = { hosts: config.webhookHosts, secret: config.webhookSecret, allowHttp: config.webhookAllowHttp };
  if (redis === undefined) {
    return new MemoryRunQueue({
      store: new MemoryRunStore({ ttlSeconds: config.runTtlSeconds }),
      chains,
      concurrency: Math.max(1, config.workerConcurrency),
      maxRunsPerCaller: config.maxRunsPerKey,
      webhooks,
      log,
      warn,
      trace,
      meter,
    });
  }
  const store = new RedisRunStore({ client: redis, ttlSeconds: config.runTtlSeconds, namespace: `${config.runNamespace}:runs` });
  return new BullRunQueue({ connection: redis, prefix: `${config.runNamespace}:bull`, store, chains, concurrency: config.workerConcurrency, lockMs: config.runLockMs, maxRunsPerCaller: config.maxRunsPerKey, webhooks, log, warn, trace, meter });
}

/** This package's root: the folder above this file that holds package.json (from src/server/ and dist/src/server/ alike). */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
}

/** This package's version (the traces' `service.version`). */
export function packageVersion(): string | undefined {
  try {
    return (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version?: string }).version;
  } catch {
    return undefined;
  }
}

const PUBLIC_PATHS = new Set(['/healthz', '/readyz']);
/** Paths whose requests get no trace: health probes and metrics scrapes. */
const UNTRACED_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

/** What a page's script may read of an answer: when (and whether) to retry, the request's id, its rate limit's state. */
const CORS_EXPOSED = ['retry-after', 'x-should-retry', 'x-request-id', 'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'];

/**
 * The index page and the API docs — Swagger UI and the OpenAPI document it reads — are public, so a browser
 * can open them and authorise there with a key (the document names the bearer and x-api-key schemes); every
 * route they describe still needs one. They hold chain paths, descriptions and schemas, no data.
 */
const isDocsPath = (path: string): boolean => path === '/' || path === '/openapi.json' || path === '/docs' || path.startsWith('/docs/');


/** The charset a content-type's parameters name, lowercased, its quotes off; none when it names none or ''. */
function charsetOf(header: string | undefined): string | undefined {
  if (header === undefined || !header.includes(';')) return undefined;
  // Parameter by parameter, a quoted value whole: `x="; charset=latin1"` names no charset.
  for (const [, name, value] of header.matchAll(/;\s*([^=;\s]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)/g)) {
    if (name?.toLowerCase() !== 'charset') continue;
    const charset = (value ?? '').trim().replace(/^(["'])(.*)\1$/, '$2').trim().toLowerCase();
    return charset === '' ? undefined : charset;
  }
  return undefined;
}

function isPreflight(method: string, headers: Readonly<Record<string, string | string[] | undefined>>): boolean {
  return method === 'OPTIONS' && typeof headers.origin === 'string' && typeof headers['access-control-request-method'] === 'string';
}

/** A request's id: the client's `x-request-id` when it is a plain token of at most 128 characters, else a new UUID. */
function requestIdOf(req: { headers: Record<string, string | string[] | undefined> }): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && /^[\w.:-]{1,128}$/.test(given) ? given : randomUUID();
}

/** The reply as `frameworkErrors` receives it, typed loosely (its generics cannot name our body). */
interface FastifyReplyLike {
  code(status: number): FastifyReplyLike;
  header(name: string, value: string): FastifyReplyLike;
  type(contentType: string): FastifyReplyLike;
  send(body: unknown): unknown;
}

/**
 * Builds the app for `chains`. Registration problems (duplicate paths,
 * unknown endpoints, schemas that do not compile) fail here, at start.
 *
 * @example
 * const app = await buildApp({ chains: registry, config: loadServerConfig(process.env) });
 * await app.listen({ port: 8000 });
 */
export async function buildApp(options: BuildAppOptions): Promise<FastifyInstance> {
  const config: ServerConfig = { ...DEFAULT_SERVER_CONFIG, ...options.config };
  const metricsProblems = metricsKeyProblems(config.apiKeys, config.metricsKeys);
  if (metricsProblems.length > 0) throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Invalid configuration: metricsKeys ${metricsProblems.join('; ')}`);
  const servicesNamespace = options.services?.redis === undefined ? undefined : options.services.namespace;
  if (servicesNamespace !== undefined && servicesNamespace !== config.runNamespace) {
    throw new RunnelError(
      'RUNNEL_ERR_INVALID_ARGUMENT',
      `Invalid configuration: the services keep histories and the cache under the Redis namespace "${servicesNamespace}" and runs would be under "${config.runNamespace}": ` +
        'pass the same to connectServices({ namespace }) and to runNamespace (npm start passes RUNNEL_RUN_NAMESPACE to both)',
    );
  }
  // Tracing is on when the OTEL_* variables name an endpoint (or a test hands one in).
  const tracing = options.tracing ?? (config.tracing === undefined ? undefined : new Tracing(config.tracing, { version: packageVersion() }));
  const chains = createRegistry(options.chains).map((spec) => new PreparedChain(spec, { tracing }));
  const chainsByPath = new Map(chains.map((chain) => [chain.spec.path, chain]));
  // A request's span opens with its logger (before any hook), so every log line of the request carries its ids.
  const app = Fastify({
    logger: options.logger ?? false,
    ...(tracing === undefined
      ? {}
      : {
          childLoggerFactory: (logger, bindings, childOptions, raw) => {
            const request = raw as SpannedRequest;
            const path = (request.url ?? '/').split('?')[0] ?? '/';
            // A balancer's probes and Prometheus's scrapes, every few seconds from every replica, are not traced:
            // they would bury the traces of requests.
            if (UNTRACED_PATHS.has(path)) return logger.child(bindings, childOptions);
            // `url.path` as the log line has it: the path's conversation ids (a session's, a chat's, a config
            // hash) are no more the collector's than the log's.
            const span = tracing.startRequest(request.method ?? 'GET', undefined, loggedUrl(path), request.headers);
            request[REQUEST_SPAN] = span;
            return logger.child({ ...bindings, trace_id: span.traceId, span_id: span.spanId }, childOptions);
          },
        }),
    bodyLimit: config.bodyLimit,
    // The body timeout (408), Runnel-shaped answers to what Node's parser refuses, and path parameters as long as a URL.
    ...connectionOptions(config),
    // Only the listed proxies' X-Forwarded-For is believed; request.ip is then the right-most address they did not add.
    trustProxy: config.trustProxy.length > 0 ? config.trustProxy : false,
    genReqId: requestIdOf,
    forceCloseConnections: 'idle',
    return503OnClosing: true,
    // Errors Fastify raises before routing (a URL with broken percent-encoding) get Runnel's error shape too —
    // OpenAI's under `/v1/`, as every other error there: the `openai` SDKs read only that (a probe: Runnel's
    // read as "400 status code (no body)").
    frameworkErrors: (error, request, reply) => {
      const { status, body } = request.url.startsWith('/v1/') ? toOpenAIError(error) : toHttpError(error);
      void (reply as unknown as FastifyReplyLike).code(status).header('x-request-id', request.id).type('application/json; charset=utf-8').send(body);
    },
  });
  tracing?.warnOnDroppedSpans((fields, message) => app.log.warn(fields, message));
  continueWhenRead(app.server);
  refuseExpectations(app.server, requestIdOf);
  refuseConnect(app.server, requestIdOf);
  const stopCuttingStalled = cutStalledReaders(app.server, config.streamStallMs);
  app.addHook('onClose', async () => stopCuttingStalled());

  app.decorate('runnel', {
    config,
    chains,
    // The gauges read the app's state at each scrape: every kind of stream counts, and the queue's own counts.
    metrics: new Metrics({ openStreams: () => app.runnel.streams.size, runCounts: () => app.runnel.runs?.counts(), spansDropped: () => tracing?.exporter.dropped }),
    keys: new KeyRing(config.apiKeys),
    streams: new Set<OpenStream>(),
    answers: new Set<PendingAnswer>(),
    shuttingDown: false,
    readiness: new Map(options.services?.checks ?? []),
    runs: undefined,
    tracing,
    allowedMethods: (path) => routes.allowed(path),
    runQueue(): RunQueue {
      // A draining replica starts no workers it would stop at once.
      if (this.runs === undefined && this.shuttingDown) throw new RunnelError('RUNNEL_ERR_SHUTTING_DOWN', 'The server is shutting down');
      return (this.runs ??= createRunQueue({
        config,
        chains,
        redis: options.services?.redis,
        tracing,
        log: (error, message) => app.log.error({ err: error }, message),
        warn: (fields, message) => app.log.warn(fields, message),
        // Runs executed here (durable streams, queued runs this process's workers take) count in its /metrics as
        // the plain routes' do (until 2026-12-07 their model calls and tokens were counted nowhere).
        meter: (path) => {
          const chain = chainsByPath.get(path);
          return chain === undefined ? {} : usageMeter(app.runnel, chain);
        },
      }));
    },
  } satisfies RunnelState);
  app.addHook('onClose', async () => app.runnel.runs?.close(0));
  // Closing without a shutdown (tests, embedding): event streams end now rather than hold the close open.
  app.addHook('preClose', async () => {
    for (const stream of app.runnel.streams) stream.stop(new RunnelError('RUNNEL_ERR_SHUTTING_DOWN', 'The server is closing'));
  });
  if (options.runWorkers === 'start') app.addHook('onReady', async () => void app.runnel.runQueue());
  if (options.services !== undefined) {
    const services = options.services;
    services.onCacheLookup = (result) => app.runnel.metrics.cache.inc({ result });
    // A skipped row goes into the server's JSON log with the rest, not as a stray line on stderr.
    services.onStoreWarning = (fields, message) => app.log.warn(fields, message);
    app.addHook('onClose', async () => services.close());
  }
  app.decorateRequest('identity', 'anonymous');
  app.decorateRequest('traceparent', undefined);
  app.decorateRequest('countedByHandler', false);
  if (tracing !== undefined) {
    // First of the hooks, so a refused request (401, 429) has its span too. The span ends when the response
    // does — event streams included — and the request's log lines carry its trace and span ids.
    app.addHook('onRequest', (request, reply, done) => {
      const span = (request.raw as SpannedRequest)[REQUEST_SPAN];
      if (span !== undefined) {
        tracing.routed(span, request.method, request.routeOptions.url);
        request.traceparent = span.traceparent;
        // Not answered whole when the connection closed: the client went away first — 499, as the metrics and the
        // log say (Node's statusCode is its default 200 before an answer, and a stream's 200 once it began) —
        // unless its body timed out and its socket had the 408.
        reply.raw.once('close', () => tracing.endRequest(span, reply.raw.writableEnded ? reply.raw.statusCode : (answeredOnSocket(request.raw) ?? 499)));
      }
      done();
    });
    app.addHook('onClose', async () => tracing.shutdown());
  }

  // Bodies are JSON whatever their content type (as LangServe reads them, and curl -d sends them), parsed
  // without prototype pollution — except a browser's (it says its Origin) not declared JSON: a form or a
  // text/plain post is what a page on any site may send here without asking CORS, so a server without keys
  // would run it for that site (spend tokens, write into a history).
  app.removeAllContentTypeParsers();
  const parseBody: FastifyBodyParser<Buffer> = (request, bytes, done) => {
    // No body at all (a POST to /cancel with a content-type): routes that need one say so (422).
    if (bytes.length === 0) {
      done(null, undefined);
      return;
    }
    if (request.headers.origin !== undefined && !isJsonType(request.headers['content-type'])) {
      done(new RunnelError('RUNNEL_ERR_UNSUPPORTED_MEDIA_TYPE', 'A browser must send its body as content-type: application/json'), undefined);
      return;
    }
    // A compressed body read as text is noise that fails as "Invalid JSON": say what is wrong instead.
    // A list (RFC 9110), as transfer-encoding below: empty, or `identity` twice (two headers joined), is no coding.
    const encoding = request.headers['content-encoding'];
    if (encoding !== undefined && encoding.split(',').some((coding) => !['', 'identity'].includes(coding.trim().toLowerCase()))) {
      done(new RunnelError('RUNNEL_ERR_UNSUPPORTED_MEDIA_TYPE', `A body with content-encoding ${JSON.stringify(encoding)} is not read: send it uncompressed`), undefined);
      return;
    }
    // The same for a transfer coding before the chunks (`gzip, chunked`): Node takes the chunks off and leaves the rest.
    const transfer = request.headers['transfer-encoding'];
    if (transfer !== undefined && transfer.split(',').some((coding) => !['chunked', 'identity'].includes(coding.trim().toLowerCase()))) {
      done(new RunnelError('RUNNEL_ERR_UNSUPPORTED_MEDIA_TYPE', `A body with transfer-encoding ${JSON.stringify(transfer)} is not read: send it chunked or with a content-length only`), undefined);
      return;
    }
    // JSON is UTF-8 (RFC 8259). A body declared in another charset, or not UTF-8 at all, was read as UTF-8
    // with its other bytes turned into U+FFFD, and answered 200 about text the client never sent.
    const charset = charsetOf(request.headers['content-type']);
    if (charset !== undefined && !['utf-8', 'utf8', 'us-ascii', 'ascii'].includes(charset)) {
      done(new RunnelError('RUNNEL_ERR_UNSUPPORTED_MEDIA_TYPE', `A body in charset ${JSON.stringify(charset)} is not read: send it as UTF-8, JSON's encoding`), undefined);
      return;
    }
    if (!isUtf8(bytes)) {
      done(new RunnelError('RUNNEL_ERR_BODY_INVALID', 'The body is not valid UTF-8: send JSON encoded as UTF-8', { detail: [{ type: 'json_invalid', loc: [], msg: 'Invalid UTF-8' }] }), undefined);
      return;
    }
    const body = bytes.toString('utf8');
    if (nestedDeeperThan(body)) {
      done(tooDeep([]), undefined);
      return;
    }
    try {
      done(null, sjson.parse(body, undefined, { protoAction: 'remove', constructorAction: 'remove' }));
    } catch {
      // What to send instead: an empty body and a form (`topic=cats`, curl -d's default) are the usual mistakes.
      const empty = body.trim() === '';
      const message = `${empty ? 'The request body is empty' : 'Invalid JSON body'}: send a JSON object, such as ${bodyExample(request.url)}`;
      done(new RunnelError('RUNNEL_ERR_BODY_INVALID', message, { detail: [{ type: 'json_invalid', loc: [], msg: 'Invalid JSON body' }] }), undefined);
    }
  };
  // JSON's own type too, though the catch-all takes it as well: Fastify remembers the parser of a type it has a
  // parser for, but looks the catch-all up again for every request (parsing the content-type each time).
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, parseBody);
  app.addContentTypeParser('*', { parseAs: 'buffer' }, parseBody);
  // Validation is Runnel's own (with its error shape); the route schemas document, and JSON.stringify serializes.
  app.setValidatorCompiler(() => () => true);
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));

  app.setErrorHandler((error, request, reply) => {
    const { status, body, internal } = toHttpError(error);
    // A request whose client went away was counted as such (499): the error its run ended with reaches nobody.
    if (!request.countedByHandler) app.runnel.metrics.error(body.code);
    if (internal) request.log.error({ err: error }, 'chain failed');
    else logDependencyFailure(request, error);
    sendErrorAnswer(request, reply, { status, code: body.code, body, error });
  });
  // A path some route takes under other methods answers 405 with `allow` (`DELETE /joke/runs`, `POST /healthz`,
  // `OPTIONS` without CORS), whichever part of the server registered it; only an unknown path is a 404.
  const routes = new RouteTable({ maxParamLength: MAX_PARAM_LENGTH });
  app.addHook('onRoute', (route) => {
    if (route.config?.refusesMethod !== true) routes.add(route.method, route.url);
  });
  app.setNotFoundHandler((request, reply) => {
    // An error answer like any other: its request id with it.
    void reply.header('x-request-id', request.id);
    const path = request.url.split('?')[0] ?? '';
    const takes = (allow: string | undefined): boolean => allow !== undefined && allow.split(', ').includes(request.method);
    // A route written with a trailing slash (`/joke/invoke/`, `/joke/runs/` — which reads as a run with an
    // empty id, and was a 405): said, with the route meant, rather than a bare 404 or a misleading 405.
    const bare = path.length > 1 && path.endsWith('/') ? path.replace(/\/+$/, '') : undefined;
    if (bare !== undefined && bare !== '' && takes(routes.allowed(bare, { wildcards: false }))) {
      app.runnel.metrics.error('RUNNEL_ERR_NOT_FOUND');
      void reply.code(404).send(errorBody(404, 'RUNNEL_ERR_NOT_FOUND', `Not Found: ${request.method} ${bare} (without the trailing slash) is the route`));
      return;
    }
    const allow = routes.allowed(path);
    // A route of this very method that found nothing (a static file that is not there) is a 404 too.
    if (allow !== undefined && !takes(allow)) {
      app.runnel.metrics.error('RUNNEL_ERR_METHOD_NOT_ALLOWED');
      void reply.code(405).header('allow', allow).send(errorBody(405, 'RUNNEL_ERR_METHOD_NOT_ALLOWED', 'Method Not Allowed'));
      return;
    }
    // An endpoint of a chain that is there but does not serve it (a newcomer's probe: `/summarise/ui_stream`, a
    // chain without a messages adapter, answered the same bare 404 as a mistyped path): said, with why.
    const cut = path.lastIndexOf('/');
    const endpoint = path.slice(cut + 1);
    const chain = cut > 0 ? app.runnel.chains.find((c) => c.spec.path === path.slice(0, cut)) : undefined;
    if (chain !== undefined && endpoint !== 'chat_completions' && (ENDPOINTS as readonly string[]).includes(endpoint)) {
      const why = endpoint === 'ui_stream' && chain.spec.messages === undefined ? 'it has no messages adapter (`messages` in defineChain)' : 'its enabledEndpoints leave it out';
      void reply.code(404).send(errorBody(404, 'RUNNEL_ERR_NOT_FOUND', `Not Found: ${chain.spec.path} does not serve ${endpoint}: ${why}`));
      return;
    }
    // Where to look: the index lists every chain and its routes (JSON for a client, a page for a browser).
    void reply.code(404).send(errorBody(404, 'RUNNEL_ERR_NOT_FOUND', 'Not Found: GET / lists the chains and their routes'));
  });

  // One hook for both rules on Host and the bound on a body no route reads (a hook costs every request
  // something). HTTP/1.1 requires Host (RFC 9112 §3.2); Node's own refusal is an empty 400, this one says what
  // is missing. Without keys, a request is answered only under a name that cannot be rebound to this machine, or
  // a listed one (allowed-hosts.ts); health probes, which hold nothing, under any. The body of a method no
  // route reads (GET, HEAD, TRACE, …) is bounded as any other (connection-limits.ts).
  const allowedHost = config.apiKeys.length === 0 && !config.allowedHosts.includes('*') ? hostCheck(config.allowedHosts) : undefined;
  app.addHook('onRequest', (request, reply, done) => {
    const unread = unreadBodyRefusal(request, reply, config.bodyLimit);
    if (unread !== undefined) {
      done(unread);
      return;
    }
    const host = request.headers.host;
    if (host === undefined && request.raw.httpVersion === '1.1') {
      done(new RunnelError('RUNNEL_ERR_BAD_REQUEST', 'An HTTP/1.1 request needs a Host header'));
      return;
    }
    if (allowedHost === undefined || allowedHost(host) || PUBLIC_PATHS.has(request.url.split('?')[0] ?? '')) {
      done();
      return;
    }
    done(
      new RunnelError(
        'RUNNEL_ERR_HOST_NOT_ALLOWED',
        `This server has no API keys and does not answer under the name ${JSON.stringify(hostName(host ?? ''))}: ` +
          'add it to RUNNEL_ALLOWED_HOSTS, or set RUNNEL_API_KEYS',
      ),
    );
  });

  // Authentication runs first, so every route but health answers 401 without a key, whatever the method.
  // Registered only when keys are on: a hook costs every request something.
  if (config.apiKeys.length > 0) {
  const throttle = config.authFailLimit > 0 ? new AuthThrottle({ limit: config.authFailLimit }) : undefined;
  // A refusal answers before the CORS plugin's hook: it carries a listed origin's grant itself, so a page's
  // client reads the 401 or 429 instead of failing its fetch.
  const grant = (request: FastifyRequest, reply: FastifyReply): void => {
    const origin = request.headers.origin;
    if (!originListed(config.corsOrigins, origin)) return;
    void reply.header('access-control-allow-origin', origin).header('vary', 'Origin').header('access-control-expose-headers', CORS_EXPOSED.join(', '));
  };
  app.addHook('onRequest', (request, reply, done) => {
    const path = request.url.split('?')[0] ?? '';
    // A CORS preflight never carries credentials; CORS answers it (and grants nothing to unlisted origins).
    // Public: health, preflights, and routes marked public (the playground's pages and assets, which hold no data).
    const marked = request.routeOptions.config?.public === true;
    if (PUBLIC_PATHS.has(path) || marked || isDocsPath(path) || isPreflight(request.method, request.headers)) {
      done();
      return;
    }
    const checked = checkKey(app.runnel.keys, throttle, clientNetwork(request.ip), request.headers);
    if (checked.refusal !== undefined) {
      grant(request, reply);
      void reply.headers(checked.headers);
      done(checked.refusal);
      return;
    }
    request.identity = checked.identity;
    done();
  });
  }

  if (config.corsOrigins.length > 0) {
    await app.register(cors, {
      origin: config.corsOrigins,
      methods: ['GET', 'POST', 'HEAD', 'OPTIONS', 'DELETE'],
      // What browsers' clients send: Runnel's, an EventSource's resume (last-event-id), and the `openai` SDK's
      // own headers (dangerouslyAllowBrowser), so an OpenAI client in a page passes its preflight.
      allowedHeaders: [
        'content-type',
        'authorization',
        'x-api-key',
        'x-request-id',
        'cache-control',
        'last-event-id',
        'openai-organization',
        'openai-project',
        ...['lang', 'package-version', 'os', 'arch', 'runtime', 'runtime-version', 'retry-count', 'timeout', 'helper-method'].map((name) => `x-stainless-${name}`),
      ],
      // What a page's client may read of an answer: when to retry, and the id to quote.
      exposedHeaders: CORS_EXPOSED,
      maxAge: 600,
    });
  }

  if (config.rateLimit > 0) {
    await app.register(rateLimit, {
      global: true,
      // Before the body is read: a caller over its limit has nothing parsed (after the key check, which names it).
      hook: 'onRequest',
      max: config.rateLimit,
      timeWindow: 60_000,
      keyGenerator: (request) => (request.identity !== 'anonymous' ? `key:${request.identity}` : `ip:${clientNetwork(request.ip)}`),
      // Health, and the routes marked public (the playground's pages and assets, the icons): the same static
      // files for everyone, which cost no chain a thing. A probe: one playground load took seven of a minute's
      // nine requests, and a reload or two later the page itself answered a JSON 429.
      allowList: (request) => PUBLIC_PATHS.has(request.url.split('?')[0] ?? '') || request.routeOptions.config?.public === true,
      errorResponseBuilder: (_request, context) =>
        new RunnelError('RUNNEL_ERR_RATE_LIMITED', `Rate limit exceeded: ${context.max} requests per minute; retry in ${Math.ceil(context.ttl / 1000)} s`),
    });
  }

  await app.register(swagger, {
    openapi: openApiDocument(config),
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  app.addSchema(errorSchema);
  for (const chain of chains) for (const schema of chainComponents(chain)) app.addSchema(schema);
  for (const schema of openAIComponents) app.addSchema(schema);
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  const playgroundDir = options.playgroundDir ?? join(packageRoot(), 'dist', 'playground');
  // A bundle built again under the running server is served as built; without its folder at the start, the
  // playground waits for a restart.
  const built = existsSync(playgroundDir);
  const playgroundTemplate = built ? bundleTemplate(playgroundDir) : () => undefined;
  // Files are sent only by the playground's routes, by validated names, from inside this folder.
  if (built) await app.register(fastifyStatic, { root: playgroundDir, serve: false, dotfiles: 'deny', index: false });

  await app.register(healthRoutes);
  await app.register(indexRoutes);
  await app.register(faviconRoutes);
  for (const chain of chains) {
    await app.register(chainRoutes, { prefix: chain.spec.path, chain, hashed: false, playgroundTemplate });
    await app.register(historyRoutes, { prefix: chain.spec.path, chain });
    if (chain.spec.enabledEndpoints.includes('runs')) await app.register(runRoutes, { prefix: chain.spec.path, chain });
    if (chain.spec.enabledEndpoints.includes('config_hashes')) {
      await app.register(chainRoutes, { prefix: `${chain.spec.path}/c/:config_hash`, chain, hashed: true, playgroundTemplate });
      if (chain.spec.enabledEndpoints.includes('runs')) await app.register(runRoutes, { prefix: `${chain.spec.path}/c/:config_hash`, chain, hashed: true });
    }
  }
  // The chains with a messages adapter as OpenAI chat models (docs/frontends.md).
  await app.register(openAIRoutes, { prefix: '/v1' });

  app.decorate('shutdown', async function shutdown(this: FastifyInstance) {
    const state = this.runnel;
    if (state.shuttingDown) return;
    // Draining: the listener stays up, so /readyz answers 503 and new runs 503 RUNNEL_ERR_SHUTTING_DOWN (a
    // balancer sees "not ready", not "connection refused"), while open streams run on for up to the grace.
    state.shuttingDown = true;
    const stopping = (): RunnelError => new RunnelError('RUNNEL_ERR_SHUTTING_DOWN', 'The server is shutting down');
    // Readers of runs' logs and waits on runs go at once: their clients rejoin or wait elsewhere, and the drain
    // does not wait for them.
    for (const stream of state.streams) if (stream.reader === true) stream.stop(stopping());
    for (const answer of state.answers) if (answer.reader === true) answer.stop(stopping());
    const streams = [...state.streams];
    const answers = [...state.answers];
    let graceTimer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => (graceTimer = setTimeout(resolve, config.shutdownGraceMs).unref()));
    // Background runs: no new ones are taken; those under way get the same grace (waiting ones stay queued).
    // Awaited later: a failure is logged here, not left unhandled meanwhile.
    const runsClosed = state.runs?.close(config.shutdownGraceMs).catch((error: unknown) => this.log.error({ err: error }, 'closing the run queue failed'));
    // Open streams and requests whose runs are under way (an /invoke) get the grace to finish; then a stream ends
    // with its final frame. A request gets a little longer ({@link ANSWER_MARGIN_MS}, inside the process's
    // deadline), then it too ends with RUNNEL_ERR_SHUTTING_DOWN — a 503, not a connection dropped unanswered at
    // the deadline — and its run's model calls stop. This timeline is their own, not the run queue's, whose
    // close may outlast the grace (a worker's close waits up to 2 s more; with Redis away its steps time out).
    await Promise.race([Promise.all([...streams.map((s) => s.done), ...answers.map((a) => a.done())]), grace]);
    clearTimeout(graceTimer);
    const stopped = [...state.streams];
    for (const stream of stopped) stream.stop(stopping());
    let marginTimer: NodeJS.Timeout | undefined;
    const margin = new Promise<void>((resolve) => (marginTimer = setTimeout(resolve, ANSWER_MARGIN_MS).unref()));
    await Promise.race([Promise.all([...state.answers].map((a) => a.done())), margin]);
    clearTimeout(marginTimer);
    const unanswered = [...state.answers];
    for (const answer of unanswered) answer.stop(stopping());
    await Promise.all([...stopped.map((s) => s.done), ...unanswered.map((a) => a.done())]);
    await runsClosed;
    const closing = this.close();
    // Connections busy when closing began go idle as their last response ends (an /invoke finishing after
    // the streams did): close each as soon as it is idle instead of waiting out keep-alive.
    this.server.closeIdleConnections();
    const sweep = setInterval(() => this.server.closeIdleConnections(), 50);
    try {
      await closing;
    } finally {
      clearInterval(sweep);
    }
  });

  return app;
}
