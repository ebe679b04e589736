/**
 * Fake chat models for tests and for running offline: canned answers,
 * streamed token by token, with tool calls if asked. They go through the same
 * `ChatModel` as real providers (events, cache, abort, idle timeout), and
 * record the messages of their last calls — a bounded record, because a
 * fake also serves for months as the offline model of a running server.
 */
import { RunnelError, sleep } from '../core/index.js';
import { AIMessageChunk, type BaseMessage, type ToolCall } from '../messages/index.js';
import { ChatModel, type ChatModelOptions } from './chat-model.js';
import type { ChatProvider, ChatRequest } from './types.js';

/** A canned answer: text, and tool calls to make. */
export interface FakeResponse {
  content?: string;
  tool_calls?: Omit<ToolCall, 'type'>[];
}

/** Splits text into tokens that keep their leading whitespace ("Hello", " world"). */
export function fakeTokens(text: string): string[] {
  return text.match(/\s*\S+|\s+$/g) ?? [text];
}

const countWords = (messages: readonly BaseMessage[]): number =>
  messages.reduce((sum, message) => sum + message.text.split(/\s+/).filter((w) => w !== '').length, 0);

/** How many calls a fake remembers unless told otherwise. */
const RECORD_CALLS = 100;

class FakeProvider implements ChatProvider {
  readonly id = 'fake';
  /** The messages of recent calls, oldest first: the last `recordCalls` and up to as many older ones. */
  private readonly log: BaseMessage[][] = [];
  private next = 0;
  private readonly recordCalls: number;

  constructor(
    private readonly responses: readonly FakeResponse[] | ((request: ChatRequest) => FakeResponse),
    private readonly sleepMs: number,
    recordCalls = RECORD_CALLS,
  ) {
    if (!(recordCalls >= 0)) throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `recordCalls must be 0 or more, got ${recordCalls}`);
    this.recordCalls = recordCalls;
  }

  /** The messages of the last `recordCalls` calls, oldest first: a copy, as of this read. */
  get calls(): BaseMessage[][] {
    return this.recordCalls === 0 ? [] : this.log.slice(-this.recordCalls);
  }

  private record(messages: BaseMessage[]): void {
    if (this.recordCalls === 0) return;
    this.log.push(messages);
    // Trimmed in one step once twice as long: a shift per call moves the whole record every time.
    if (this.log.length >= 2 * this.recordCalls) this.log.splice(0, this.log.length - this.recordCalls);
  }

  private respond(request: ChatRequest): FakeResponse {
    const turn = this.next++;
    if (typeof this.responses === 'function') return this.responses(request);
    return this.responses[turn % this.responses.length] ?? {};
  }

  async generate(request: ChatRequest): Promise<AIMessageChunk> {
    if (this.sleepMs > 0) {
      // Paced like the stream, so a slow fake is slow either way.
      const chunks: AIMessageChunk[] = [];
      for await (const chunk of this.stream(request)) chunks.push(chunk);
      return AIMessageChunk.merge(chunks);
    }
    request.signal.throwIfAborted();
    this.record(request.messages);
    const response = this.respond(request);
    const calls = response.tool_calls ?? [];
    const tokens = response.content === undefined || response.content === '' ? 0 : fakeTokens(response.content).length;
    const input = countWords(request.messages);
    const output = Math.max(1, tokens + 2 * calls.length);
    return new AIMessageChunk({
      content: response.content ?? '',
      id: `fake-${this.next}`,
      tool_calls: calls.map((call, index) => ({ name: call.name, args: call.args, id: call.id ?? `call_${this.next}_${index}` })),
      response_metadata: { model_name: request.params.model, finish_reason: calls.length > 0 ? 'tool_calls' : 'stop' },
      usage_metadata: { input_tokens: input, output_tokens: output, total_tokens: input + output },
    });
  }

  /**
   * The answer's chunks, each made when it is asked for, like a real stream: the first token does not wait
   * for the last. The call is recorded when the first chunk is asked for.
   */
  private *answer(request: ChatRequest): Generator<AIMessageChunk, void, undefined> {
    this.record(request.messages);
    const response = this.respond(request);
    // Checked before each chunk: on the core's token when the request carries one (no AbortSignal made).
    const cancellation = request.cancellation ?? request.signal;
    const id = `fake-${this.next}`;
    let produced = 0;
    if (response.content !== undefined && response.content !== '') {
      for (const token of fakeTokens(response.content)) {
        produced++;
        cancellation.throwIfAborted();
        yield new AIMessageChunk({ content: token, id });
      }
    }
    for (const [index, call] of (response.tool_calls ?? []).entries()) {
      const args = JSON.stringify(call.args);
      const half = Math.ceil(args.length / 2);
      const callId = call.id ?? `call_${this.next}_${index}`;
      produced += 2;
      cancellation.throwIfAborted();
      yield new AIMessageChunk({ content: '', id, tool_call_chunks: [{ index, id: callId, name: call.name, args: args.slice(0, half) }] });
      cancellation.throwIfAborted();
      yield new AIMessageChunk({ content: '', id, tool_call_chunks: [{ index, args: args.slice(half) }] });
    }
    const input = countWords(request.messages);
    const output = Math.max(1, produced);
    cancellation.throwIfAborted();
    yield new AIMessageChunk({
      content: '',
      id,
      response_metadata: { model_name: request.params.model, finish_reason: response.tool_calls?.length ? 'tool_calls' : 'stop' },
      usage_metadata: { input_tokens: input, output_tokens: output, total_tokens: input + output },
    });
  }

  /**
   * Paced by `sleepMs` before each chunk; without it, each chunk at once: a hand-written iterator with no
   * await (an async generator's hops are most of what a token costs here), answering as a generator does
   * (`return()`, `throw()`, `await using`).
   */
  stream(request: ChatRequest): AsyncIterableIterator<AIMessageChunk> & AsyncDisposable {
    if (this.sleepMs > 0) return this.paced(request);
    const chunks = this.answer(request);
    let done = false;
    const end = (value?: unknown): Promise<IteratorResult<AIMessageChunk>> => {
      if (!done) {
        done = true;
        chunks.return();
      }
      return Promise.resolve({ done: true, value: value as undefined });
    };
    return {
      [Symbol.asyncIterator]() {
        return this;
      },
      next: () => {
        if (done) return Promise.resolve({ done: true, value: undefined });
        try {
          const next = chunks.next();
          if (next.done === true) done = true;
          return Promise.resolve(next);
        } catch (error) {
          done = true;
          return Promise.reject(error);
        }
      },
      return: end,
      throw: (error: unknown) => end().then(() => Promise.reject(error as Error)),
      [Symbol.asyncDispose]: () => end().then(() => undefined),
    };
  }

  private async *paced(request: ChatRequest): AsyncGenerator<AIMessageChunk> {
    for (const chunk of this.answer(request)) {
      await sleep(this.sleepMs, request.cancellation ?? request.signal);
      yield chunk;
    }
  }
}

