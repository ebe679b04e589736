/**
 * `POST /{path}/stream`, `/stream_log` and `/stream_events`: Server-Sent
 * Events through the one `SseWriter`. Everything decidable before the stream
 * starts (bad body, input, config, filters; no free stream slot) is a JSON
 * error; afterwards a failure is one `error` frame and a clean end. A client
 * that disconnects aborts the run, down to the model's HTTP request.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CancelToken, RunnelError, Saves, type ErrorCode, type Runnable, type RunnableConfig } from '../src/core/index.js';
import type { OpenStream } from '../src/server/app.js';
import { errorAnswerHeaders, logDependencyFailure } from '../src/server/error-reply.js';
import { errorFrame, toHttpError } from '../src/server/http-errors.js';
import { firstTokenTimer } from '../src/server/metrics.js';
import type { PreparedChain } from '../src/server/prepared.js';
import type { Endpoint } from '../src/server/registry.js';
import { bodyObject, checkAcceptingRuns, checkStreamSlot, clientGone as recordClientGone, decodeConfigHash, eventFilters, refuseWebhook, required, replyHeaders, requestContext, takeOverForEvents, whenClientGone } from '../src/server/request.js';
import { prepareRun, streamRunHere } from '../src/server/runs.js';
import { publicErrors } from '../src/runs/index.js';
import type { SseWriter } from '../src/server/sse.js';
import { metered, usageMeter } from '../src/server/usage.js';
import type { RunMeter } from '../src/runs/index.js';

type Kind = 'stream' | 'stream_log' | 'stream_events';

/** The frames of `stream_log` and `stream_events`: each item one `data` frame. */
function eventFrames(kind: 'stream_log' | 'stream_events', runnable: Runnable<never, unknown>, input: never, config: RunnableConfig, body: Record<string, unknown>): AsyncIterable<unknown> {
  const filters = eventFilters(body);
  // What an event says of an error: as the error frame says it (a non-Runnel error's message is not sent).
  return kind === 'stream_log' ? publicErrors(kind, runnable.streamLog(input, config, filters)) : publicErrors(kind, runnable.streamEvents(input, config, filters));
}

/** Sends one frame, waiting only when the socket pushes back; false once the client is gone. */
async function sendFrame(sse: SseWriter, event: string, data?: unknown): Promise<boolean> {
  const sent = sse.send(event, data);
  return sent === true || (sent !== false && (await sent));
}

/**
 * How a live stream writes what its run yields: LangServe's frames here, the AI SDK's parts on
 * `/ui_stream`. Each writer answers as {@link SseWriter.send} does.
 */
export interface LiveFormat {
  /** One item the run yielded (an output chunk, an event, a log patch). */
  item(sse: SseWriter, item: unknown): boolean | Promise<boolean>;
  /**
   * Asked of each item while a lazily opened stream ({@link sendLiveStream}'s `errorBeforeOpen`) has not
   * opened: true keeps the item back, written with the next one or the end, and the stream unopened (an AI
   * SDK step begun is no answer yet: a failure then is still a plain HTTP error).
   */
  hold?(item: unknown): boolean;
  /** The run ended. */
  end(sse: SseWriter): boolean | Promise<boolean>;
  /** The run failed after the stream started. */
  error(sse: SseWriter, error: unknown): boolean | Promise<boolean>;
}

/** LangServe's frames: `metadata` before the first chunk (on `/stream`), a `data` an item, then `end` or `error`. */
function langServeFrames(kind: Kind, runId: string): LiveFormat {
  let first = kind === 'stream';
  return {
    item: (sse, item) => {
      if (first) {
        first = false;
        const sent = sse.send('metadata', { run_id: runId });
        if (sent !== true) return typeof sent === 'boolean' ? sent : sent.then((open) => open && sendFrame(sse, 'data', item ?? null));
      }
      // A chunk that is undefined is JSON's null, as /invoke answers it: a data frame without data is dropped by
      // SSE parsers (EventSource, RemoteRunnable), and the chunk with it.
      return sse.send('data', item ?? null);
    },
    end: (sse) => sse.send('end'),
    error: (sse, error) => sse.send('error', errorFrame(error)),
  };
}

