/**
 * Requests the server will not take, as the connection sees them: a body
 * over the limit is answered 413 and then drained before the socket closes
 * (nginx's lingering close), a request that takes longer than
 * `RUNNEL_BODY_TIMEOUT_MS` to arrive is answered 408 and closed, a request
 * line past Node's header limit 431 — every one in Runnel's error shape —
 * and path parameters (session ids, config hashes) may be as long as a URL.
 */
import { STATUS_CODES, type IncomingMessage, type OutgoingHttpHeaders, type ServerOptions, type ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { ConnectionError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorCodes, RunnelError, type ErrorCode } from '../core/index.js';
import { originListed, type ServerConfig } from './config.js';
import { errorBody } from './http-errors.js';
import { toOpenAIError } from './openai-errors.js';
import { takenMark } from './socket-progress.js';

/**
 * Node's default limit on a request line with its headers (16 KiB): no path parameter that gets through it
 * is refused by the router, so a config hash of a few KB works (find-my-way's default is 100 characters).
 */
export const MAX_PARAM_LENGTH = 16 * 1024;

/** Marks a routed request answered on its socket (its body timed out): the status it was given. */
const ANSWERED_ON_SOCKET = Symbol('runnel.answeredOnSocket');

/**
 * The status a request was answered with on its socket, past its response (a body timeout's 408), or
 * undefined: its response's own status, or its client's leaving, tells the rest.
 */
export function answeredOnSocket(request: IncomingMessage): number | undefined {
  return (request as IncomingMessage & { [ANSWERED_ON_SOCKET]?: number })[ANSWERED_ON_SOCKET];
}

/**
 * How much of a refused body is read after the answer before the socket is closed anyway. Time is bounded by
 * the body timeout: the request has not arrived until the body has.
 */
export const LINGER_MAX_BYTES = 16 * 1024 * 1024;

/**
 * Sockets being drained after their answer, by how many of their requests are: a body timeout there only
 * closes them (they have their answer). Counted, not marked: two refused requests pipelined on one socket
 * drain one after the other, and the first's end must not unmark the second (a review: a second answer).
 */
const draining = new WeakMap<Socket, number>();
const lingering = {
  has: (socket: Socket): boolean => (draining.get(socket) ?? 0) > 0,
  add: (socket: Socket): void => void draining.set(socket, (draining.get(socket) ?? 0) + 1),
  delete: (socket: Socket): void => {
    const left = (draining.get(socket) ?? 1) - 1;
    if (left > 0) draining.set(socket, left);
    else draining.delete(socket);
  },
};

/** Requests that asked for `100 Continue` and have not had it: their client may send no body until they do. */
const awaitingContinue = new WeakSet<IncomingMessage>();

/** Whether a request asked for `100 Continue` and has not had it (its body is unread, and may be on its way). */
export function awaitsContinue(req: IncomingMessage): boolean {
  return awaitingContinue.has(req);
}

/**
 * Answers `Expect: 100-continue` when the app starts reading the body, not on arrival as Node does. A
 * request refused before its body is read — over the body limit, without a valid key, rate-limited — gets
 * its answer with no `100 Continue` before it, so a client that waits for one never sends the body (curl
 * asks for one on uploads past 1 MB: a 5 MB upload over the limit went out whole to be answered 413). A
 * client may also send the body without waiting: such an answer lingers as any refusal of an unread body
 * does ({@link answerAndLinger}), ending when the client closes, the body ends or the body timeout comes.
 * Costs nothing per request that does not ask.
 *
 * @example
 * continueWhenRead(app.server);
 */
export function continueWhenRead(server: {
  on(event: 'checkContinue', listener: (req: IncomingMessage, res: ServerResponse) => void): unknown;
  emit(event: 'request', req: IncomingMessage, res: ServerResponse): boolean;
}): void {
  server.on('checkContinue', (req, res) => {
    awaitingContinue.add(req);
    // Every way of reading a stream listens for 'data' or 'readable' (pipe, a parser's on('data'), async iteration).
    const on = req.on;
    req.on = function (this: IncomingMessage, event: string | symbol, listener: (...args: unknown[]) => void) {
      if ((event === 'data' || event === 'readable') && awaitingContinue.delete(req)) res.writeContinue();
      return on.call(this, event, listener);
    } as typeof req.on;
    server.emit('request', req, res);
  });
}

/** The Fastify options for {@link connectionOptions}. */
export interface ConnectionOptions {
  requestTimeout: number;
  http: ServerOptions;
  routerOptions: { maxParamLength: number };
  clientErrorHandler: (this: FastifyInstance, error: ConnectionError, socket: Socket) => void;
}

/**
 * Fastify options for the limits above. The body timeout is Node's
 * `requestTimeout`: it runs from the request's first byte until its body has
 * arrived, and not while the answer is written, so long streams are not cut.
 *
 * @example
 * const app = Fastify({ bodyLimit: config.bodyLimit, ...connectionOptions(config) });
 */
export function connectionOptions(config: Pick<ServerConfig, 'bodyTimeoutMs' | 'corsOrigins'>): ConnectionOptions {
  const timeout = config.bodyTimeoutMs;
  return {
    requestTimeout: timeout,
    http: {
      requestTimeout: timeout,
      // Node looks for expired requests on this interval (30 s by default): often enough that a request is cut
      // close to its timeout, at most a quarter of it late.
      connectionsCheckingInterval: Math.max(10, Math.min(1_000, Math.floor(timeout / 4))),
      // Node answers an HTTP/1.1 request without Host with an empty 400 of its own; the app refuses it in
      // Runnel's shape instead (app.ts).
      requireHostHeader: false,
    },
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    clientErrorHandler(error, socket) {
      answerClientError.call(this, error, socket, config.corsOrigins);
    },
  };
}

/**
 * Cuts a connection whose client stopped reading its answer: bytes waiting to be sent, and none taken, for
 * twice `stallMs` (`RUNNEL_STREAM_STALL_MS`). An event stream cuts such a client itself after `stallMs`;
 * a JSON answer (`/openapi.json`, a history, a list of runs) held its bytes for as long as the client
 * liked — a probe's 500 sockets that never read held 100 MB. Sockets with nothing waiting (a long `/invoke`,
 * a kept-alive connection) are not looked at. Looks every quarter of `stallMs`, at most every second; no
 * work per request. Returns the stop.
 *
 * @example
 * cutStalledReaders(app.server, config.streamStallMs);
 */
export function cutStalledReaders(server: { on(event: 'connection', listener: (socket: Socket) => void): unknown }, stallMs: number): () => void {
  const sockets = new Set<Socket>();
  /** A socket with bytes waiting: how many it had sent when last seen moving, and when. */
  const waiting = new Map<Socket, { sent: number; since: number }>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => {
      sockets.delete(socket);
      waiting.delete(socket);
    });
  });
  const timer = setInterval(
    () => {
      const now = performance.now();
      for (const socket of sockets) {
        const left = socket.writableLength;
        if (left === 0) {
          waiting.delete(socket);
          continue;
        }
        // What the client took, the parts of a large write in flight included (see takenMark).
        const sent = takenMark(socket);
        const seen = waiting.get(socket);
        if (seen === undefined || seen.sent !== sent) waiting.set(socket, { sent, since: now });
        else if (now - seen.since >= 2 * stallMs) socket.destroy();
      }
    },
    Math.max(25, Math.min(1_000, Math.floor(stallMs / 4))),
  );
  timer.unref();
  return () => clearInterval(timer);
}

