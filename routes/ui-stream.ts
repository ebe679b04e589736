/**
 * `POST /{path}/ui_stream`: the AI SDK's UI message stream for a chain with a
 * messages adapter — what `useChat` (through `DefaultChatTransport`) sends
 * and reads. `GET /{path}/ui_stream/{chat_id}/stream`: the transport's
 * reconnect, resuming the chat's durable stream from its start (204 when
 * none is under way).
 *
 * Auth, limits, caching and history are `/stream`'s; so is cancellation: a
 * client that aborts (`stop()`) closes the model request. With
 * `on_disconnect: "continue"` in the body (the transport's `body` option)
 * the run is durable instead, and a reloaded page resumes it.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { RunnelError, type RunnableConfig } from '../src/core/index.js';
import { publicErrors, TERMINAL, type RunFrame, type RunKind } from '../src/runs/index.js';
import type { PreparedChain } from '../src/server/prepared.js';
import type { MessagesAdapter } from '../src/server/registry.js';
import { conversationConfigurable, prepareConversationRun } from '../src/server/conversation-run.js';
import { bodyObject, decodeConfigHash, refuseWebhook } from '../src/server/request.js';
import { prepareRun, runQueue, sendRunStream, streamRunHere, type RunStreamFormat } from '../src/server/runs.js';
import { toHttpError } from '../src/server/http-errors.js';
import { conversationFromUiMessages, UI_STREAM_HEADERS, UiMessageEncoder } from '../src/server/ui-stream.js';
import { lastFinishReason } from '../src/server/usage.js';
import { sendLiveStream } from './streams.js';


/** A durable run's log as UI message parts: its `metadata` starts the message, its `end` or `error` ends it. */
function uiFormat(kind: RunKind, runId: string, endpoint: string): RunStreamFormat {
  const ui = new UiMessageEncoder(runId);
  return {
    endpoint,
    headers: UI_STREAM_HEADERS,
    frame: (sse, frame: RunFrame) => {
      switch (frame.event) {
        case 'metadata':
          return sse.sendRaw(ui.start());
        case 'data':
          return sse.sendRaw(kind === 'stream_events' ? ui.event(frame.data as never) : ui.chunk(frame.data));
        case 'end':
          return sse.sendRaw(ui.finish((frame.data as { finish_reason?: string } | undefined)?.finish_reason));
        default:
          return sse.sendRaw(ui.fail(frame.data as { code: string; message: string }));
      }
    },
    failure: (sse, error) => void sse.sendRaw(ui.fail(error)),
  };
}

/** `on_disconnect` of the body: `cancel` (default) or `continue`. */
function onDisconnect(body: Record<string, unknown>): 'cancel' | 'continue' {
  const value = body.on_disconnect ?? 'cancel';
  if (value !== 'cancel' && value !== 'continue') {
    throw new RunnelError('RUNNEL_ERR_BODY_INVALID', 'on_disconnect must be "cancel" or "continue"', { detail: [{ type: 'enum', loc: ['on_disconnect'], msg: "Input should be 'cancel' or 'continue'" }] });
  }
  return value;
}

/** The frames of a step's bounds, which alone make no answer. */
const STEP_FRAMES = /data: \{"type":"(?:start|finish)-step"\}\n\n/g;

export function uiStreamHandler(chain: PreparedChain) {
  const adapter = chain.spec.messages as MessagesAdapter;
  const events = adapter.stream === 'events';
  return async (request: FastifyRequest<{ Params: { config_hash?: string } }>, reply: FastifyReply) => {
    const body = bodyObject(request.body, request.url);
    const conversation = conversationFromUiMessages(body);
    if (onDisconnect(body) === 'continue') {
      const { input, configurable: adapted } = adapter.toInput(conversation);
      const configurable = conversationConfigurable(conversation, adapted);
      const server: RunnableConfig | undefined = configurable === undefined ? undefined : { configurable };
      const record = await prepareRun(request, chain, events ? 'stream_events' : 'stream', { input, server, chatId: conversation.id });
      await streamRunHere(request, reply, record, uiFormat(record.kind, record.run_id, 'ui_stream'));
      return;
    }
    refuseWebhook(body, chain.spec.path, true);
    const { input, config, runId } = await prepareConversationRun(request, chain, {
      conversation,
      endpoint: 'ui_stream',
      client: { hash: decodeConfigHash(request.params.config_hash), body: body.config, bodyLoc: ['config'] },
    });
    const ui = new UiMessageEncoder(runId);
    let started = false;
    const encode = (item: unknown): string => (events ? ui.event(item as never) : ui.chunk(item));
    /** Parts made and not sent yet; `heldCurrent`: they include the item being written. */
    let held = '';
    let heldCurrent = false;
    const runnable = chain.spec.runnable;
    // The last model answer's finish reason, for the `finish` part: a chain ending in a parser streams text only.
    let last: ReturnType<typeof lastFinishReason> | undefined;
    const withFinish = (runConfig: RunnableConfig): RunnableConfig => {
      last = lastFinishReason(runConfig.onModelCall);
      return { ...runConfig, onModelCall: last.onModelCall };
    };
    await sendLiveStream(request, reply, {
      chain,
      endpoint: 'ui_stream',
      runId,
      config,
      headers: UI_STREAM_HEADERS,
      // A run that fails before its first part (a provider's 429, a bad key) is a plain HTTP error: the AI SDK
      // raises it with its body, and the chat shows no empty answer beside the error.
      errorBeforeOpen: (error) => {
        const { status, body: failure } = toHttpError(error);
        return { status, code: failure.code, body: failure };
      },
      // Events' errors as the error frame says them (a tool's failure in `tool-output-error` included).
      items: (runConfig) => (events ? publicErrors('stream_events', runnable.streamEvents(input, withFinish(runConfig))) : runnable.stream(input, withFinish(runConfig))),
      format: {
        // Until a part with content (text, a tool call): what the items make is kept back, and the stream not
        // opened — a model step begun (`start-step`) is no answer, and a failure then is a plain HTTP error.
        hold: (item) => {
          held += encode(item);
          const keep = held.replace(STEP_FRAMES, '') === '';
          // Written now (by `item`) when not kept; a kept item is in `held`, and the next item is encoded anew —
          // the stream may open meanwhile (its lazy open), and `hold` is then asked no more (a review).
          heldCurrent = !keep;
          return keep;
        },
        item: (sse, item) => {
          const head = started ? '' : ui.start();
          started = true;
          const body = heldCurrent ? held : held + encode(item);
          held = '';
          heldCurrent = false;
          return sse.sendRaw(head + body);
        },
        end: (sse) => {
          const text = (started ? '' : ui.start()) + held + ui.finish(last?.finishReason());
          held = '';
          return sse.sendRaw(text);
        },
        error: (sse, error) => {
          const { body: failure } = toHttpError(error);
          const text = (started ? '' : ui.start()) + held + ui.fail(failure);
          held = '';
          return sse.sendRaw(text);
        },
      },
    });
  };
}

/** The transport's reconnect: the chat's durable stream from its start, or 204 when none is under way. */
export function uiResumeHandler(chain: PreparedChain) {
  return async (request: FastifyRequest<{ Params: { chat_id: string } }>, reply: FastifyReply) => {
    const { chat_id: chatId } = request.params;
    const [run] = await runQueue(request).store.list(request.identity, 1, { chain: chain.spec.path, chat_id: chatId });
    if (run === undefined || TERMINAL.has(run.status)) return reply.code(204).send();
    await sendRunStream(request, reply, run, undefined, uiFormat(run.kind, run.run_id, 'ui_stream_resume'));
  };
}
