/**
 * The model's messages: `AIMessage` (a whole answer) and `AIMessageChunk` (a
 * piece of one as it streams). Chunks add up with `concat`: content
 * concatenates, tool-call chunks merge by index and are parsed into tool
 * calls (or invalid tool calls when their arguments are not JSON), usage adds
 * up.
 */
import { BaseMessage } from './base.js';
import { parsePartialJson } from './partial-json.js';
import type { ContentBlock, InvalidToolCall, MessageFields, ToolCall, ToolCallChunk, UsageMetadata } from './types.js';

/** Fields of an {@link AIMessage}. */
export interface AIMessageFields extends MessageFields {
  tool_calls?: ToolCall[] | undefined;
  invalid_tool_calls?: InvalidToolCall[] | undefined;
  usage_metadata?: UsageMetadata | undefined;
}

const withToolCallType = (call: ToolCall): ToolCall => ({ name: call.name, args: call.args, id: call.id, type: 'tool_call' });

/**
 * A model's answer: content, tool calls and token usage.
 * @example new AIMessage({ content: '', tool_calls: [{ name: 'add', args: { a: 1, b: 2 }, id: 'call_1' }] })
 */
export class AIMessage extends BaseMessage {
  readonly type: 'ai' | 'AIMessageChunk' = 'ai';
  readonly tool_calls: ToolCall[];
  readonly invalid_tool_calls: InvalidToolCall[];
  readonly usage_metadata: UsageMetadata | undefined;

  constructor(fields: string | AIMessageFields) {
    super(fields);
    if (typeof fields === 'string') {
      this.tool_calls = [];
      this.invalid_tool_calls = [];
      this.usage_metadata = undefined;
      return;
    }
    const { tool_calls: calls, invalid_tool_calls: invalid } = fields;
    this.tool_calls = calls === undefined || calls.length === 0 ? [] : calls.map(withToolCallType);
    this.invalid_tool_calls = invalid === undefined || invalid.length === 0 ? [] : invalid.map((call) => ({ ...call, type: 'invalid_tool_call' as const }));
    this.usage_metadata = fields.usage_metadata;
  }

  protected override extraJSON(): Record<string, unknown> {
    return {
      tool_calls: this.tool_calls.map((call) => ({ ...call, id: call.id ?? null })),
      invalid_tool_calls: this.invalid_tool_calls,
      usage_metadata: this.usage_metadata ?? null,
    };
  }
}

/** Fields of an {@link AIMessageChunk}. */
export interface AIMessageChunkFields extends AIMessageFields {
  tool_call_chunks?: ToolCallChunk[] | undefined;
}

/** The sum of two usages (either may be missing), their details too. */
export function addUsage(a: UsageMetadata | undefined, b: UsageMetadata | undefined): UsageMetadata | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  const sum: UsageMetadata = {
    input_tokens: a.input_tokens + b.input_tokens,
    output_tokens: a.output_tokens + b.output_tokens,
    total_tokens: a.total_tokens + b.total_tokens,
  };
  const input = addCounts(a.input_token_details, b.input_token_details);
  if (input !== undefined) sum.input_token_details = input;
  const output = addCounts(a.output_token_details, b.output_token_details);
  if (output !== undefined) sum.output_token_details = output;
  return sum;
}

/** The sum of two sets of named counts, key by key (either may be missing). */
function addCounts<T extends Partial<Record<string, number>>>(a: T | undefined, b: T | undefined): T | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  const sum: Partial<Record<string, number>> = { ...a };
  for (const [key, value] of Object.entries(b)) if (value !== undefined) sum[key] = (sum[key] ?? 0) + value;
  return sum as T;
}

/**
 * Whether a tool-call fragment without an index carries on `last` (the call before it): it has no id and no name,
 * or it repeats the call's id (and its name, if it names one), as a server may in every delta. A name alone
 * repeated starts a call: two calls of one tool may follow each other without ids.
 */
