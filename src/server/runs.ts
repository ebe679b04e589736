/**
 * What the HTTP side does with background runs: submit one (validated
 * exactly as `/invoke` validates, so a bad request is a 4xx before anything
 * is queued), find the caller's own run (anyone else's is a 404), and send a
 * run's stream as SSE from its log — every frame with its id, resuming after
 * `Last-Event-ID`, on whichever replica the client reaches.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { isRunnelError, RunnelError, type RunnableConfig } from '../core/index.js';
import { checkWebhookUrl, isLastFrame, TERMINAL, type RunFrame, type RunKind, type RunQueue, type RunRecord } from '../runs/index.js';
import type { PreparedChain } from './prepared.js';
import type { OpenStream } from './app.js';
import { SSE_HEADERS, type SseWriter } from './sse.js';
import { errorAnswerHeaders, logDependencyFailure } from './error-reply.js';
import { toHttpError } from './http-errors.js';
import { bodyObject, checkAcceptingRuns, checkStreamSlot, decodeConfigHash, eventFilters, replyHeaders, required, requestContext, takeOverForEvents, whenClientGone } from './request.js';

/** The server's run queue (started on first use). */
export function runQueue(request: FastifyRequest): RunQueue {
  return request.server.runnel.runQueue();
}

/** Validates a submission and queues it (see {@link prepareRun}). */
export async function submitRun(request: FastifyRequest<{ Params: { config_hash?: string } }>, chain: PreparedChain, kind: RunKind): Promise<RunRecord> {
  const record = await prepareRun(request, chain, kind);
  await runQueue(request).submit(record);
  return record;
}

/**
 * Validates a submission — `{input, config?, kwargs?, webhook?}`, plus the
 * `stream_events` filters for a durable `/stream_events` — exactly as
 * `/invoke` validates, and makes its record. `from`: a chat frontend's run
 * (`/ui_stream`), its input made by the chain's messages adapter.
 */
export async function prepareRun(
  request: FastifyRequest<{ Params: { config_hash?: string } }>,
  chain: PreparedChain,
  kind: RunKind,
  from?: { input: unknown; server?: RunnableConfig; chatId: string },
): Promise<RunRecord> {
  const body = bodyObject(request.body, request.url);
  // A durable stream's run lives on under the chain's run routes (its record, `/runs/{id}/stream` to rejoin,
  // `/cancel`): without them nobody could rejoin it, wait for it or stop it while it spends tokens.
  if (kind !== 'run' && !chain.spec.enabledEndpoints.includes('runs')) {
    throw new RunnelError('RUNNEL_ERR_BODY_INVALID', `on_disconnect "continue" needs the runs endpoint, which ${chain.spec.path} does not enable`, {
      detail: [{ type: 'enum', loc: ['on_disconnect'], msg: "Only 'cancel' is available: this chain has no runs endpoint" }],
    });
  }
  const input = from === undefined ? required(body, 'input') : from.input;
  const filters = kind === 'stream_events' && from === undefined ? eventFilters(body) : undefined;
  const context = requestContext(request, from !== undefined ? 'ui_stream' : kind === 'run' ? 'runs' : kind, chain.spec.path);
  // Set on the context itself: a copy would lose the request's span, which it carries hidden.
  context.stored = true;
  const { config, clientRunId } = await chain.resolveConfig(
    { hash: decodeConfigHash(request.params.config_hash), body: body.config, bodyLoc: ['config'], server: from?.server },
    context,
  );
  chain.checkInput(input);
  // Handlers the chain's perRequestConfigModifier set (billing a caller's tokens) cannot go with the run, which
  // executes from its stored config: refused rather than run unmetered (the log says why; the caller sees a 500).
  const handler = (['onUsage', 'onModelCall', 'onSave'] as const).find((key) => config[key] !== undefined);
  if (handler !== undefined) {
    throw new RunnelError('RUNNEL_ERR_INTERNAL', `${chain.spec.path}'s perRequestConfigModifier sets ${handler}, which a background run or durable stream cannot carry (it runs from its stored config): refused rather than run without it; leave it out where its context says stored`);
  }
  const state = request.server.runnel;
  const webhook =
    body.webhook === undefined || body.webhook === null
      ? undefined
      : checkWebhookUrl(body.webhook, { hosts: state.config.webhookHosts, secret: state.config.webhookSecret, allowHttp: state.config.webhookAllowHttp }).toString();
  checkAcceptingRuns(request);
  const now = new Date().toISOString();
  // The server names every run (a client's config.run_id, where allowed, names its trace, not the run):
  // a run id is never one a caller could choose to land on another's run. Its chain's root run has the run's
  // id — as an /invoke's has its answer's — unless the client named the trace: a trace (`runnel.run_id`) and
  // `stream_events` then lead back to the run (a probe found an id of its own there).
  const runId = randomUUID();
  config.runId = clientRunId ?? runId;
  const record: RunRecord = {
    run_id: runId,
    // The small fields first, before the input: a listing tells from a record's first bytes whether it wants it.
    chain: chain.spec.path,
    kind,
    identity: request.identity,
    status: 'pending',
    chat_id: from?.chatId,
    created_at: now,
    updated_at: now,
    input,
    // JSON only: what a worker in another process can rebuild the run's config from.
    // (Its callbacks, tracing's, are this request's: the executing process makes its own from `__traceparent`
    // and `__tracestate`.)
    config: JSON.parse(JSON.stringify({ ...config, callbacks: undefined })) as Record<string, unknown>,
    filters: filters as Record<string, string[]> | undefined,
    webhook,
  };
  return record;
}