/**
 * Runs a chain for a live event stream: the response taken over, the run aborted when the client goes
 * (down to the model's HTTP request) or the server shuts down, every item written with backpressure, then
 * one end or error; counted in `/metrics` when it ends. Everything decidable before has been checked.
 */
export async function sendLiveStream(
  request: FastifyRequest,
  reply: FastifyReply,
  options: {
    chain: PreparedChain;
    endpoint: Endpoint;
    runId: string;
    items: (config: RunnableConfig) => AsyncIterable<unknown>;
    config: RunnableConfig;
    format: LiveFormat;
    /**
     * Opens the stream with its first item (or its end, or after {@link LAZY_OPEN_MS} at the latest), not at
     * once: a run that fails before then is answered as a plain HTTP error, this answer — its status, its
     * body, and `retry-after` where the status asks for one — so a client retries a provider's 429 or 5xx as
     * it would retry the provider's own.
     */
    errorBeforeOpen?: (error: unknown) => { status: number; code: ErrorCode; body: unknown };
    /** Headers of the stream, sent with it only (not with an error answered before it opens). */
    headers?: Readonly<Record<string, string>>;
    /** The handlers metering its model calls (by default the chain's, for `/metrics`). */
    meter?: RunMeter;
  },
): Promise<void> {
  const { chain, endpoint, runId, format, errorBeforeOpen } = options;
  const state = request.server.runnel;
  checkStreamSlot(request);
  const controller = new CancelToken();
  let clientGone = false;
  let finish!: () => void;
  const entry: OpenStream = { stop: (reason) => controller.abort(reason), done: new Promise<void>((resolve) => (finish = resolve)), identity: request.identity };
  state.streams.add(entry);
  const started = performance.now();
  let status = 200;
  const firstToken = firstTokenTimer(state.metrics, { chain: chain.spec.path, endpoint }, () => reply.elapsedTime / 1000);

  const sse = takeOverForEvents(request, reply, options.headers);
  whenClientGone(reply, () => {
    if (sse.closed && reply.raw.writableEnded) return;
    clientGone = true;
    entry.clientGone = true;
    controller.abort(new RunnelError(sse.stalled ? 'RUNNEL_ERR_STREAM_STALLED' : 'RUNNEL_ERR_ABORTED', sse.stalled ? 'The client read nothing; stream cut' : 'The client disconnected'));
  });
  let opened = false;
  let openLater: NodeJS.Timeout | undefined;
  const openNow = (): void => {
    if (opened || clientGone || sse.closed) return;
    opened = true;
    if (openLater !== undefined) clearTimeout(openLater);
    sse.open();
  };
  if (errorBeforeOpen === undefined) openNow();
  else {
    // Headers within a few seconds whatever the run does (a ping interval, when that is shorter), so a proxy
    // sees the answer begin, and then the pings.
    openLater = setTimeout(openNow, Math.min(LAZY_OPEN_MS, state.config.pingMs));
    openLater.unref();
  }
  // A run that fails, or whose client goes, keeps no chat turn a step of it saved.
  const saves = new Saves();
  try {
    const runConfig = metered(options.config, options.meter ?? usageMeter(state, chain), { signal: controller, onSave: saves.onSave });
    let open = true;
    for await (const item of options.items(runConfig)) {
      firstToken(item);
      if (!opened && format.hold?.(item) === true) continue;
      if (!opened) openNow();
      const sent = format.item(sse, item);
      if (sent !== true && !(sent !== false && (await sent))) {
        open = false;
        break;
      }
    }
    if (open && !sse.closed) {
      if (!opened) openNow();
      await format.end(sse);
      // Answered: a collector of the chain's own (its `perRequestConfigModifier`'s `onSave`) has the saves.
      saves.passTo(options.config.onSave);
    } else await saves.takeBack();
  } catch (error) {
    await saves.takeBack();
    if (!clientGone && !sse.closed) {
      const { status: errorStatus, body, internal } = toHttpError(error);
      status = errorStatus;
      state.metrics.error(body.code);
      if (internal) request.log.error({ err: error, runId }, 'stream failed');
      else logDependencyFailure(request, error, runId);
      if (opened || errorBeforeOpen === undefined) await format.error(sse, error);
      else status = answerBeforeOpen(reply, error, errorBeforeOpen);
    } else {
      status = 499;
    }
  } finally {
    if (openLater !== undefined) clearTimeout(openLater);
    sse.end();
    state.streams.delete(entry);
    const elapsedMs = performance.now() - started;
    if (clientGone) recordClientGone(request, endpoint, chain.spec.path, elapsedMs);
    else state.metrics.route(chain.spec.path, endpoint).answered(status, elapsedMs / 1000);
    finish();
  }
}

