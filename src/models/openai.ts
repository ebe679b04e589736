/**
 * `ChatOpenAI`: chat completions through the `openai` SDK, streamed, with
 * tool-call deltas and usage. Works with any OpenAI-compatible server given a
 * `baseURL` (Ollama, vLLM, llama.cpp).
 */
import type OpenAI from 'openai';
import type { ChatCompletionChunk, ChatCompletionCreateParamsStreaming, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { type AIMessage, AIMessageChunk, type ChatMessage, type ContentBlock, type ToolMessage, type BaseMessage, type MessageContent, type UsageMetadata } from '../messages/index.js';
import { answeredCalls, questionStart } from './conversation.js';
import { ChatModel, type ChatModelOptions } from './chat-model.js';
import { openAIClient } from './clients.js';
import { grownBy, tokenCount } from './running-totals.js';
import { accountFile, unsendableBlock } from './errors.js';
import { imageURL } from './image-url.js';
import { inlineFile } from './inline-file.js';
import type { ChatProvider, ChatRequest, ToolChoice } from './types.js';

/** Options of {@link ChatOpenAI}. */
export interface ChatOpenAIOptions extends ChatModelOptions {
  /** Defaults to `OPENAI_API_KEY`. Never logged, never sent anywhere but `baseURL`. */
  apiKey?: string;
  /** Defaults to `OPENAI_BASE_URL`, else OpenAI. */
  baseURL?: string;
  /** Ask OpenAI-compatible servers for token usage at the end of the stream (default true). */
  streamUsage?: boolean;
  /**
   * Send `maxTokens` as `max_completion_tokens`, not `max_tokens`. By default, only for OpenAI's reasoning models
   * (a model named `o1`…`o9` or `gpt-5…`, or fine-tuned from one: `ft:o4-mini…`), which refuse `max_tokens`;
   * set it for a deployment whose name does not say so (Azure's), or `false` for a compatible server that knows
   * only `max_tokens`.
   */
  maxCompletionTokens?: boolean;
}

/**
 * OpenAI's reasoning models by name (o1, o3-mini, o4-mini, gpt-5, gpt-5-mini…), fine-tuned ones too
 * (`ft:o4-mini-2025-04-16:org::id`): they take `max_completion_tokens` only.
 */
const REASONING_MODEL = /^(ft:)?(o\d|gpt-5)/;

type ContentPart = OpenAI.Chat.Completions.ChatCompletionContentPart;

const SENDS = 'text, images, files given with their data, and input_audio parts';

/**
 * A user message's content block as a chat-completions part: text; an image in any form {@link imageURL}
 * reads; a file with its data, as OpenAI's own `file` part (`file_data`) or LangChain's standard block; OpenAI's
 * `input_audio`. Each is rebuilt from the fields it needs, nothing else of the block sent. In the question
 * (`asked`: a user message after the conversation's last answer), a file stored in the provider account is
 * refused, and so is any block it cannot send (left out, the model would answer as if it had seen it); in
 * history, they are left out (a chat that kept one would otherwise fail every later turn).
 */
function openAIPart(block: ContentBlock, asked: boolean): ContentPart[] {
  if (block.type === 'text' && typeof block.text === 'string') return [{ type: 'text', text: block.text }];
  const image = imageURL(block);
  if (image !== undefined) return [{ type: 'image_url', image_url: image }];
  const fields = block as Record<string, unknown>;
  const own = fields.file as { file_data?: unknown; file_id?: unknown; filename?: unknown } | null | undefined;
  const audio = fields.input_audio as { data?: unknown; format?: unknown } | null | undefined;
  const file = own === undefined ? inlineFile(block) : undefined;
  if ((own !== null && typeof own === 'object' && own.file_id !== undefined) || (file !== undefined && 'id' in file)) {
    if (!asked) return [];
    throw accountFile('ChatOpenAI', '`file_data`');
  }
  if (block.type === 'file' && typeof own?.file_data === 'string' && own.file_data !== '') {
    return [{ type: 'file', file: { file_data: own.file_data, ...(typeof own.filename === 'string' ? { filename: own.filename } : {}) } }];
  }
  if (block.type === 'file' && file !== undefined && 'data' in file) {
    return [{ type: 'file', file: { file_data: `data:${file.mimeType};base64,${file.data}`, filename: file.filename ?? 'file' } }];
  }
  if (block.type === 'input_audio' && typeof audio?.data === 'string' && (audio.format === 'wav' || audio.format === 'mp3')) {
    return [{ type: 'input_audio', input_audio: { data: audio.data, format: audio.format } }];
  }
  if (!asked) return [];
  throw unsendableBlock('ChatOpenAI', block.type, SENDS);
}

/** A user message's content as chat-completions content: see {@link openAIPart}. */
function openAIContent(content: MessageContent, asked: boolean): string | ContentPart[] {
  return typeof content === 'string' ? content : content.flatMap((block) => openAIPart(block, asked));
}

/**
 * Converts messages to chat-completions messages. A user message of history whose every part was left out
 * (a file this adapter cannot send, kept from another provider's turn) is left out: the API takes no empty
 * content list, and an assistant message with neither text nor a call answered goes the same way.
 */
export function toOpenAIMessages(messages: readonly BaseMessage[]): ChatCompletionMessageParam[] {
  const question = questionStart(messages);
  return messages.flatMap((message, at): ChatCompletionMessageParam | [] => {
    switch (message.type) {
      case 'system':
        return { role: 'system', content: message.text };
      case 'human': {
        const content = openAIContent(message.content, at >= question);
        if (content.length === 0 && typeof message.content !== 'string') return [];
        return { role: 'user', content, ...(message.name === undefined ? {} : { name: message.name }) };
      }
      case 'tool':
        return { role: 'tool', content: message.text, tool_call_id: (message as ToolMessage).tool_call_id };
      case 'chat': {
        // A role the API knows goes as that role; any other, as the user's words prefixed with it.
        const { role } = message as ChatMessage;
        if (role === 'user') {
          const content = openAIContent(message.content, at >= question);
          return content.length === 0 && typeof message.content !== 'string' ? [] : { role, content };
        }
        if (role === 'assistant' || role === 'system' || role === 'developer') return { role, content: message.text };
        return { role: 'user', content: `${role}: ${message.text}` };
      }
      default: {
        const ai = message as AIMessage;
        // Only the calls a result answers: OpenAI refuses the others (see answeredCalls).
        const calls = answeredCalls(messages, at);
        if (ai.text === '' && calls.length === 0 && ai.tool_calls.length > 0) return [];
        return {
          role: 'assistant',
          content: ai.text === '' && calls.length > 0 ? null : ai.text,
          ...(calls.length === 0
            ? {}
            : {
                tool_calls: calls.map((call, index) => ({
                  id: call.id ?? `call_${index}`,
                  type: 'function' as const,
                  function: { name: call.name, arguments: JSON.stringify(call.args) },
                })),
              }),
        };
      }
    }
  });
}

function openAIToolChoice(choice: ToolChoice | undefined): ChatCompletionCreateParamsStreaming['tool_choice'] {
  if (choice === undefined) return undefined;
  if (choice === 'auto' || choice === 'none' || choice === 'required') return choice as 'auto' | 'none' | 'required';
  if (choice === 'any') return 'required';
  return { type: 'function', function: { name: choice } };
}

/** The tokens one streamed answer reported so far (a stream's usage is the answer's running total, not a delta). */
export interface OpenAIStreamState {
  input: number;
  output: number;
  /** Of the input, read from the prompt cache (`prompt_tokens_details.cached_tokens`). */
  cached?: number;
  /** Of the output, spent reasoning (`completion_tokens_details.reasoning_tokens`). */
  reasoning?: number;
}

/**
 * What a chunk's `usage` adds to what the stream reported before. OpenAI sends the answer's usage once, in its
 * last chunk; compatible servers that send it in every chunk (vLLM's continuous usage stats) send running
 * totals, which summed would count the prompt once a chunk. A count that is missing stays as it was.
 */
function usageGrowth(usage: ChatCompletionChunk['usage'], state: OpenAIStreamState): UsageMetadata | undefined {
  if (usage === null || usage === undefined || typeof usage !== 'object') return undefined;
  const input = grownBy(tokenCount(usage.prompt_tokens), state, 'input');
  const output = grownBy(tokenCount(usage.completion_tokens), state, 'output');
  const spent: UsageMetadata = { input_tokens: input, output_tokens: output, total_tokens: input + output };
  const cached = grownBy(tokenCount((usage.prompt_tokens_details as { cached_tokens?: unknown } | null | undefined)?.cached_tokens), state, 'cached');
  if (cached > 0) spent.input_token_details = { cache_read: cached };
  const reasoning = grownBy(tokenCount((usage.completion_tokens_details as { reasoning_tokens?: unknown } | null | undefined)?.reasoning_tokens), state, 'reasoning');
  if (reasoning > 0) spent.output_token_details = { reasoning };
  return spent;
}

/** A tool call's streamed arguments as text: a string as it is, anything else (an object) as its JSON. */
const argumentsText = (args: unknown): string | undefined => (typeof args === 'string' ? args : args === null || args === undefined ? undefined : JSON.stringify(args));

/**
 * Converts one streamed chat-completions chunk. `state` carries the usage reported so far across one stream's
 * chunks (each chunk's `usage_metadata` is what it adds); without it, a chunk's usage is taken whole.
 */
export function fromOpenAIChunk(chunk: ChatCompletionChunk, state: OpenAIStreamState = { input: 0, output: 0 }): AIMessageChunk | undefined {
  // The first choice only: Runnel asks for one, and a server that streams several (n > 1) interleaves them. A
  // compatible server may leave out `choices` (a chunk of usage alone) or a choice's `delta` (one that only finishes).
  const choices = (chunk as { choices?: unknown }).choices;
  const choice = Array.isArray(choices) ? (choices as ChatCompletionChunk['choices']).find((candidate) => (candidate.index ?? 0) === 0) : undefined;
  const usage = usageGrowth(chunk.usage, state);
  if (choice === undefined) return usage === undefined ? undefined : new AIMessageChunk({ content: '', id: chunk.id, usage_metadata: usage });
  const delta: Partial<ChatCompletionChunk.Choice.Delta> = (choice as { delta?: ChatCompletionChunk.Choice.Delta | null }).delta ?? {};
  // A refusal is the model's answer too (streamed instead of content): the caller reads it, as a chat UI shows it.
  // Content as sent otherwise (a compatible server may send parts, not a string).
  const refusal = (delta as { refusal?: unknown }).refusal;
  const content = delta.content ?? '';
  const refuses = typeof refusal === 'string' && refusal !== '';
  return new AIMessageChunk({
    content: refuses && content === '' ? refusal : content,
    // Marked, as LangChain's ChatOpenAI marks it: a refusal is a filter's answer, never cached.
    ...(refuses ? { additional_kwargs: { refusal } } : {}),
    id: chunk.id,
    tool_call_chunks: delta.tool_calls?.map((call) => ({
      index: call.index,
      id: call.id ?? undefined,
      name: call.function?.name ?? undefined,
      // Arguments sent as an object, not their JSON text (a compatible server's), are taken as that JSON.
      args: argumentsText(call.function?.arguments),
    })),
    response_metadata: choice.finish_reason ? { finish_reason: choice.finish_reason, model_name: chunk.model } : {},
    usage_metadata: usage,
  });
}

class OpenAIProvider implements ChatProvider {
  readonly id = 'openai';
  private client: OpenAI | undefined;

  constructor(private readonly options: ChatOpenAIOptions) {}

  /**
   * The API's base URL the client calls: the option, else the SDK's environment variable, else its default —
   * read without making the client (which needs a key: a cache hit needs none).
   */
  get endpoint(): string {
    return this.client?.baseURL ?? this.options.baseURL ?? (process.env.OPENAI_BASE_URL || 'https://api.openai.com/v1');
  }

  private getClient(): OpenAI {
    return (this.client ??= openAIClient(this.options, 'ChatOpenAI'));
  }

  async *stream(request: ChatRequest): AsyncGenerator<AIMessageChunk> {
    const { params } = request;
    const body: ChatCompletionCreateParamsStreaming = {
      model: params.model,
      messages: toOpenAIMessages(request.messages),
      stream: true,
      ...(this.options.streamUsage === false ? {} : { stream_options: { include_usage: true } }),
      ...(params.temperature === undefined ? {} : { temperature: params.temperature }),
      ...(params.maxTokens === undefined
        ? {}
        : (this.options.maxCompletionTokens ?? REASONING_MODEL.test(params.model))
          ? { max_completion_tokens: params.maxTokens }
          : { max_tokens: params.maxTokens }),
      ...(params.stop === undefined ? {} : { stop: params.stop }),
      ...(params.tools === undefined || params.tools.length === 0
        ? {}
        : { tools: params.tools.map((tool) => ({ type: 'function' as const, function: tool })), tool_choice: openAIToolChoice(params.toolChoice) }),
      ...(params.responseFormat === undefined ? {} : { response_format: params.responseFormat as never }),
    };
    const stream = await this.getClient().chat.completions.create(body, { signal: request.signal, ...(request.headers === undefined ? {} : { headers: request.headers }) });
    const reported: OpenAIStreamState = { input: 0, output: 0 };
    for await (const chunk of stream) {
      const message = fromOpenAIChunk(chunk, reported);
      if (message !== undefined) yield message;
    }
  }
}

/**
 * An OpenAI (or OpenAI-compatible) chat model.
 *
 * @example
 * const model = new ChatOpenAI({ model: 'gpt-4o-mini', temperature: 0 });
 * const local = new ChatOpenAI({ model: 'llama3.1', baseURL: 'http://127.0.0.1:11434/v1', apiKey: 'ollama' });
 */
export class ChatOpenAI extends ChatModel {
  constructor(options: ChatOpenAIOptions = {}) {
    super(new OpenAIProvider(options), { ...options, name: 'ChatOpenAI', defaultModel: 'gpt-4o-mini' });
  }
}