/**
 * How a run's frames are written to a client: LangServe's SSE frames (every frame with its id) by
 * default; `/ui_stream` writes the AI SDK's parts instead.
 */
export interface RunStreamFormat {
  /** Writes one frame of the run's log (as {@link SseWriter.send} answers). */
  frame(sse: SseWriter, frame: RunFrame): boolean | Promise<boolean>;
  /** Writes the error of a stream whose run could not start or be read. */
  failure(sse: SseWriter, error: RunnelError): void;
  /** The endpoint `/metrics` counts the stream under (default: the run's kind, or `runs_stream` for a join). */
  endpoint?: string;
  /**
   * A join in this format whose connection ends is rejoined by its client (an `EventSource`, `RemoteRunnable`):
   * a stopping server closes it at once, and a join that starts while it stops gets what the log holds, then
   * closes. Not the AI SDK's: its client takes a stream that ends without `finish` for a whole answer.
   */
  rejoins?: boolean;
  /** Headers of the stream (the AI SDK's marker), sent with it only: an error answered before it is plain JSON. */
  headers?: Readonly<Record<string, string>>;
}

/**
 * LangServe's frames, each with the id a client resumes after. Its `end` has no data: what a run's log keeps
 * in it (the last model call's finish reason, for the AI SDK's `finish`) is not LangServe's.
 */
export const langServeFormat: RunStreamFormat = {
  frame: (sse, frame) => (frame.event === 'end' ? sse.send('end', undefined, frame.id) : sse.send(frame.event, frame.data, frame.id, frame.json)),
  failure: (sse, error) => void sse.send('error', { status_code: error.statusCode, code: error.code, message: error.message }),
};

/**
 * LangServe's frames as a run's stream sends them to whoever joins it — except `end`, which carries
 * `data: null`: an `EventSource` never dispatches an event without data, so a page listening for `end` would
 * never hear it (and would reconnect to a 204 instead). LangServe's own `/stream` keeps its data-less `end`.
 */
export const joinFormat: RunStreamFormat = {
  frame: (sse, frame) => (frame.event === 'end' ? sse.send('end', null, frame.id) : sse.send(frame.event, frame.data, frame.id, frame.json)),
  failure: langServeFormat.failure,
  rejoins: true,
};

/**
 * A durable stream: the run executes in this process now (as a plain stream would), outliving the request,
 * and its frames — each with the id it has in the run's log — go to this client as they are made; a client
 * that drops rejoins through the log with `Last-Event-ID`, on any replica.
 */