/** What Node's parser reports, as Runnel codes; anything else unparseable is a bad request. */
function clientErrorCode(error: ConnectionError): ErrorCode {
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') return 'RUNNEL_ERR_BODY_TIMEOUT';
  if (error.code === 'HPE_HEADER_OVERFLOW') return 'RUNNEL_ERR_HEADERS_TOO_LARGE';
  return 'RUNNEL_ERR_BAD_REQUEST';
}

const CLIENT_ERROR_MESSAGES: Partial<Record<ErrorCode, string>> = {
  RUNNEL_ERR_BODY_TIMEOUT: 'The request did not arrive in time (RUNNEL_BODY_TIMEOUT_MS)',
  RUNNEL_ERR_HEADERS_TOO_LARGE: 'The request line and headers are too large',
  RUNNEL_ERR_BAD_REQUEST: 'Malformed request',
};

/**
 * Errors Node raises on a connection before or while a request arrives (Fastify's `clientErrorHandler`):
 * answered in Runnel's error shape where no answer has started, then closed — the request is abandoned, so
 * nothing more of it may reach a route.
 */
function answerClientError(this: FastifyInstance, error: ConnectionError, socket: Socket, corsOrigins: readonly string[]): void {
  if (error.code === 'ECONNRESET' || socket.destroyed || deferred.has(socket)) return;
  if (lingering.has(socket)) {
    socket.destroy();
    return;
  }
  const code = clientErrorCode(error);
  const status = errorCodes[code].status;
  const message = CLIENT_ERROR_MESSAGES[code] ?? code;
  const requestId = randomUUID();
  this.log.debug({ code: error.code, reqId: requestId }, `client error: ${message}`);
  // A request whose headers arrived (its body timed out) on the OpenAI-compatible routes is answered in OpenAI's
  // shape, as every other error there: the `openai` SDKs read only that.
  // Only that request's: after a parse error, `incoming` may be an earlier pipelined request, whole already.
  const incoming = error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? (socket as Socket & { parser?: { incoming?: IncomingMessage | null } | null }).parser?.incoming : undefined;
  const openai = incoming?.complete === false && typeof incoming.url === 'string' && incoming.url.startsWith('/v1/');
  const answer = (): void => {
    if (socket.writable) {
      const body = JSON.stringify(openai ? toOpenAIError(new RunnelError(code, message)).body : errorBody(status, code, message));
      const origin = corsOrigins.length === 0 ? undefined : incoming != null ? incoming.headers.origin : originIn(error as { rawPacket?: unknown; bytesParsed?: unknown });
      const grant = originListed(corsOrigins, origin) ? `access-control-allow-origin: ${origin}\r\nvary: Origin\r\naccess-control-expose-headers: x-request-id\r\n` : '';
      socket.write(
        `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-request-id: ${requestId}\r\n${grant}connection: close\r\n\r\n${body}`,
      );
      // The routed request whose body timed out was answered here, past its response: its span and its log
      // line say 408, not a client gone (499). Fastify writes no completion line for it.
      if (incoming?.complete === false) {
        (incoming as IncomingMessage & { [ANSWERED_ON_SOCKET]?: number })[ANSWERED_ON_SOCKET] = status;
        this.log.info({ reqId: requestId, req: { method: incoming.method, url: incoming.url }, res: { statusCode: status } }, 'request timed out');
      }
    }
    socket.destroy();
  };
  // Requests pipelined before the bad one still have their answers to come on this connection: they go first,
  // in order, then this one — not this one in their place, which a client reads as the first one's answer (a
  // probe: a valid chat turn ran, and its client got the 400 of the garbage sent after it). Node hands the
  // socket to each queued answer in turn as the one before finishes; this one waits for the last.
  const pending = pendingAnswer(socket) !== undefined;
  // Only after a parse error, which stops Node's parser. A request whose body timed out is routed already and
  // its parser still reads: waiting would let its late body arrive and run it, and answering now would put its
  // 408 in the place of an earlier answer, or inside one being written (reviews). Its connection just closes:
  // the client sees it dropped, as HTTP lets a server drop pipelined requests, and none of them is misread.
  if (pending && error.code?.startsWith('HPE_') !== true) {
    socket.destroy();
    return;
  }
  if (pending) {
    // Once per connection: the parser, failed, raises this again at every chunk that arrives meanwhile.
    deferred.add(socket);
    const after = (): void => {
      const next = pendingAnswer(socket);
      if (next === undefined) return answer();
      next.once('finish', () => setImmediate(after));
      next.once('close', () => {
        if (!next.writableFinished) socket.destroy();
      });
    };
    after();
    return;
  }
  answer();
}

