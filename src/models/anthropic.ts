/**
 * `ChatAnthropic`: the Messages API through `@anthropic-ai/sdk`, streamed:
 * the system prompt split out, `tool_use` blocks, `input_json_delta`
 * streaming of tool arguments, usage.
 */
import type Anthropic from '@anthropic-ai/sdk';
import { RunnelError } from '../core/index.js';
import type { MessageCreateParamsStreaming, MessageParam, RawMessageStreamEvent } from '@anthropic-ai/sdk/resources/messages';
import { type AIMessage, AIMessageChunk, type ChatMessage, type ContentBlock, type ToolMessage, type BaseMessage, type MessageContent, type UsageMetadata } from '../messages/index.js';
import { answeredCalls, questionStart } from './conversation.js';
import { ChatModel, type ChatModelOptions } from './chat-model.js';
import { anthropicClient, withSdkWarnings } from './clients.js';
import { accountFile, sendsNothing, unsendableBlock } from './errors.js';
import { imageURL } from './image-url.js';
import { inlineFile } from './inline-file.js';
import { grownBy, tokenCount } from './running-totals.js';
import type { ChatProvider, ChatRequest, ToolChoice } from './types.js';

/** Options of {@link ChatAnthropic}. */
export interface ChatAnthropicOptions extends ChatModelOptions {
  /** Defaults to `ANTHROPIC_API_KEY`. Never logged, never sent anywhere but `baseURL`. */
  apiKey?: string;
  baseURL?: string;
}

type Block = Exclude<MessageParam['content'], string>[number];

function imageBlock(url: string): Block {
  const data = /^data:(image\/[a-z+]+);base64,(.*)$/s.exec(url);
  if (data !== null) {
    return { type: 'image', source: { type: 'base64', media_type: data[1] as 'image/png', data: data[2] as string } };
  }
  return { type: 'image', source: { type: 'url', url } };
}

const SENDS = 'text, images, and documents given with their data, text or URL';

/** A document block from its source's fields alone (`base64` and `text` data, or a `url`), or undefined. */
function documentBlock(source: Record<string, unknown>, title: unknown): Block | undefined {
  const named = typeof title === 'string' && title !== '' ? { title } : {};
  const { type, data, media_type: mediaType, url } = source;
  if (type === 'base64' && typeof data === 'string' && mediaType === 'application/pdf') return { type: 'document', source: { type, data, media_type: mediaType }, ...named };
  if (type === 'text' && typeof data === 'string') return { type: 'document', source: { type, data, media_type: 'text/plain' }, ...named };
  if (type === 'url' && typeof url === 'string') return { type: 'document', source: { type, url }, ...named };
  return undefined;
}

/**
 * A user message's content block as Messages API blocks: text (none when empty or only whitespace: the API
 * refuses an empty text block, and one of whitespace alone); an image in any form {@link imageURL} reads; a
 * document — Anthropic's own block, or LangChain's standard `file` block — given with its data, text or URL.
 * Each is rebuilt from the fields it needs, nothing else of the block sent. In the question (`asked`: a user
 * message after the conversation's last answer), a file stored in the provider account is refused, and so is
 * any block it cannot send (left out, the model would answer as if it had seen it); in history, they are left
 * out (a chat that kept one would otherwise fail every later turn).
 */
function userBlocks(block: ContentBlock, asked: boolean): Block[] {
  if (block.type === 'text' && typeof block.text === 'string') return block.text.trim() === '' ? [] : [{ type: 'text', text: block.text }];
  const image = imageURL(block);
  if (image !== undefined) return [imageBlock(image.url)];
  const fields = block as Record<string, unknown>;
  const source = fields.source !== null && typeof fields.source === 'object' ? (fields.source as Record<string, unknown>) : undefined;
  const file = inlineFile(block);
  if (source?.type === 'file' || (file !== undefined && 'id' in file)) {
    if (!asked) return [];
    throw accountFile('ChatAnthropic', 'its data, text or URL');
  }
  const document =
    block.type === 'document' && source !== undefined
      ? documentBlock(source, fields.title)
      : block.type === 'file' && file !== undefined
        ? 'url' in file
          ? documentBlock({ type: 'url', url: file.url }, fields.title)
          : documentBlock(
              // Plain text given as base64 is a text document: the API takes base64 documents of PDF alone.
              file.mimeType === 'text/plain' ? { type: 'text', data: Buffer.from(file.data, 'base64').toString('utf8') } : { type: 'base64', data: file.data, media_type: file.mimeType },
              file.filename ?? fields.title,
            )
        : undefined;
  if (document !== undefined) return [document];
  if (!asked) return [];
  throw unsendableBlock('ChatAnthropic', block.type, SENDS);
}