export async function streamRunHere(request: FastifyRequest, reply: FastifyReply, record: RunRecord, format: RunStreamFormat = langServeFormat): Promise<void> {
  const state = request.server.runnel;
  const queue = runQueue(request);
  checkStreamSlot(request);
  const started = performance.now();
  const sse = takeOverForEvents(request, reply, format.headers);
  // Frames go to the socket as they are made; only while it pushes back do they wait here, in order.
  const pending: RunFrame[] = [];
  let blocked = false;
  let gone = false;
  let last = false;
  let ended = false;
  let settle!: () => void;
  const delivered = new Promise<void>((resolve) => (settle = resolve));
  const stop = (): void => {
    gone = true;
    pending.length = 0;
    settle();
  };
  let finish!: () => void;
  const entry: OpenStream = {
    // A stopping server, its grace spent: the run ends with `reason` (its record, its log's error frame) and
    // this client hears that frame last, as a plain stream's client would — not a connection cut mid-answer,
    // which the AI SDK takes for the whole answer. A run not executing here any more has nothing to wait for.
    stop: (reason: RunnelError) => {
      if (!queue.stopHere(record.run_id, reason)) stop();
    },
    done: new Promise<void>((resolve) => (finish = resolve)),
    identity: request.identity,
    runId: record.run_id,
  };
  state.streams.add(entry);
  whenClientGone(reply, () => {
    entry.clientGone = true;
    stop();
  });
  // Opened with the first frame, once the run is stored: the headers, the `metadata` frame and whatever the
  // chain made in the same tick go out as one write, not the headers alone while the record is written.
  let opened = false;
  const open = (): void => {
    if (opened) return;
    opened = true;
    sse.open();
  };
  const deliver = (frame: RunFrame): void => {
    open();
    // The run's own error frame counts in `/metrics` as a live stream's does (a join's replay of it does not).
    if (frame.event === 'error') state.metrics.error(String((frame.data as { code?: unknown } | undefined)?.code ?? 'RUNNEL_ERR_INTERNAL'));
    const sent = format.frame(sse, frame);
    if (isLastFrame(frame)) last = true;
    if (sent === false) return stop();
    if (sent !== true) {
      blocked = true;
      void sent.then((open) => {
        blocked = false;
        if (!open) return stop();
        while (pending.length > 0 && !blocked && !gone) deliver(pending.shift() as RunFrame);
        if ((last || ended) && pending.length === 0 && !blocked) settle();
      });
      return;
    }
    if (last) settle();
  };
  const failed = await queue
    .runHere(record, {
      frame: (frame) => {
        // A client gone keeps nothing: the run goes on, its frames in the log.
        if (gone) return;
        if (blocked) pending.push(frame);
        else deliver(frame);
      },
      // The last frame follows once the record is written: what is left goes with it, in one write.
      ending: () => sse.hold(),
    })
    .then(
      () => undefined,
      (error: unknown) => error,
    );
  let status = 200;
  try {
    // The run has ended: what the socket has not taken yet goes out first (the drain settles then).
    ended = true;
    if (!blocked) settle();
    await delivered;
    if (failed !== undefined && !last && !gone && !sse.closed) {
      const failure = failed instanceof RunnelError ? failed : new RunnelError('RUNNEL_ERR_INTERNAL', 'Internal Server Error');
      state.metrics.error(failure.code);
      if (opened) format.failure(sse, failure);
      else {
        // The run could not start (its record not stored) and nothing was sent: an HTTP error, as for any
        // request refused (503 RUNNEL_ERR_REDIS_UNAVAILABLE with Redis down), which a client can tell from a
        // stream and fall back on (the playground runs a plain stream then).
        const { status: errorStatus, body } = toHttpError(failure);
        status = errorStatus;
        reply.raw.writeHead(status, { ...replyHeaders(reply), 'content-type': 'application/json; charset=utf-8', ...errorAnswerHeaders(request, { status, code: failure.code, error: failure }) });
        reply.raw.end(JSON.stringify(body));
      }
    }
  } finally {
    pending.length = 0;
    if (status === 200) {
      if (!sse.closed) open();
      sse.end();
    }
    state.streams.delete(entry);
    finish();
    const endpoint = format.endpoint ?? record.kind;
    state.metrics.route(record.chain, endpoint).answered(gone ? 499 : status, gone ? undefined : (performance.now() - started) / 1000);
  }
}