/** Options of {@link FakeListChatModel}. */
export interface FakeListChatModelOptions extends ChatModelOptions {
  /** Answers given in turn, starting over after the last. */
  responses: string[];
  /** Milliseconds before each token. */
  sleepMs?: number;
  /** How many of the last calls `calls` keeps (default 100; 0 keeps none). */
  recordCalls?: number;
}

/**
 * A chat model that answers with `responses` in turn, token by token.
 *
 * @example
 * const model = new FakeListChatModel({ responses: ['Why did the cat sit on the computer?'], sleepMs: 10 });
 */
export class FakeListChatModel extends ChatModel {
  constructor(options: FakeListChatModelOptions) {
    super(new FakeProvider(options.responses.map((content) => ({ content })), options.sleepMs ?? 0, options.recordCalls), {
      ...options,
      name: 'FakeListChatModel',
      defaultModel: 'fake-list',
    });
  }

  /** The messages of the last calls (`recordCalls`, default 100), oldest first: a copy, as of this read. */
  get calls(): readonly BaseMessage[][] {
    return (this.provider as FakeProvider).calls;
  }
}

/** Options of {@link FakeToolCallingModel}. */
export interface FakeToolCallingModelOptions extends ChatModelOptions {
  /** Answers given in turn: text, or tool calls to make. */
  responses: (string | FakeResponse)[];
  sleepMs?: number;
  /** How many of the last calls `calls` keeps (default 100; 0 keeps none). */
  recordCalls?: number;
}

/**
 * A chat model that answers with tool calls (streamed as tool-call chunks)
 * or text, in turn — for testing tools, agents and structured output.
 *
 * @example
 * new FakeToolCallingModel({ responses: [{ tool_calls: [{ name: 'add', args: { a: 1, b: 2 } }] }, 'The sum is 3.'] });
 */
export class FakeToolCallingModel extends ChatModel {
  constructor(options: FakeToolCallingModelOptions) {
    const responses = options.responses.map((r) => (typeof r === 'string' ? { content: r } : r));
    super(new FakeProvider(responses, options.sleepMs ?? 0, options.recordCalls), { ...options, name: 'FakeToolCallingModel', defaultModel: 'fake-tools' });
  }

  /** The messages of the last calls (`recordCalls`, default 100), oldest first: a copy, as of this read. */
  get calls(): readonly BaseMessage[][] {
    return (this.provider as FakeProvider).calls;
  }
}

/** Options of {@link ScriptedChatModel}. */
export interface ScriptedChatModelOptions extends ChatModelOptions {
  /** Computes the answer from the request: its messages, tools and tool choice. */
  respond: (request: ChatRequest) => string | FakeResponse;
  sleepMs?: number;
  /** How many of the last calls `calls` keeps (default 100; 0 keeps none). */
  recordCalls?: number;
}

/**
 * A chat model whose answer is computed from the request — an offline
 * stand-in that still uses what it is given (the conversation, the retrieved
 * context, the tools), streamed token by token like the other fakes.
 *
 * @example
 * new ScriptedChatModel({ respond: ({ messages }) => `You said: ${messages.at(-1)?.text}` });
 */
export class ScriptedChatModel extends ChatModel {
  constructor(options: ScriptedChatModelOptions) {
    const respond = (request: ChatRequest): FakeResponse => {
      const answer = options.respond(request);
      return typeof answer === 'string' ? { content: answer } : answer;
    };
    super(new FakeProvider(respond, options.sleepMs ?? 0, options.recordCalls), { ...options, name: 'ScriptedChatModel', defaultModel: 'offline' });
  }

  /** The messages of the last calls (`recordCalls`, default 100), oldest first: a copy, as of this read. */
  get calls(): readonly BaseMessage[][] {
    return (this.provider as FakeProvider).calls;
  }
}