export function continuesToolCall(last: { id?: string | undefined; name?: string | undefined } | undefined, fragment: { id?: string | undefined; name?: string | undefined }): boolean {
  if (last === undefined) return false;
  if (fragment.id === undefined) return fragment.name === undefined;
  return fragment.id === last.id && (fragment.name === undefined || fragment.name === last.name);
}

/** Merges tool-call chunks with the same index (names and ids set once, arguments concatenated). */
export function mergeToolCallChunks(a: ToolCallChunk[], b: ToolCallChunk[]): ToolCallChunk[] {
  const merged = a.map((chunk) => ({ ...chunk }));
  for (const chunk of b) {
    // Without an index (a compatible server that leaves it out), a fragment goes on the call before it unless it
    // names another id or name: a call of its own.
    const last = merged.at(-1);
    const same = chunk.index !== undefined ? merged.find((m) => m.index === chunk.index) : continuesToolCall(last, chunk) ? last : undefined;
    if (same === undefined) {
      merged.push({ ...chunk, type: 'tool_call_chunk' });
      continue;
    }
    // A name or id sent again whole (OpenAI-compatible servers that repeat them in every delta) is not added again.
    same.name = chunk.name === undefined || chunk.name === same.name ? same.name : (same.name ?? '') + chunk.name || undefined;
    same.args = (same.args ?? '') + (chunk.args ?? '');
    same.id = chunk.id === undefined || chunk.id === same.id ? same.id : (same.id ?? '') + chunk.id || undefined;
  }
  return merged;
}

/** Whole JSON, or undefined. */
function strictJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * Parses streamed tool-call chunks into tool calls, or invalid tool calls when arguments are not JSON. While
 * the answer streams, arguments are read as far as they go (a preview); once it is `complete` (the provider
 * said why it finished), only whole JSON is a call: arguments cut short (`max_tokens`) are an invalid call,
 * never a call with what was left of them; `cutShort` (the finish reason says so): the last call without
 * arguments is one too.
 */
export function parseToolCallChunks(chunks: ToolCallChunk[], complete = false, cutShort = false): { toolCalls: ToolCall[]; invalid: InvalidToolCall[] } {
  const toolCalls: ToolCall[] = [];
  const invalid: InvalidToolCall[] = [];
  for (const [i, chunk] of chunks.entries()) {
    const raw = chunk.args ?? '';
    // The last call of an answer cut short (`max_tokens`) without arguments yet was cut before them.
    const empty = cutShort && i === chunks.length - 1 ? undefined : {};
    const args = raw.trim() === '' ? empty : complete ? strictJson(raw) : parsePartialJson(raw);
    if (args !== null && typeof args === 'object' && !Array.isArray(args) && chunk.name !== undefined) {
      toolCalls.push({ name: chunk.name, args: args as Record<string, unknown>, id: chunk.id, type: 'tool_call' });
    } else {
      const error = complete && args === undefined ? 'Malformed arguments: not whole JSON (the answer may have been cut short)' : 'Malformed arguments: not a JSON object';
      invalid.push({ name: chunk.name, args: raw, id: chunk.id, error, type: 'invalid_tool_call' });
    }
  }
  return { toolCalls, invalid };
}

/**
 * A piece of a model's answer as it streams. `concat` adds the next piece.
 * @example
 * new AIMessageChunk('Hel').concat(new AIMessageChunk('lo')).content // 'Hello'
 */
export class AIMessageChunk extends AIMessage {
  override readonly type = 'AIMessageChunk';
  readonly tool_call_chunks: ToolCallChunk[];