/**
 * The `Origin` of a request Node's parser refused (headers too large, malformed), read from the bytes it
 * stopped at, so a page on a listed origin reads the refusal (a 431: a page's large `authorization`) instead
 * of a failed fetch, as it reads a route's. Only from the refused request's own head: the packet may hold a
 * request pipelined before it. Best effort: Node keeps only the packet it failed in, so headers that came in
 * more than one read (across a network, more often than on one machine) may leave the origin out. Undefined
 * where there is none, or one not well formed.
 */
function originIn(error: { rawPacket?: unknown; bytesParsed?: unknown }): string | undefined {
  const packet = error.rawPacket;
  if (!Buffer.isBuffer(packet)) return undefined;
  const text = packet.toString('latin1', 0, Math.min(packet.length, 128 * 1024));
  const stopped = typeof error.bytesParsed === 'number' ? Math.min(error.bytesParsed, text.length) : text.length;
  // The refused request's head starts at its request line, the last one before the point the parser stopped,
  // and had not ended before it: one that had is an earlier request's (the refused one's own line was
  // malformed). Node finds headers too large at their blank line, or before it; the head goes on past that
  // point (a browser sends Origin after a large authorization) to its blank line.
  let head: number | undefined;
  for (const line of text.slice(0, stopped).matchAll(/(?:^|\r\n)[A-Z]+ [^\s]+ HTTP\/1\.[01]\r\n/g)) head = line.index;
  if (head === undefined) return undefined;
  const end = text.indexOf('\r\n\r\n', head);
  if (end !== -1 && end + 4 <= stopped) return undefined;
  const own = text.slice(head, end === -1 ? undefined : end + 2);
  // Found, then cut and trimmed by hand: a pattern that trims blanks around the value backtracks over a long
  // run of them (a review: one request of 60,000 spaces held the server 5 s).
  const at = /\r\norigin:/i.exec(own);
  if (at === null) return undefined;
  const start = at.index + at[0].length;
  const lineEnd = own.indexOf('\r\n', start);
  const value = own.slice(start, lineEnd === -1 ? undefined : lineEnd).trim();
  // A scheme and an authority only (RFC 6454's serialisation), whatever the scheme: a listed extension's too.
  return value.length <= 2048 && /^[a-z][a-z0-9+.-]*:\/\/[\w.~:@!$&'()*+,;=%[\]-]+$/i.test(value) ? value : undefined;
}

/** Connections whose client error waits for the answers pipelined before it. */
const deferred = new WeakSet<Socket>();

/**
 * The answer Node is writing on `socket` for a request that arrived whole (one still arriving — a body that
 * timed out — is the one a client error ends), unless it has finished.
 */
function pendingAnswer(socket: Socket): ServerResponse | undefined {
  const answer = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
  return answer !== undefined && answer !== null && answer.req.complete && !answer.writableFinished ? answer : undefined;
}

/**
 * Answers `CONNECT` (a request for a proxy's tunnel), which Node hands to a `connect` listener and, without one,
 * drops unanswered: a 405 in the error shape, then the connection closes (no tunnel opens).
 */
export function refuseConnect(server: { on(event: 'connect', listener: (req: IncomingMessage, socket: Duplex) => void): unknown }, requestId: (req: IncomingMessage) => string): void {
  server.on('connect', (req, socket) => {
    // Handed over by Node's parser: its errors are this listener's (a reset unheard would end the process).
    socket.on('error', () => socket.destroy());
    // Behind a request whose answer is still to come, the 405 would go out in that answer's place, and a client
    // would read it as that one's (a review): the connection just closes, as Node closed it before.
    if (pendingAnswer(socket as Socket) !== undefined) {
      socket.destroy();
      return;
    }
    const body = JSON.stringify(errorBody(405, 'RUNNEL_ERR_METHOD_NOT_ALLOWED', 'CONNECT is not served: this server is not a proxy'));
    socket.end(
      `HTTP/1.1 405 Method Not Allowed\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-request-id: ${requestId(req)}\r\nconnection: close\r\n\r\n${body}`,
      () => socket.destroy(),
    );
  });
}

/**
 * Answers an `expect` other than `100-continue` (the only expectation HTTP defines) in Runnel's error shape —
 * Node's own answer is a bare 417 — and, as Node does, goes on with the connection (a request pipelined after
 * it is answered in turn) once the refused body is read and dropped: up to {@link LINGER_MAX_BYTES}, as any
 * refused body, and then the connection is closed (Node's own drain read without end, a review found: 2 GB in
 * 4 s, then a second answer when the body timed out).
 */
export function refuseExpectations(server: { on(event: 'checkExpectation', listener: (req: IncomingMessage, res: ServerResponse) => void): unknown }, requestId: (req: IncomingMessage) => string): void {
  server.on('checkExpectation', (req, res) => {
    const message = 'Expectation Failed: the only expect this server meets is 100-continue';
    // On the OpenAI-compatible routes in OpenAI's shape, as every other error there (a probe found Runnel's).
    const openai = typeof req.url === 'string' && req.url.startsWith('/v1/');
    const body = JSON.stringify(openai ? toOpenAIError(new RunnelError('RUNNEL_ERR_EXPECTATION_FAILED', message)).body : errorBody(417, 'RUNNEL_ERR_EXPECTATION_FAILED', message));
    const socket = req.socket;
    // Read here (so Node does not dump it without a bound); answered already, so a body timeout meanwhile
    // closes the connection without a second answer.
    lingering.add(socket);
    let read = 0;
    const onData = (chunk: Buffer): void => {
      read += chunk.length;
      if (read > LINGER_MAX_BYTES) socket.destroy();
    };
    let drained = false;
    const done = (): void => {
      if (drained) return;
      drained = true;
      req.off('data', onData);
      lingering.delete(socket);
    };
    req.on('data', onData);
    req.once('end', done);
    req.once('close', done);
    res.writeHead(417, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), 'x-request-id': requestId(req) });
    res.end(body);
  });
}