/** The caller's run of this chain, or 404 (another caller's run does not exist for them). */
export async function ownRun(request: FastifyRequest, chain: PreparedChain, runId: string): Promise<RunRecord> {
  const record = /^[\w-]{1,64}$/.test(runId) ? await runQueue(request).store.get(runId) : undefined;
  if (record === undefined || record.identity !== request.identity || record.chain !== chain.spec.path) {
    throw new RunnelError('RUNNEL_ERR_NOT_FOUND', 'No such run', { detail: 'Not Found' });
  }
  return record;
}

/** The `Last-Event-ID` to resume after, checked against the store's id shape. */
export function lastEventId(request: FastifyRequest, queue: RunQueue): string | undefined {
  const header = request.headers['last-event-id'];
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || value.trim() === '') return undefined;
  if (!queue.store.validFrameId(value.trim())) {
    throw new RunnelError('RUNNEL_ERR_BAD_REQUEST', 'Last-Event-ID is not an id this server sent', {
      detail: [{ type: 'value_error', loc: ['header', 'last-event-id'], msg: 'Not an event id of this stream' }],
    });
  }
  return value.trim();
}

/** A refused read of a log trimmed away, as `undefined` (the stream's own read reports it); other errors thrown. */
function keepTrimmed(error: unknown): undefined {
  if (isRunnelError(error, 'RUNNEL_ERR_RUN_LOG_TRIMMED')) return undefined;
  throw error;
}

/**
 * Sends a run's stream from its log: the frames after `afterId`, then each
 * new one as it is written, until the `end` or `error` frame. A client that
 * goes away stops only this reader; the run goes on.
 */
