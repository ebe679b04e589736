/**
 * The AI SDK's UI message stream (what `useChat` and `DefaultChatTransport`
 * read): SSE `data:` frames of JSON parts — `start`, `start-step`,
 * `text-start` / `text-delta` / `text-end`, `tool-input-start` /
 * `tool-input-available` / `tool-output-available`, `finish-step`, `finish`
 * or `error` — then `data: [DONE]`. A {@link UiMessageEncoder} turns a run's
 * output chunks, or its events, into those parts; the same encoder serves a
 * live stream and the replay of a durable run's log.
 */
import { concat, RunnelError } from '../core/index.js';
import { BaseMessage, MESSAGE_TYPES } from '../messages/index.js';
import { finishKind } from '../models/finish.js';
import type { ChatTurn, Conversation } from './registry.js';

/** The header the AI SDK checks on a UI message stream. */
export const UI_STREAM_HEADERS = { 'x-vercel-ai-ui-message-stream': 'v1' } as const;

/** The text in one output chunk: a string, or a message (chunk)'s text content; anything else has none. */
export function chunkText(chunk: unknown): string {
  if (typeof chunk === 'string') return chunk;
  if (chunk === null || typeof chunk !== 'object') return '';
  const content = (chunk as { content?: unknown }).content;
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((part: unknown) => (typeof part === 'string' ? part : (part as { type?: unknown; text?: unknown })?.type === 'text' ? String((part as { text: unknown }).text) : '')).join('');
}

/**
 * A message (chunk): live, or as its JSON (a durable run's log keeps chunks so) — a message type, a content
 * and `additional_kwargs`, which every message's JSON has. Not any object with a `content` key: an
 * object-valued chain's `{content, title}` is data, given whole.
 */
function isMessage(value: unknown): value is { content: unknown } {
  if (value instanceof BaseMessage) return true;
  if (value === null || typeof value !== 'object') return false;
  const { type, content, additional_kwargs: kwargs } = value as Record<string, unknown>;
  return typeof type === 'string' && MESSAGE_TYPES.has(type) && (typeof content === 'string' || Array.isArray(content)) && kwargs !== null && typeof kwargs === 'object';
}

/** A run event as `streamEvents` yields it (live) or its log holds it (JSON). */
interface RunEvent {
  event: string;
  name?: string;
  run_id?: string;
  parent_ids?: string[];
  data?: { chunk?: unknown; input?: unknown; output?: unknown; error?: unknown };
}

/** A tool's output as a client shows it: a tool message's content, else the value itself. */
function toolOutput(output: unknown): unknown {
  if (isMessage(output)) return output.content;
  return output ?? null;
}

/** A tool message (live, or as its JSON in a run's log) that says the tool failed. */
function isFailedToolMessage(output: unknown): output is { content: unknown; status: 'error' } {
  return isMessage(output) && (output as { status?: unknown }).status === 'error';
}

const frame = (part: Record<string, unknown>): string => `data: ${JSON.stringify(part)}\n\n`;

/** The finish reason a message (live, or its JSON in a run's log) carries in `response_metadata`, if any. */
function finishReasonOf(message: unknown): string | undefined {
  if (message === null || typeof message !== 'object') return undefined;
  const reason = (message as { response_metadata?: { finish_reason?: unknown } }).response_metadata?.finish_reason;
  return typeof reason === 'string' && reason !== '' ? reason : undefined;
}

/**
 * The AI SDK's finish reason for a provider's: `length` for a token limit, `content-filter` for a filter or a
 * refusal, `tool-calls` for an answer that ended asking for tools, else `stop`.
 *
 * @example
 * uiFinishReason('max_tokens') // 'length'
 */
export function uiFinishReason(reason: string | undefined): 'stop' | 'length' | 'content-filter' | 'tool-calls' {
  const kind = finishKind(reason);
  if (kind === 'content_filter') return 'content-filter';
  if (kind === 'tool_calls') return 'tool-calls';
  return kind === 'length' ? 'length' : 'stop';
}

/**
 * Encodes one assistant message as UI message stream parts, from a run's
 * output chunks ({@link chunk}) or its events ({@link event}).
 *
 * @example
 * const ui = new UiMessageEncoder(runId);
 * res.write(ui.start());
 * for await (const chunk of chain.stream(input)) res.write(ui.chunk(chunk));
 * res.write(ui.finish());
 */
export class UiMessageEncoder {
  private stepOpen = false;
  private textId: string | undefined;
  private texts = 0;
  /** Tool run id → the tool call id the client knows it by. */
  private readonly toolCalls = new Map<string, string>();
  private ended = false;
  /** The finish reason of the last model answer seen: a streamed message's, or a chat model run's end. */
  private reason: string | undefined;
  /** An output that is neither text nor a message, gathered from its chunks. */
  private value: unknown;