/**
 * A message's content as blocks: a user's as {@link userBlocks} makes them; an answer's text alone (its
 * thinking, its tool_use, which go as tool calls, and anything else are left out: the API takes images and
 * documents from the user only).
 */
function contentBlocks(content: MessageContent, from: 'user' | 'assistant', asked = false): Block[] {
  if (typeof content === 'string') return content.trim() === '' ? [] : [{ type: 'text', text: content }];
  if (from === 'user') return content.flatMap((block) => userBlocks(block, asked));
  return content.flatMap((block): Block[] => (block.type === 'text' && typeof block.text === 'string' && block.text.trim() !== '' ? [{ type: 'text', text: block.text }] : []));
}

/**
 * Converts messages to the Messages API: the system text apart, consecutive same-role turns merged, a turn with
 * nothing in it left out — the API refuses a request with an empty turn (400, `all messages must have non-empty
 * content`), and a model's empty answer kept in a chat's history (Claude's empty `end_turn`) would fail every
 * later turn of that chat.
 */
export function toAnthropicMessages(messages: readonly BaseMessage[]): { system: string | undefined; messages: MessageParam[] } {
  const system: string[] = [];
  const question = questionStart(messages);
  const out: MessageParam[] = [];
  const push = (role: 'user' | 'assistant', blocks: Block[]): void => {
    if (blocks.length === 0) return;
    const last = out.at(-1);
    if (last !== undefined && last.role === role) (last.content as Block[]).push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (const [at, message] of messages.entries()) {
    switch (message.type) {
      case 'system':
        system.push(message.text);
        break;
      case 'human':
        push('user', contentBlocks(message.content, 'user', at >= question));
        break;
      case 'chat': {
        // A role the API knows goes as that role; any other, as the user's words prefixed with it.
        const { role } = message as ChatMessage;
        if (role === 'system') system.push(message.text);
        else if (role === 'user' || role === 'assistant') push(role, contentBlocks(role === 'user' ? message.content : message.text, role, at >= question));
        else push('user', [{ type: 'text', text: `${role}: ${message.text}` }]);
        break;
      }
      case 'tool': {
        const tool = message as ToolMessage;
        push('user', [{ type: 'tool_result', tool_use_id: tool.tool_call_id, content: tool.text, is_error: tool.status === 'error' }]);
        break;
      }
      default: {
        const ai = message as AIMessage;
        // Only the calls a result answers: the API refuses the others (see answeredCalls).
        push('assistant', [
          ...contentBlocks(ai.content, 'assistant'),
          ...answeredCalls(messages, at).map((call, index): Block => ({ type: 'tool_use', id: call.id ?? `toolu_${index}`, name: call.name, input: call.args })),
        ]);
      }
    }
  }
  return { system: system.length === 0 ? undefined : system.join('\n\n'), messages: out };
}

function anthropicToolChoice(choice: ToolChoice | undefined): MessageCreateParamsStreaming['tool_choice'] {
  if (choice === undefined || choice === 'auto') return choice === undefined ? undefined : { type: 'auto' };
  if (choice === 'any' || choice === 'required') return { type: 'any' };
  if (choice === 'none') return { type: 'none' };
  return { type: 'tool', name: choice };
}

/** What the conversion of one stream remembers between events. */
export interface AnthropicStreamState {
  id?: string;
  model?: string;
  /** `message_delta`'s stop reason, reported as the finish reason once `message_stop` says the message is whole. */
  stopReason?: string | null;
  /** The tokens reported so far: Anthropic's counts are running totals, and each chunk carries what they grew by. */
  input?: number;
  output?: number;
  /** Of the input, read from the prompt cache and written to it. */
  cacheRead?: number;
  cacheCreation?: number;
  /**
   * Tool calls whose `content_block_start` carried their input whole (a compatible server's; Anthropic's own is
   * `{}`, its arguments streamed): their arguments, by block index, until a non-empty `input_json_delta` replaces
   * them, as the SDK's own accumulator reads them; sent when the block stops.
   */
  startInputs?: Map<number, string>;
}

/** A tool call's arguments whose block started with them and has not streamed its own: as one chunk's tool-call chunks. */
function startedArgs(state: AnthropicStreamState, index?: number): { index: number; args: string }[] {
  const pending = state.startInputs;
  if (pending === undefined) return [];
  const out = [...pending].filter(([at]) => index === undefined || at === index).map(([at, args]) => ({ index: at, args }));
  for (const { index: at } of out) pending.delete(at);
  return out;
}

/**
 * The usage a chunk adds, from a usage object of running totals (`message_start`'s, then each
 * `message_delta`'s). Input counts the prompt cache's tokens too (written and read), which Anthropic counts
 * apart from `input_tokens`. Missing counts are kept as they were; undefined without a usage object (the
 * answer's usage is then what the other events say, or none).
 */
function usageGrowth(usage: unknown, state: AnthropicStreamState): UsageMetadata | undefined {
  if (usage === null || typeof usage !== 'object') return undefined;
  const { input_tokens, cache_creation_input_tokens, cache_read_input_tokens, output_tokens } = usage as Record<string, unknown>;
  const parts = [tokenCount(input_tokens), tokenCount(cache_creation_input_tokens), tokenCount(cache_read_input_tokens)];
  const input = grownBy(parts.every((part) => part === undefined) ? undefined : parts.reduce<number>((sum, part) => sum + (part ?? 0), 0), state, 'input');
  const output = grownBy(tokenCount(output_tokens), state, 'output');
  const spent: UsageMetadata = { input_tokens: input, output_tokens: output, total_tokens: input + output };
  const read = grownBy(tokenCount(cache_read_input_tokens), state, 'cacheRead');
  const written = grownBy(tokenCount(cache_creation_input_tokens), state, 'cacheCreation');
  if (read > 0 || written > 0) spent.input_token_details = { ...(read > 0 ? { cache_read: read } : {}), ...(written > 0 ? { cache_creation: written } : {}) };
  return spent;
}

/**
 * Converts one Messages API stream event (`undefined` for events that carry
 * nothing). The finish reason comes with `message_stop`: a stream cut
 * between `message_delta` and `message_stop` is not a whole answer.
 */
export function fromAnthropicEvent(event: RawMessageStreamEvent, state: AnthropicStreamState): AIMessageChunk | undefined {
  switch (event.type) {
    case 'message_start': {
      // Each event's object read as possibly missing: a compatible server's odd event fails no answer.
      const message = event.message as Partial<typeof event.message> | undefined;
      state.id = message?.id;
      state.model = message?.model;
      // Its output count (1, say) is the start of the running total that message_delta reports whole.
      const sent = message?.usage as unknown;
      const usage = sent === null || typeof sent !== 'object' ? undefined : usageGrowth({ ...sent, output_tokens: 0 }, state);
      return new AIMessageChunk({ content: '', id: state.id, ...(usage === undefined ? {} : { usage_metadata: usage }) });
    }
    case 'content_block_start':
      if ((event.content_block as typeof event.content_block | undefined) === undefined) return undefined;
      if (event.content_block.type === 'tool_use') {
        const input: unknown = event.content_block.input;
        if (input !== null && typeof input === 'object' && !Array.isArray(input) && Object.keys(input).length > 0) {
          (state.startInputs ??= new Map()).set(event.index, JSON.stringify(input));
        }
        return new AIMessageChunk({
          content: '',
          id: state.id,
          tool_call_chunks: [{ index: event.index, id: event.content_block.id, name: event.content_block.name, args: '' }],
        });
      }
      if (event.content_block.type === 'text' && event.content_block.text !== '') {
        return new AIMessageChunk({ content: event.content_block.text, id: state.id });
      }
      return undefined;
    case 'content_block_delta':
      if ((event.delta as typeof event.delta | undefined) === undefined) return undefined;
      if (event.delta.type === 'text_delta') return new AIMessageChunk({ content: event.delta.text, id: state.id });
      if (event.delta.type === 'input_json_delta') {
        if (event.delta.partial_json !== '') state.startInputs?.delete(event.index);
        return new AIMessageChunk({ content: '', id: state.id, tool_call_chunks: [{ index: event.index, args: event.delta.partial_json }] });
      }
      return undefined;
    case 'content_block_stop': {
      const calls = startedArgs(state, event.index);
      return calls.length === 0 ? undefined : new AIMessageChunk({ content: '', id: state.id, tool_call_chunks: calls });
    }
    case 'message_delta': {
      state.stopReason = (event.delta as typeof event.delta | undefined)?.stop_reason ?? state.stopReason;
      const usage = usageGrowth(event.usage, state);
      // A block that never said it stopped: its arguments still count.
      const calls = startedArgs(state);
      return new AIMessageChunk({ content: '', id: state.id, ...(calls.length === 0 ? {} : { tool_call_chunks: calls }), ...(usage === undefined ? {} : { usage_metadata: usage }) });
    }
    case 'message_stop':
      // Finished only with message_delta's stop_reason: without one, the stream is taken as broken off (a 502,
      // never cached), as an OpenAI stream that ends without a finish_reason.
      return new AIMessageChunk({ content: '', id: state.id, response_metadata: { ...(state.stopReason ? { finish_reason: state.stopReason } : {}), model_name: state.model } });
    default:
      return undefined;
  }
}

class AnthropicProvider implements ChatProvider {
  readonly id = 'anthropic';
  private client: Anthropic | undefined;

  constructor(private readonly options: ChatAnthropicOptions) {}

  /**
   * The API's base URL the client calls: the option, else the SDK's environment variable, else its default —
   * read without making the client (which needs a key: a cache hit needs none).
   */
  get endpoint(): string {
    return this.client?.baseURL ?? this.options.baseURL ?? (process.env.ANTHROPIC_BASE_URL || 'https://api.anthropic.com');
  }

  private getClient(): Anthropic {
    return (this.client ??= anthropicClient(this.options, 'ChatAnthropic'));
  }

  async *stream(request: ChatRequest): AsyncGenerator<AIMessageChunk> {
    const { params } = request;
    const { system, messages } = toAnthropicMessages(request.messages);
    // The Messages API refuses a request of system text alone (a prompt of system messages): said here, as the
    // prompt's fault, not as the provider's 400.
    if (messages.length === 0) {
      throw sendsNothing(
        new RunnelError('RUNNEL_ERR_INPUT_INVALID', 'ChatAnthropic needs a user or assistant message with some content: the Messages API refuses a request of system text alone; send the text as a human message', {
          detail: [{ type: 'value_error', loc: ['messages'], msg: 'no user or assistant message with content' }],
        }),
      );
    }
    const toolChoice = anthropicToolChoice(params.toolChoice);
    const body: MessageCreateParamsStreaming = {
      model: params.model,
      max_tokens: params.maxTokens ?? 1024,
      messages,
      stream: true,
      ...(system === undefined ? {} : { system }),
      ...(params.temperature === undefined ? {} : { temperature: params.temperature }),
      ...(params.stop === undefined ? {} : { stop_sequences: params.stop }),
      ...(params.tools === undefined || params.tools.length === 0
        ? {}
        : {
            tools: params.tools.map((tool) => ({ name: tool.name, description: tool.description, input_schema: tool.parameters as never })),
            ...(toolChoice === undefined ? {} : { tool_choice: toolChoice }),
          }),
    };
    const client = this.getClient();
    // The SDK warns on the console at every request for a deprecated model: into the logs instead, once.
    const stream = await withSdkWarnings('anthropic', () => client.messages.create(body, { signal: request.signal, ...(request.headers === undefined ? {} : { headers: request.headers }) }));
    const state: AnthropicStreamState = {};
    for await (const event of stream) {
      const chunk = fromAnthropicEvent(event, state);
      if (chunk !== undefined) yield chunk;
      // The message is whole: a server that holds the connection open after it is not waited on (leaving the
      // loop closes the request).
      if (event.type === 'message_stop') return;
    }
  }
}

/**
 * An Anthropic chat model.
 *
 * @example
 * const model = new ChatAnthropic({ model: 'claude-3-5-haiku-latest', maxTokens: 512 });
 */
export class ChatAnthropic extends ChatModel {
  constructor(options: ChatAnthropicOptions = {}) {
    super(new AnthropicProvider(options), { ...options, name: 'ChatAnthropic', defaultModel: 'claude-3-5-haiku-latest' });
  }
}