export async function sendRunStream(request: FastifyRequest, reply: FastifyReply, record: RunRecord, afterId: string | undefined, format: RunStreamFormat = langServeFormat): Promise<void> {
  const state = request.server.runnel;
  const queue = runQueue(request);
  // Ended, and nothing of its log follows that id (it was the last frame, an EventSource reconnecting after
  // `end`): 204, SSE's answer that tells a client to stop reconnecting — not an empty stream, which reads as
  // a dropped connection.
  // (A read refused as trimmed is no 204: the stream opens, and its first read says so in an `error` frame.)
  const rest = afterId !== undefined && TERMINAL.has(record.status) ? await queue.store.frames(record.run_id, afterId).catch(keepTrimmed) : undefined;
  if (rest !== undefined && rest.length === 0) {
    await reply.code(204).send();
    return;
  }
  // HEAD: the stream's headers at once, no body — not the stream's time spent writing frames nobody gets
  // (Node drops a HEAD's body, and its headers went out only with the run's end).
  if (request.method === 'HEAD') {
    // The stream's own headers, as its GET sends them (no content-length: the stream has none).
    reply.hijack();
    reply.raw.writeHead(200, { ...replyHeaders(reply), ...format.headers, ...SSE_HEADERS, connection: reply.raw.shouldKeepAlive ? 'keep-alive' : 'close' });
    reply.raw.end();
    return;
  }
  checkStreamSlot(request, record.run_id);
  const started = performance.now();
  const sse = takeOverForEvents(request, reply, format.headers);
  const gone = new AbortController();
  // Shutdown ends this reader (the run goes on; the client rejoins on another replica with Last-Event-ID).
  let finish!: () => void;
  let closedByServer = false;
  const stop = (): void => {
    closedByServer = true;
    gone.abort();
  };
  const entry: OpenStream = { stop, done: new Promise<void>((resolve) => (finish = resolve)), reader: format.rejoins === true, identity: request.identity, runId: record.run_id };
  state.streams.add(entry);
  whenClientGone(reply, () => {
    entry.clientGone = true;
    gone.abort();
  });
  sse.open();
  let after = afterId;
  const watch = await queue.store.watch(record.run_id);
  try {
    for (;;) {
      const frames = await queue.store.frames(record.run_id, after);
      for (const frame of frames) {
        // The worker writes the last frame, then the record: hold the frame (a moment, at most a second) until
        // the record has ended too, so a client that reads the record on `end` finds it ended.
        for (let i = 0; isLastFrame(frame) && i < 10; i++) {
          const now = await queue.store.get(record.run_id);
          if (now === undefined || TERMINAL.has(now.status)) break;
          await watch.next(100, gone.signal);
        }
        const sent = format.frame(sse, frame);
        if (sent === false || (sent !== true && !(await sent))) return;
        after = frame.id;
        if (isLastFrame(frame)) return;
      }
      if (gone.signal.aborted || sse.closed) return;
      // A join that started while this server stops: what the log holds, then closed — its client rejoins on
      // a replica that is not going away, rather than wait here for the grace.
      if (frames.length === 0 && format.rejoins === true && state.shuttingDown) return;
      if (frames.length === 0) {
        // Nothing new: the run may have ended with its last frame already read before a reconnect, or been lost.
        const now = await queue.store.get(record.run_id);
        // Gone, or ended with no end in its log (deleted, or evicted by a Redis at its maxmemory): the stream
        // says so, rather than close without an end, which reads as a dropped connection to resume.
        if (now === undefined) throw new RunnelError('RUNNEL_ERR_NOT_FOUND', 'The run is gone: its record expired or was deleted');
        if (TERMINAL.has(now.status) && (await queue.store.frames(record.run_id, after)).length === 0) {
          // Nothing was sent, and nothing follows the client's own Last-Event-ID: it rejoined after the last
          // frame while the record had not yet ended (or the 204 above would have answered). Closed as that
          // 204 would be: its reconnect then gets the 204 (a review: it was sent an error, "no end").
          if (afterId !== undefined && after === afterId) return;
          throw new RunnelError('RUNNEL_ERR_STORED_RECORD_INVALID', `The event log of run ${record.run_id} has no end (deleted, or evicted by Redis); the run's record has its outcome`);
        }
        await watch.next(1_000, gone.signal);
      }
    }
  } catch (error) {
    if (!sse.closed) {
      const failure = error instanceof RunnelError ? error : new RunnelError('RUNNEL_ERR_INTERNAL', 'Internal Server Error');
      if (!(error instanceof RunnelError)) request.log.error({ err: error }, 'run stream failed');
      // A log entry or record not valid, Redis gone mid-stream: logged as the routes log them.
      else logDependencyFailure(request, error, record.run_id);
      // Redis failed this reader, not the run (which may well go on, as a worker elsewhere rides out a short
      // outage): a client that rejoins hears no end, as a stopping replica closes it, and rejoins with
      // Last-Event-ID — a probe found an `error` frame here, which every reader took for the run's end, and
      // the run then succeeded. Only when this connection got frames: a rejoin that fails again before any
      // (a read that fails every time for this run) is told why, so an EventSource does not reconnect to it
      // for as long as its page is open. A client that cannot rejoin (the AI SDK's) is told at once.
      const rejoin = format.rejoins === true && after !== afterId && isRunnelError(failure, 'RUNNEL_ERR_REDIS_UNAVAILABLE');
      if (!rejoin) format.failure(sse, failure);
    }
  } finally {
    watch.close();
    sse.end();
    state.streams.delete(entry);
    finish();
    const { metrics } = state;
    const endpoint = format.endpoint ?? 'runs_stream';
    const clientGone = gone.signal.aborted && !closedByServer;
    metrics.route(record.chain, endpoint).answered(clientGone ? 499 : 200, clientGone ? undefined : (performance.now() - started) / 1000);
  }
}