  constructor(private readonly messageId: string) {}

  /** The message's first part. */
  start(): string {
    return frame({ type: 'start', messageId: this.messageId });
  }

  /**
   * Text from one output chunk. An output that is neither text nor a message (an object-valued chain's) is
   * gathered and given as its JSON text at the end, once whole, as `/v1/chat/completions` gives it.
   */
  chunk(chunk: unknown): string {
    if (chunk === undefined || chunk === null) return '';
    if (typeof chunk !== 'string' && !isMessage(chunk)) {
      this.value = this.value === undefined ? chunk : concat(this.value, chunk);
      return '';
    }
    if (typeof chunk === 'object') this.reason = finishReasonOf(chunk) ?? this.reason;
    const text = chunkText(chunk);
    if (text === '') return '';
    let out = this.openStep();
    if (this.textId === undefined) {
      this.textId = `text-${++this.texts}`;
      out += frame({ type: 'text-start', id: this.textId });
    }
    // The hot path: the same frame `frame({type: 'text-delta', id, delta})` gives, without an object a chunk.
    return `${out}data: {"type":"text-delta","id":"${this.textId}","delta":${JSON.stringify(text)}}\n\n`;
  }

  /**
   * One run event: each chat model call is a step, each tool run a tool
   * call with its input and output, and the root run's output chunks the text.
   */
  event(event: RunEvent): string {
    switch (event.event) {
      case 'on_chat_model_start':
        return this.closeStep() + this.openStep();
      case 'on_chat_model_end':
        this.reason = finishReasonOf(event.data?.output) ?? this.reason;
        return '';
      case 'on_chain_stream':
        return (event.parent_ids ?? []).length === 0 ? this.chunk(event.data?.chunk) : '';
      case 'on_tool_start': {
        const input = event.data?.input as { id?: unknown; args?: unknown } | undefined;
        const toolCallId = typeof input?.id === 'string' && input.id !== '' ? input.id : (event.run_id ?? `tool-${this.toolCalls.size + 1}`);
        this.toolCalls.set(event.run_id ?? toolCallId, toolCallId);
        const toolName = event.name ?? 'tool';
        return (
          this.closeText() +
          this.openStep() +
          frame({ type: 'tool-input-start', toolCallId, toolName }) +
          frame({ type: 'tool-input-available', toolCallId, toolName, input: input !== undefined && 'args' in input ? input.args : (input ?? {}) })
        );
      }
      case 'on_tool_end': {
        const toolCallId = this.toolCalls.get(event.run_id ?? '');
        if (toolCallId === undefined) return '';
        const output = event.data?.output;
        // A tool called by a model answers its failure as a tool message with status `error` (for the model to
        // try again): the client shows it failed, as it would a thrown error.
        if (isFailedToolMessage(output)) return frame({ type: 'tool-output-error', toolCallId, errorText: typeof output.content === 'string' ? output.content : JSON.stringify(output.content) });
        return frame({ type: 'tool-output-available', toolCallId, output: toolOutput(output) });
      }
      case 'on_tool_error': {
        const toolCallId = this.toolCalls.get(event.run_id ?? '');
        if (toolCallId === undefined) return '';
        const error = event.data?.error;
        return frame({ type: 'tool-output-error', toolCallId, errorText: typeof error === 'string' ? error : ((error as { message?: string } | undefined)?.message ?? 'The tool failed') });
      }
      default:
        return '';
    }
  }

  /**
   * The message's end: what is open closes, then `finish` and `[DONE]`. The finish reason is the provider's
   * for the last model answer (`finishReason`, else the one its chunks or events carried): `length` tells
   * the client the answer was cut by a token limit.
   */
  finish(finishReason?: string): string {
    if (this.ended) return '';
    const value = this.value === undefined ? '' : this.chunk(JSON.stringify(this.value));
    this.ended = true;
    return `${value}${this.closeStep()}${frame({ type: 'finish', finishReason: uiFinishReason(finishReason ?? this.reason) })}data: [DONE]\n\n`;
  }

  /** The run failed (`errorText`: its code and message), or was cancelled (an `abort` part). */
  fail(error: { code: string; message: string }): string {
    if (this.ended) return '';
    this.ended = true;
    if (error.code === 'RUNNEL_ERR_RUN_CANCELLED') return `${this.closeStep()}${frame({ type: 'abort', reason: error.message })}data: [DONE]\n\n`;
    return `${this.closeText()}${frame({ type: 'error', errorText: `${error.code}: ${error.message}` })}data: [DONE]\n\n`;
  }