/**
 * The methods whose body Fastify reads (through the content-type parsers, which bound it): every other one's —
 * GET, HEAD, TRACE, and any method Node parses that no route has (PROPFIND, PURGE, …: answered 404 or 405) —
 * goes unread.
 */
const BODY_READ = new Set(['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'QUERY']);

/**
 * Bounds the body of a request no route reads: Fastify parses no body for GET, HEAD, TRACE or a method it does
 * not know (a review: 64 MiB sent with `TRACE /healthz` was read and dropped, the connection kept), and Node reads and drops
 * one after the answer without a bound (a probe: 200 MB sent with a `GET /healthz` in under a second, the
 * connection kept open for the next request). One declared past `bodyLimit` is refused as any body over the
 * limit (the error returned: 413, the rest read up to {@link LINGER_MAX_BYTES}, then the connection closes); one
 * of unknown length (chunked) has its connection closed once more than {@link LINGER_MAX_BYTES} of it have been
 * dropped. Called from the server's one `onRequest` hook (a hook costs every request something).
 *
 * @example
 * const refused = unreadBodyRefusal(request, reply, config.bodyLimit);
 * if (refused !== undefined) return done(refused);
 */
export function unreadBodyRefusal(request: FastifyRequest, reply: FastifyReply, bodyLimit: number): RunnelError | undefined {
  const req = request.raw;
  if (BODY_READ.has(req.method as string) || req.complete) return undefined;
  const length = req.headers['content-length'];
  if (length !== undefined && Number(length) > bodyLimit) {
    void reply.header('connection', 'close');
    return new RunnelError('RUNNEL_ERR_BODY_TOO_LARGE', 'Request body is too large');
  }
  if (req.headers['transfer-encoding'] !== undefined) {
    let read = 0;
    const onData = (chunk: Buffer): void => {
      read += chunk.length;
      if (read > LINGER_MAX_BYTES) req.socket.destroy();
    };
    req.on('data', onData);
    req.once('close', () => req.off('data', onData));
  }
  return undefined;
}

/**
 * Answers while the request body is still arriving, then reads and discards
 * the rest of it (up to {@link LINGER_MAX_BYTES}, within the body timeout)
 * before the connection closes, as nginx's lingering close does. Closing a
 * socket with unread bytes makes the kernel reset the connection, and a
 * client still sending — Python's http.client always, Node's fetch often —
 * then fails with EPIPE instead of reading the answer.
 *
 * @example
 * if (!request.raw.complete) return answerAndLinger(request, reply, { status: 413, body });
 */
export function answerAndLinger(request: FastifyRequest, reply: FastifyReply, answer: { status: number; body: object }): void {
  const req = request.raw;
  const res = reply.raw;
  const socket = req.socket;
  const payload = JSON.stringify(answer.body);
  const headers: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) headers[name] = value;
  reply.hijack();
  res.writeHead(answer.status, { ...headers, 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(payload), connection: 'close' });
  // Read without sending `100 Continue`: a client that waits for one closes once it has its answer, one that
  // did not wait has its body read like any other's.
  awaitingContinue.delete(req);
  // The whole answer goes out now; ending the response, which closes the socket, waits until the body is read.
  res.write(payload);
  lingering.add(socket);
  let read = 0;
  let finished = false;
  const finish = (): void => {
    if (finished) return;
    finished = true;
    req.off('data', onData);
    req.off('end', finish);
    req.off('close', finish);
    lingering.delete(socket);
    res.end();
  };
  const onData = (chunk: Buffer): void => {
    read += chunk.length;
    if (read > LINGER_MAX_BYTES) finish();
  };
  req.on('data', onData);
  req.once('end', finish);
  req.once('close', finish);
}