  constructor(fields: string | AIMessageChunkFields) {
    const chunks = typeof fields === 'string' || fields.tool_call_chunks === undefined || fields.tool_call_chunks.length === 0
      ? undefined
      : fields.tool_call_chunks.map((chunk) => ({ ...chunk, type: 'tool_call_chunk' as const }));
    // Tool calls of a chunk come from its tool-call chunks, so the two never disagree.
    if (chunks === undefined) super(fields);
    else {
      // A finish reason comes with the answer's last chunk: a chunk that carries one holds the whole answer.
      const finish = (fields as AIMessageChunkFields).response_metadata?.finish_reason;
      const parsed = parseToolCallChunks(chunks, finish !== undefined, finish === 'length' || finish === 'max_tokens');
      super({ ...(fields as AIMessageChunkFields), tool_calls: parsed.toolCalls, invalid_tool_calls: parsed.invalid });
    }
    this.tool_call_chunks = chunks ?? [];
  }

  /** This chunk followed by `other`. */
  concat(other: AIMessageChunk): AIMessageChunk {
    return AIMessageChunk.merge([this, other]);
  }

  /** The chunks of a stream added up in one pass (what `concat` does pairwise). */
  static merge(chunks: readonly AIMessageChunk[]): AIMessageChunk {
    if (chunks.length === 1) return chunks[0] as AIMessageChunk;
    let text = '';
    let blocks: ContentBlock[] | undefined;
    let additional: Record<string, unknown> | undefined;
    let response: Record<string, unknown> | undefined;
    let name: string | undefined;
    let id: string | undefined;
    let toolChunks: ToolCallChunk[] = [];
    let toolCalls: ToolCall[] = [];
    let invalid: InvalidToolCall[] = [];
    let usage: UsageMetadata | undefined;
    for (const chunk of chunks) {
      if (typeof chunk.content === 'string' && blocks === undefined) text += chunk.content;
      else {
        blocks ??= text === '' ? [] : [{ type: 'text', text }];
        blocks.push(...(typeof chunk.content === 'string' ? (chunk.content === '' ? [] : [{ type: 'text' as const, text: chunk.content }]) : chunk.content));
      }
      if (Object.keys(chunk.additional_kwargs).length > 0) {
        // A refusal streams in pieces, as content does: joined (LangChain's chunks join it too).
        const refusal = chunk.additional_kwargs.refusal;
        const before = additional?.refusal;
        additional = { ...additional, ...chunk.additional_kwargs };
        if (typeof refusal === 'string' && typeof before === 'string') additional.refusal = before + refusal;
      }
      if (Object.keys(chunk.response_metadata).length > 0) response = { ...response, ...chunk.response_metadata };
      name ??= chunk.name;
      id ??= chunk.id;
      if (chunk.tool_call_chunks.length > 0) toolChunks = mergeToolCallChunks(toolChunks, chunk.tool_call_chunks);
      else if (chunk.tool_calls.length > 0 || chunk.invalid_tool_calls.length > 0) {
        toolCalls = [...toolCalls, ...chunk.tool_calls];
        invalid = [...invalid, ...chunk.invalid_tool_calls];
      }
      usage = addUsage(usage, chunk.usage_metadata);
    }
    return new AIMessageChunk({
      content: blocks ?? text,
      additional_kwargs: additional,
      response_metadata: response,
      name,
      id,
      tool_call_chunks: toolChunks,
      tool_calls: toolChunks.length === 0 ? toolCalls : undefined,
      invalid_tool_calls: toolChunks.length === 0 ? invalid : undefined,
      usage_metadata: usage,
    });
  }

  /** The whole message this chunk amounts to. */
  toMessage(): AIMessage {
    return new AIMessage({
      content: this.content,
      additional_kwargs: this.additional_kwargs,
      response_metadata: this.response_metadata,
      name: this.name,
      id: this.id,
      tool_calls: this.tool_calls,
      invalid_tool_calls: this.invalid_tool_calls,
      usage_metadata: this.usage_metadata,
    });
  }

  protected override extraJSON(): Record<string, unknown> {
    return { ...super.extraJSON(), tool_call_chunks: this.tool_call_chunks };
  }
}