  private openStep(): string {
    if (this.stepOpen) return '';
    this.stepOpen = true;
    return frame({ type: 'start-step' });
  }

  private closeText(): string {
    if (this.textId === undefined) return '';
    const id = this.textId;
    this.textId = undefined;
    return frame({ type: 'text-end', id });
  }

  private closeStep(): string {
    if (!this.stepOpen) return '';
    this.stepOpen = false;
    return `${this.closeText()}${frame({ type: 'finish-step' })}`;
  }
}

/** Where a part of the body is wrong, as `detail` says it. */
function invalid(message: string, loc: (string | number)[]): RunnelError {
  return new RunnelError('RUNNEL_ERR_BODY_INVALID', message, { detail: [{ type: 'value_error', loc, msg: message }] });
}

const MAX_TURNS = 1_000;

/**
 * The conversation in a `DefaultChatTransport` body — `{id, messages: UIMessage[], trigger, messageId}` —
 * with each message's text parts joined (other parts — tool parts, reasoning, sources — carry no text for the
 * chain); a file part in the new message is refused, since the chain would never see it.
 */
export function conversationFromUiMessages(body: Record<string, unknown>): Conversation & { id: string } {
  const { id, messages } = body;
  if (typeof id !== 'string' || id === '' || id.length > 200) throw invalid('id must be the chat id (a string of 1 to 200 characters)', ['id']);
  if (!Array.isArray(messages) || messages.length === 0) throw invalid('messages must be a non-empty list of UI messages', ['messages']);
  if (messages.length > MAX_TURNS) throw invalid(`At most ${MAX_TURNS} messages`, ['messages']);
  const turns = messages.map((message: unknown, i): ChatTurn => {
    const { role, parts } = (message ?? {}) as { role?: unknown; parts?: unknown };
    if (role !== 'user' && role !== 'assistant' && role !== 'system') throw invalid("role must be 'user', 'assistant' or 'system'", ['messages', i, 'role']);
    if (!Array.isArray(parts)) throw invalid('parts must be a list', ['messages', i, 'parts']);
    let text = '';
    parts.forEach((part: unknown, j) => {
      const type = (part as { type?: unknown } | null)?.type;
      if (type === 'text') {
        const value = (part as { text?: unknown }).text;
        if (typeof value !== 'string') throw invalid('A text part needs its text', ['messages', i, 'parts', j, 'text']);
        text += value;
      } else if (type === 'file' && role !== 'assistant' && i === messages.length - 1) {
        // An attachment the user means the model to see now: refused, as /v1/chat/completions refuses an image,
        // rather than dropped while the answer reads as if the model had seen it. One in an earlier message
        // (refused then: the AI SDK keeps it in the chat it sends back) is left out, or every later turn would
        // be refused too.
        throw invalid(`Only text parts are supported: messages[${i}].parts[${j}] is a file. Send its contents as text, or use a chain that takes files.`, ['messages', i, 'parts', j, 'type']);
      }
    });
    return { role, text };
  });
  const { trigger } = body;
  if (trigger !== undefined && trigger !== 'submit-message' && trigger !== 'regenerate-message') throw invalid("trigger must be 'submit-message' or 'regenerate-message'", ['trigger']);
  if (trigger === 'regenerate-message') return { id, turns, trigger: 'regenerate' };
  // A submit that names a message replaces that message of the user's (an edit): the AI SDK names none otherwise.
  const { messageId } = body;
  if (messageId !== undefined && messageId !== null && (typeof messageId !== 'string' || messageId.length > 200)) throw invalid('messageId must be the id of a message (a string of at most 200 characters)', ['messageId']);
  if (typeof messageId !== 'string' || messageId === '') return { id, turns, trigger: 'submit' };
  // The AI SDK also names the last message when the chat goes on from the assistant's answer (`sendMessage()`
  // with no message, or a tool's output the client added): no edit, and nothing a chain here can do.
  const last = messages.at(-1) as { id?: unknown };
  if (last.id === messageId && turns.at(-1)?.role === 'assistant') {
    throw invalid(
      "messageId names the assistant's answer, the last message: going on from an answer (sendMessage() without a message, or a tool output added by the client) is not supported; send the user's next message",
      ['messageId'],
    );
  }
  // An edit sends the chat up to the message it replaces, that message last (the AI SDK cuts the rest).
  // One naming another message, or none sent, is no edit the SDK makes: read as one, it ran as an edit of
  // the last message.
  if (last.id !== messageId) {
    throw invalid('messageId names no message the chat ends with: an edit (sendMessage() with a messageId) sends the edited message last, with that id', ['messageId']);
  }
  return { id, turns, trigger: 'edit' };
}