/** The longest a stream opened with its first item waits before it opens anyway (see `errorBeforeOpen`), or a ping interval when that is shorter. */
export const LAZY_OPEN_MS = 5_000;

/** A run that failed before its stream opened, answered as a plain HTTP error (the stream never began). */
function answerBeforeOpen(reply: FastifyReply, error: unknown, toAnswer: (error: unknown) => { status: number; code: ErrorCode; body: unknown }): number {
  const { status, code, body } = toAnswer(error);
  const headers = { ...replyHeaders(reply), 'content-type': 'application/json; charset=utf-8', ...errorAnswerHeaders(reply.request, { status, code, error }) };
  reply.raw.writeHead(status, headers);
  reply.raw.end(JSON.stringify(body));
  return status;
}

export function streamHandler(chain: PreparedChain, kind: Kind) {
  return async (request: FastifyRequest<{ Params: { config_hash?: string } }>, reply: FastifyReply) => {
    const body = bodyObject(request.body, request.url);
    if (body.on_disconnect !== undefined && body.on_disconnect !== 'cancel') {
      // "continue" on /stream_log is a right value on the wrong route: told so, not that it is no value at all.
      if (body.on_disconnect === 'continue' && kind === 'stream_log') {
        throw new RunnelError(
          'RUNNEL_ERR_BODY_INVALID',
          'on_disconnect "continue" is not available on /stream_log, which has no durable form: use /stream or /stream_events to continue a run, or "cancel" here',
          { detail: [{ type: 'enum', loc: ['on_disconnect'], msg: "Only 'cancel' is available on /stream_log" }] },
        );
      }
      if (body.on_disconnect !== 'continue') {
        throw new RunnelError('RUNNEL_ERR_BODY_INVALID', 'on_disconnect must be "cancel" or "continue" ("continue": /stream and /stream_events)', {
          detail: [{ type: 'enum', loc: ['on_disconnect'], msg: kind === 'stream_log' ? "Only 'cancel' is available on /stream_log" : "Input should be 'cancel' or 'continue'" }],
        });
      }
      // Durable: the run goes to the queue and this request follows its log, so a client that drops rejoins
      // through /{path}/runs/{run_id}/stream with Last-Event-ID, on any replica.
      const record = await prepareRun(request, chain, kind === 'stream' ? 'stream' : 'stream_events');
      await streamRunHere(request, reply, record);
      return;
    }
    refuseWebhook(body, chain.spec.path, kind !== 'stream_log');
    const input = required(body, 'input');
    if (kind !== 'stream') eventFilters(body);
    const { config, runId } = await chain.resolveConfig(
      { hash: decodeConfigHash(request.params.config_hash), body: body.config, bodyLoc: ['config'] },
      requestContext(request, kind, chain.spec.path),
    );
    chain.checkInput(input);
    checkAcceptingRuns(request);
    const runnable = chain.spec.runnable;
    await sendLiveStream(request, reply, {
      chain,
      endpoint: kind,
      runId,
      config,
      items: (runConfig) => (kind === 'stream' ? runnable.stream(input as never, runConfig) : eventFrames(kind, runnable, input as never, runConfig, body)),
      format: langServeFrames(kind, runId),
    });
  };
}
