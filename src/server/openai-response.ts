/**
 * A chain's answer in OpenAI's chat-completions shape: one `chat.completion`
 * for `invoke`, or `chat.completion.chunk` SSE frames as the chain streams.
 *
 * The answer's text is the output when it is a string, a message's text when
 * it is a message (a chain ending in a chat model), and the output as JSON
 * text otherwise (an object-valued chain; streamed, that JSON comes in one
 * delta at the end, once the object is whole). Tool calls of an AI message
 * are passed on only for chains whose adapter takes the client's tools.
 */
import { randomUUID } from 'node:crypto';
import { concat, type TokenUsage } from '../core/index.js';
import { AIMessage, AIMessageChunk, BaseMessage, continuesToolCall } from '../messages/index.js';
import { finishKind } from '../models/finish.js';

/** What every object of one answer repeats. */
export interface CompletionHead {
  id: string;
  /** Unix seconds. */
  created: number;
  model: string;
}

/** OpenAI's usage block. */
export interface CompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
  completion_tokens_details?: { reasoning_tokens: number };
}

/** A tool call in OpenAI's shape. */
interface CompletionToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/**
 * OpenAI's usage from the tokens the run's model calls reported (zeros when none did), with OpenAI's details of
 * them when a call reported any: the input the prompt cache gave (Anthropic's cache writes are input, said in
 * no field of OpenAI's), the output spent reasoning.
 *
 * @example
 * completionUsage({ input_tokens: 12, output_tokens: 5, total_tokens: 17 }) // { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 }
 */
export function completionUsage(usage: TokenUsage | undefined): CompletionUsage {
  const out: CompletionUsage = { prompt_tokens: usage?.input_tokens ?? 0, completion_tokens: usage?.output_tokens ?? 0, total_tokens: usage?.total_tokens ?? 0 };
  const cached = usage?.input_token_details?.cache_read;
  if (cached !== undefined) out.prompt_tokens_details = { cached_tokens: cached };
  const reasoning = usage?.output_token_details?.reasoning;
  if (reasoning !== undefined) out.completion_tokens_details = { reasoning_tokens: reasoning };
  return out;
}

/** The text an output stands for (see the module comment). */
function textOf(output: unknown): string {
  if (typeof output === 'string') return output;
  if (output instanceof BaseMessage) return output.text;
  if (output === undefined || output === null) return '';
  return JSON.stringify(output);
}

/** The finish reason a message carries (`response_metadata.finish_reason`), if any. */
export function messageFinishReason(output: unknown): string | undefined {
  if (!(output instanceof BaseMessage)) return undefined;
  const reason = (output.response_metadata as { finish_reason?: unknown } | undefined)?.finish_reason;
  return typeof reason === 'string' && reason !== '' ? reason : undefined;
}

/**
 * OpenAI's `finish_reason` for an answer: `length` when the model's answer was cut by a token limit,
 * `content_filter` when a filter stopped it (Anthropic's `refusal`), else `tool_calls` when it passes tool calls
 * on, else `stop`. A cut wins over tool calls, as OpenAI says it: a call cut short streamed its arguments as far
 * as they came (`{"city": "Par`), and `tool_calls` would tell the client to run it.
 *
 * @example
 * openAIFinishReason('max_tokens', true) // 'length'
 */
export function openAIFinishReason(reason: string | undefined, toolCalls: boolean): 'stop' | 'length' | 'tool_calls' | 'content_filter' {
  const kind = finishKind(reason);
  if (kind === 'length' || kind === 'content_filter') return kind;
  return toolCalls ? 'tool_calls' : 'stop';
}

const callId = (id: string | undefined): string => (id === undefined || id === '' ? `call_${randomUUID().replaceAll('-', '')}` : id);

/**
 * The `chat.completion` for a chain's output. `finishReason` is the provider's reason for the run's last model
 * call (a message output's own is used without one).
 *
 * @example
 * chatCompletion({ id: 'chatcmpl-1', created: 1764500000, model: 'joke' }, 'Why did the cat sit?', { tools: false, usage, finishReason: 'stop' })
 */
export function chatCompletion(head: CompletionHead, output: unknown, options: { tools: boolean; usage: CompletionUsage; finishReason?: string | undefined }): Record<string, unknown> {
  const text = textOf(output);
  // Calls whose arguments do not parse too, as the model wrote them (after the others): OpenAI passes on what the
  // model generated for the client to validate, and the streamed answer sends them; dropped, an answer of such
  // calls alone was an empty `stop`.
  const calls: CompletionToolCall[] =
    options.tools && output instanceof AIMessage
      ? [
          ...output.tool_calls.map((call): CompletionToolCall => ({ id: callId(call.id), type: 'function', function: { name: call.name, arguments: JSON.stringify(call.args) } })),
          ...output.invalid_tool_calls.map((call): CompletionToolCall => ({ id: callId(call.id), type: 'function', function: { name: call.name ?? '', arguments: call.args ?? '' } })),
        ]
      : [];
  const message = {
    role: 'assistant',
    content: text === '' && calls.length > 0 ? null : text,
    refusal: null,
    ...(calls.length > 0 ? { tool_calls: calls } : {}),
  };
  return {
    id: head.id,
    object: 'chat.completion',
    created: head.created,
    model: head.model,
    choices: [{ index: 0, message, finish_reason: openAIFinishReason(options.finishReason ?? messageFinishReason(output), calls.length > 0), logprobs: null }],
    usage: options.usage,
    system_fingerprint: null,
  };
}

/** One SSE frame as OpenAI writes them: `data: JSON`, no event name. */
const frame = (data: unknown): string => `data: ${JSON.stringify(data)}\n\n`;

/**
 * The frame of an error after the stream started, which OpenAI's clients raise.
 *
 * @example
 * sse.sendRaw(errorChunk(toOpenAIError(error).body));
 */
export const errorChunk = (body: unknown): string => frame(body);

/**
 * Turns a chain's output stream into `chat.completion.chunk` frames: `start()` before the first output
 * chunk, `next(chunk)` for each, `end(usage, finishReason)` after the last (the finishing chunk, the usage
 * chunk when asked for, and `data: [DONE]`). Each returns the frames' text, `''` when there is nothing to send.
 * Without a finish reason, the one the streamed message's chunks carried is used.
 *
 * @example
 * const chunks = new CompletionChunks(head, { tools: false, includeUsage: true });
 * write(chunks.start());
 * for await (const piece of chain.stream(input)) write(chunks.next(piece));
 * write(chunks.end(usage, 'stop'));
 */
export class CompletionChunks {
  private readonly head: CompletionHead;
  private readonly tools: boolean;
  private readonly includeUsage: boolean;
  /**
   * A streamed tool call's index in the answer, by the model's index of it. OpenAI's are 0, 1, ... in order;
   * a model's may not be (Claude numbers each call by its content block, after the text's: 1, 2).
   */
  private readonly callIndexes = new Map<number, number>();
  /** Tool calls sent so far. */
  private callCount = 0;
  /** The last tool call begun: its id and name. */
  private lastCall: { id?: string | undefined; name?: string | undefined } | undefined;
  /** An object-valued output, added up until the end. */
  private value: unknown;
  /** A content chunk's frame around its JSON text, made once: the hot path writes the text between them. */
  private contentFrame: [string, string] | undefined;
  /** The finish reason a streamed message's chunk carried. */
  private reason: string | undefined;

  constructor(head: CompletionHead, options: { tools: boolean; includeUsage: boolean }) {
    this.head = head;
    this.tools = options.tools;
    this.includeUsage = options.includeUsage;
  }

  private chunkHead(): Record<string, unknown> {
    return { id: this.head.id, object: 'chat.completion.chunk', created: this.head.created, model: this.head.model, system_fingerprint: null };
  }

  private chunk(delta: Record<string, unknown>, finish: string | null = null): string {
    const usage = this.includeUsage ? { usage: null } : {};
    return frame({ ...this.chunkHead(), choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...usage });
  }

  start(): string {
    return this.chunk({ role: 'assistant', content: '' });
  }

  /** One content chunk: the frame `chunk({content})` gives, its constant parts assembled once. */
  private content(text: string): string {
    if (this.contentFrame === undefined) {
      const marker = '\u0000';
      const [before, after] = this.chunk({ content: marker }).split(JSON.stringify(marker));
      this.contentFrame = [before as string, after as string];
    }
    return this.contentFrame[0] + JSON.stringify(text) + this.contentFrame[1];
  }

  next(piece: unknown): string {
    if (typeof piece === 'string') return piece === '' ? '' : this.content(piece);
    if (!(piece instanceof BaseMessage)) {
      this.value = this.value === undefined ? piece : concat(this.value, piece);
      return '';
    }
    this.reason = messageFinishReason(piece) ?? this.reason;
    let out = piece.text === '' ? '' : this.content(piece.text);
    if (this.tools && piece instanceof AIMessage) out += this.toolCalls(piece);
    return out;
  }

  /** A message's tool calls as `delta.tool_calls`: streamed pieces as they come, whole calls (a cached answer's) at once. */
  private toolCalls(message: AIMessage): string {
    if (message instanceof AIMessageChunk && message.tool_call_chunks.length > 0) {
      const deltas = message.tool_call_chunks.map((piece) => {
        // Without an index, a piece goes on the call before it unless it names another (as the chunks' merge reads it).
        const known = piece.index !== undefined ? this.callIndexes.get(piece.index) : continuesToolCall(this.lastCall, piece) ? this.callCount - 1 : undefined;
        if (known !== undefined) return { index: known, function: { arguments: piece.args ?? '' } };
        const index = this.callCount++;
        this.lastCall = piece;
        if (piece.index !== undefined) this.callIndexes.set(piece.index, index);
        return { index, id: callId(piece.id), type: 'function', function: { name: piece.name ?? '', arguments: piece.args ?? '' } };
      });
      return this.chunk({ tool_calls: deltas });
    }
    if (message.tool_calls.length === 0) return '';
    const deltas = message.tool_calls.map((call) => ({ index: this.callCount++, id: callId(call.id), type: 'function', function: { name: call.name, arguments: JSON.stringify(call.args) } }));
    return this.chunk({ tool_calls: deltas });
  }

  end(usage: CompletionUsage, finishReason?: string): string {
    const value = this.value === undefined ? '' : this.chunk({ content: textOf(this.value) });
    const finish = this.chunk({}, openAIFinishReason(finishReason ?? this.reason, this.callCount > 0));
    const usageChunk = this.includeUsage ? frame({ ...this.chunkHead(), choices: [], usage }) : '';
    return `${value}${finish}${usageChunk}data: [DONE]\n\n`;
  }
}
