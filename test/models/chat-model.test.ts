import crypto from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import {
  AIMessage,
  AIMessageChunk,
  CancelToken,
  ChatModel,
  type ChatRequest,
  ChatAnthropic,
  chatModelFromEnv,
  ChatOpenAI,
  FakeListChatModel,
  FakeToolCallingModel,
  HumanMessage,
  InMemoryCache,
  OFFLINE_ANSWER,
  RunnableLambda,
  RunnelError,
  sendsNothing,
  type TokenUsage,
  type StreamEvent,
} from '../../src/index.js';
import { delay, settleWithin, toArray } from '../helpers.js';

describe('FakeListChatModel', () => {
  it('answers in turn, token by token, and records what it was sent', async () => {
    const model = new FakeListChatModel({ responses: ['one two', 'three'] });
    const tokens = (await toArray(model.stream('a'))).map((c) => c.text).filter((t) => t !== '');
    expect(tokens).toEqual(['one', ' two']);
    expect((await model.invoke([new HumanMessage('b')])).text).toBe('three');
    expect((await model.invoke('c')).text).toBe('one two');
    expect(model.calls.map((messages) => messages.map((m) => m.text))).toEqual([['a'], ['b'], ['c']]);
  });

  it('stops promptly when aborted mid-stream', async () => {
    const model = new FakeListChatModel({ responses: ['a b c d e f g h'], sleepMs: 200 });
    const controller = new AbortController();
    const run = toArray(model.stream('x', { signal: controller.signal }));
    setTimeout(() => controller.abort(), 20);
    await expect(settleWithin(run, 1000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
  });

  it('emits on_chat_model_stream events even when invoked inside a lambda', async () => {
    const model = new FakeListChatModel({ responses: ['x y'] });
    const { lambda } = await import('../../src/index.js');
    const events: StreamEvent[] = [];
    for await (const event of lambda(async (q: string) => (await model.invoke(q)).text).streamEvents('q')) events.push(event);
    expect(events.filter((e) => e.event === 'on_chat_model_stream').length).toBeGreaterThanOrEqual(2);
    expect(events.find((e) => e.event === 'on_chat_model_start')?.data.input).toEqual({ messages: [[new HumanMessage('q')]] });
  });

  it('declares its config fields for configurableFields', async () => {
    const model = new FakeListChatModel({ responses: ['x'] }).configurableFields({
      temperature: { id: 'temperature', schema: z.number().min(0).max(2) },
    });
    expect(model.configJsonSchema()).toMatchObject({ properties: { configurable: { properties: { temperature: { type: 'number' } } } } });
  });
});

describe('what a provider is handed', () => {
  /** A provider that sends one chunk, then waits for its request's signal and fails with its reason. */
  const waiting = (seen: { request?: ChatRequest; copy?: ChatRequest }) => ({
    id: 'waiting',
    stream(request: ChatRequest): AsyncIterable<AIMessageChunk> {
      seen.request = request;
      // A provider may copy its request (to add an option): the copy's signal fires as the original's.
      const copy = { ...request };
      seen.copy = copy;
      return (async function* () {
        yield new AIMessageChunk('first');
        await new Promise((resolve) => copy.signal.addEventListener('abort', resolve, { once: true }));
        throw copy.signal.reason;
      })();
    },
  });

  it("closes the provider's request through its signal, a copied request's too, and tells the light token as well", async () => {
    const seen: { request?: ChatRequest; copy?: ChatRequest } = {};
    const model = new ChatModel(waiting(seen), { name: 'Waiting', defaultModel: 'w' });
    const controller = new AbortController();
    const stream = model.stream('x', { signal: controller.signal })[Symbol.asyncIterator]();
    expect((await stream.next()).value?.text).toBe('first');
    const pending = stream.next();
    controller.abort();
    await expect(settleWithin(pending, 1000)).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    expect(seen.copy?.signal.aborted).toBe(true);
    expect(seen.request?.signal).toBe(seen.copy?.signal);
    expect(seen.request?.cancellation?.aborted).toBe(true);
  });

  it('makes a signal already fired for a provider that first reads it after the abort', async () => {
    let request: ChatRequest | undefined;
    const model = new ChatModel(
      {
        id: 'late',
        async *stream(r: ChatRequest) {
          request = r;
          yield new AIMessageChunk('first');
          yield new AIMessageChunk({ content: '', response_metadata: { finish_reason: 'stop' } });
        },
      },
      { name: 'Late', defaultModel: 'l' },
    );
    const controller = new AbortController();
    const stream = model.stream('x', { signal: controller.signal })[Symbol.asyncIterator]();
    await stream.next();
    controller.abort(new Error('gone'));
    await expect(stream.next()).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    expect(request?.cancellation?.aborted).toBe(true);
    expect(request?.signal.aborted).toBe(true);
    expect(request?.signal.reason).toBe(request?.cancellation?.reason);
  });
});

describe("a fake's own stream", () => {
  const request = (cancellation: CancelToken): ChatRequest => ({ messages: [new HumanMessage('x')], params: { model: 'm' }, cancellation, signal: cancellation.signal });

  it('checks its cancellation before each chunk, paced or not, and records the call either way', async () => {
    for (const sleepMs of [0, 5]) {
      const model = new FakeListChatModel({ responses: ['a b c d e', 'two'], sleepMs });
      const token = new CancelToken();
      const stream = model.provider.stream(request(token))[Symbol.asyncIterator]();
      expect((await stream.next()).value?.text).toBe('a');
      token.abort(new Error('gone'));
      await expect(stream.next()).rejects.toThrow('gone');
      expect(await stream.next()).toEqual({ done: true, value: undefined });
      // Fired before the first chunk: the call is recorded and its answer used, as a paced fake always did.
      const early = new CancelToken();
      early.abort(new Error('early'));
      await expect(model.provider.stream(request(early))[Symbol.asyncIterator]().next()).rejects.toThrow('early');
      expect(model.calls).toHaveLength(2);
      expect((await model.invoke('next')).text).toBe('a b c d e');
    }
  });

  it('answers as a generator does: return(), throw() and await using', async () => {
    const model = new FakeListChatModel({ responses: ['a b c'] });
    const token = new CancelToken();
    const stream = model.provider.stream(request(token)) as AsyncGenerator<AIMessageChunk> & AsyncDisposable;
    expect((await stream.next()).value?.text).toBe('a');
    await expect(stream.throw(new Error('stop'))).rejects.toThrow('stop');
    expect(await stream.next()).toEqual({ done: true, value: undefined });
    {
      await using disposed = model.provider.stream(request(token)) as AsyncGenerator<AIMessageChunk> & AsyncDisposable;
      expect((await disposed.next()).value?.text).toBe('a');
    }
    const returned = model.provider.stream(request(token))[Symbol.asyncIterator]();
    expect(await returned.return?.('given back')).toEqual({ done: true, value: 'given back' });
    expect(await returned.next()).toEqual({ done: true, value: undefined });
  });
});

describe('a provider that wraps another', () => {
  /** Wraps the fake's provider, giving it a signal of its own (set on the request, or on a copy of it). */
  type How = 'set' | 'copy' | 'define' | 'sealed';
  const wrapped = (how: How, mine: AbortController) => {
    const inner = new FakeListChatModel({ responses: ['a b c d e f g h'] }).provider;
    return new ChatModel(
      {
        id: 'wrapped',
        stream(request: ChatRequest) {
          const signal = AbortSignal.any([request.signal, mine.signal]);
          if (how === 'copy') return inner.stream({ ...request, signal });
          if (how === 'define') Object.defineProperty(request, 'signal', { value: signal, enumerable: true });
          else {
            if (how === 'sealed') Object.seal(request);
            request.signal = signal;
          }
          return inner.stream(request);
        },
      },
      { name: 'Wrapped', defaultModel: 'w' },
    );
  };

  const ways: Record<How, string> = { set: 'setting it on the request', copy: 'a copy of the request', define: 'defining it anew on the request', sealed: 'setting it on a sealed request' };
  for (const how of Object.keys(ways) as How[]) {
    it(`gives the wrapped provider its own signal by ${ways[how]}, and the fake hears it`, async () => {
      const mine = new AbortController();
      const seen: string[] = [];
      const failure = await (async () => {
        for await (const chunk of wrapped(how, mine).stream('x')) {
          seen.push(chunk.text);
          if (seen.length === 3) mine.abort(new Error('budget spent'));
        }
      })().then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(seen).toEqual(['a', ' b', ' c']);
      expect(failure).toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_UNAVAILABLE' });
    });
  }
});

describe('a provider whose stream breaks the iterator protocol', () => {
  it('fails as a provider error, reported once, and leaves no idle timer behind', async () => {
    const calls: { error?: string }[] = [];
    const model = new ChatModel(
      {
        id: 'plain-object',
        stream: () => ({ [Symbol.asyncIterator]: () => ({ next: () => ({ done: false, value: new AIMessageChunk('x') }) as unknown as Promise<IteratorResult<AIMessageChunk>> }) }),
      },
      { name: 'Broken', defaultModel: 'b', streamIdleTimeoutMs: 40 },
    );
    await expect(toArray(model.stream('x', { onModelCall: (call) => void calls.push(call) }))).rejects.toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_UNAVAILABLE' });
    expect(calls.map((call) => call.error)).toEqual(['RUNNEL_ERR_PROVIDER_UNAVAILABLE']);
    // Several idle periods later, no timer has reported a stall of the call that already failed.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(calls.map((call) => call.error)).toEqual(['RUNNEL_ERR_PROVIDER_UNAVAILABLE']);
  });
});

// Left by the thirty-sixth session: "not a model call" was read from the error code, so a provider's own
// RUNNEL_ERR_INPUT_INVALID after its backend answered went uncounted.
describe('a refusal before anything was sent', () => {
  it('is no model call only when the provider marks it so (sendsNothing); an unmarked one was a call that failed', async () => {
    const refusing = (marked: boolean) =>
      new ChatModel(
        {
          id: 'custom',
          // eslint-disable-next-line require-yield
          async *stream() {
            const error = new RunnelError('RUNNEL_ERR_INPUT_INVALID', 'The backend refused the input');
            throw marked ? sendsNothing(error) : error;
          },
        },
        { name: 'Custom', defaultModel: 'c' },
      );
    for (const marked of [true, false]) {
      const calls: { error?: string }[] = [];
      await expect(refusing(marked).invoke('x', { onModelCall: (call) => void calls.push(call) })).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
      await expect(toArray(refusing(marked).stream('x', { onModelCall: (call) => void calls.push(call) }))).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
      expect(calls.map((call) => call.error), String(marked)).toEqual(marked ? [] : ['RUNNEL_ERR_INPUT_INVALID', 'RUNNEL_ERR_INPUT_INVALID']);
    }
  });
  it('is heard by no one when identical calls shared it (the response cache): the waiting call made none either', async () => {
    const model = new ChatModel(
      {
        id: 'custom',
        // eslint-disable-next-line require-yield
        async *stream() {
          await delay(20);
          throw sendsNothing(new RunnelError('RUNNEL_ERR_INPUT_INVALID', 'The provider cannot send this'));
        },
      },
      { name: 'Custom', defaultModel: 'c', cache: new InMemoryCache() },
    );
    const calls: { error?: string }[] = [];
    const onModelCall = (call: { error?: string }): void => void calls.push(call);
    const both = await Promise.allSettled([model.invoke('x', { onModelCall }), model.invoke('x', { onModelCall })]);
    expect(both.map((outcome) => outcome.status)).toEqual(['rejected', 'rejected']);
    expect(calls).toEqual([]);
  });
});

describe('cache', () => {
  it('replays a cached answer chunk by chunk and never caches an aborted call', async () => {
    const cache = new InMemoryCache();
    const model = new FakeListChatModel({ responses: ['first answer', 'second answer'], cache });
    expect((await model.invoke('q')).text).toBe('first answer');
    expect((await toArray(model.stream('q'))).map((c) => c.text).join('')).toBe('first answer');
    expect(model.calls).toHaveLength(1);
    expect((await model.invoke('q', { stop: ['.'] })).text).toBe('second answer');
    expect(model.calls).toHaveLength(2);

    const slow = new FakeListChatModel({ responses: ['a b c'], sleepMs: 50, cache: new InMemoryCache() });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 60);
    await expect(slow.invoke('z', { signal: controller.signal })).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    expect((slow.cache as InMemoryCache).size).toBe(0);
  });
});

describe('onUsage', () => {
  it('reports the tokens each model call spent, streamed or not; a cache hit spends none', async () => {
    const model = new FakeListChatModel({ responses: ['one two three'], cache: new InMemoryCache() });
    const chain = RunnableLambda.from((topic: string) => `about ${topic}`).pipe(model);
    const reports: [TokenUsage, string][] = [];
    const onUsage = (usage: TokenUsage, { name }: { name: string }) => void reports.push([usage, name]);
    await toArray(chain.stream('cats', { onUsage }));
    expect(reports).toEqual([[{ input_tokens: 2, output_tokens: 3, total_tokens: 5 }, 'FakeListChatModel']]);
    await chain.invoke('dogs', { onUsage });
    expect(reports).toHaveLength(2);
    await chain.invoke('dogs', { onUsage }); // from the cache
    expect(reports).toHaveLength(2);
  });

  it('calls the handlers of enclosing and bound configs, and survives a throwing one', async () => {
    const model = new FakeListChatModel({ responses: ['a b'] });
    const seen: string[] = [];
    const bound = model.withConfig({ onUsage: () => void seen.push('bound') });
    const chain = RunnableLambda.from(async (q: string, config) => {
      return bound.invoke(q, { ...config, onUsage: () => void seen.push('inner') });
    });
    const answer = await chain.invoke('q', {
      onUsage: () => {
        seen.push('outer');
        throw new Error('a failing meter');
      },
    });
    expect(answer.text).toBe('a b');
    expect(seen.sort()).toEqual(['bound', 'inner', 'outer']);
  });

  it('leaves runs unobserved: no run id is minted', async () => {
    const model = new FakeListChatModel({ responses: ['a b'] });
    const spy = vi.spyOn(crypto, 'randomUUID');
    await toArray(model.stream('q', { onUsage: () => undefined }));
    expect(spy).not.toHaveBeenCalled();
    spy.mockRestore();
  });
});

describe('tools and structured output', () => {
  it('bindTools sends tool definitions and the model answers with tool calls', async () => {
    const model = new FakeToolCallingModel({ responses: [{ tool_calls: [{ name: 'add', args: { a: 1, b: 2 }, id: 'c1' }] }] });
    const bound = model.bindTools([{ name: 'add', description: 'Adds', schema: z.object({ a: z.number(), b: z.number() }) }]);
    const answer = await bound.invoke('1+2?');
    expect(answer).toBeInstanceOf(AIMessage);
    expect(answer.tool_calls).toEqual([{ name: 'add', args: { a: 1, b: 2 }, id: 'c1', type: 'tool_call' }]);
  });

  it('withStructuredOutput returns the parsed object, typed in its output schema', async () => {
    const schema = z.object({ name: z.string(), age: z.number() });
    const model = new FakeToolCallingModel({ responses: [{ tool_calls: [{ name: 'extract', args: { name: 'Ada', age: 36 } }] }] });
    const extract = model.withStructuredOutput(schema);
    expect(await extract.invoke('Ada is 36')).toEqual({ name: 'Ada', age: 36 });
    expect(extract.outputJsonSchema()).toMatchObject({ properties: { name: { type: 'string' }, age: { type: 'number' } } });
    const wrong = new FakeToolCallingModel({ responses: [{ tool_calls: [{ name: 'extract', args: { name: 'Ada' } }] }] }).withStructuredOutput(schema);
    await expect(wrong.invoke('x')).rejects.toMatchObject({ code: 'RUNNEL_ERR_OUTPUT_PARSE', detail: { issues: [{ loc: ['age'] }] } });
  });

  // A probe: its parsing step ran as a chain, so `include_types: ["parser"]` missed it.
  it("withStructuredOutput's parsing step is a parser in the run's events", async () => {
    const model = new FakeToolCallingModel({ responses: [{ tool_calls: [{ name: 'extract', args: { name: 'Ada' } }] }] });
    const extract = model.withStructuredOutput(z.object({ name: z.string() }));
    const events: string[] = [];
    for await (const event of extract.streamEvents('Ada')) if (event.name === 'StructuredOutputParser') events.push(event.event);
    expect(events).toEqual(['on_parser_start', 'on_parser_stream', 'on_parser_end']);
  });
});

describe('chatModelFromEnv', () => {
  it('chooses from RUNNEL_MODEL, then the keys, else the offline model, saying so once', async () => {
    const lines: string[] = [];
    const log = (line: string) => void lines.push(line);
    expect(chatModelFromEnv({ env: { RUNNEL_MODEL: 'openai:gpt-4o' }, log })).toBeInstanceOf(ChatOpenAI);
    expect(chatModelFromEnv({ env: { RUNNEL_MODEL: 'anthropic:claude-x' }, log }).model).toBe('claude-x');
    expect(chatModelFromEnv({ env: { OPENAI_API_KEY: 'k' }, log })).toBeInstanceOf(ChatOpenAI);
    expect(chatModelFromEnv({ env: { ANTHROPIC_API_KEY: 'k' }, log })).toBeInstanceOf(ChatAnthropic);
    const offline = chatModelFromEnv({ env: {}, log });
    expect(offline).toBeInstanceOf(FakeListChatModel);
    expect((await offline.invoke('hi')).text).toBe(OFFLINE_ANSWER);
    expect(lines).toHaveLength(5);
    expect(lines.at(-1)).toMatch(/offline fake model/);
    expect(lines.join('\n')).not.toMatch(/\bk\b/);
    expect(() => chatModelFromEnv({ env: { RUNNEL_MODEL: 'cohere:x' } })).toThrow(/RUNNEL_MODEL/);
  });

  it('fails clearly, without calling out, when a provider has no key', async () => {
    const model = new ChatOpenAI({ apiKey: '' });
    const saved = process.env.OPENAI_API_KEY;
    delete process.env.OPENAI_API_KEY;
    try {
      await expect(model.invoke('hi')).rejects.toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_REJECTED', message: expect.stringMatching(/OPENAI_API_KEY/) });
    } finally {
      if (saved !== undefined) process.env.OPENAI_API_KEY = saved;
    }
  });
});

describe('invoke without observers', () => {
  it('gives the same answer whether the provider answers whole or streamed', async () => {
    const responses = [{ content: 'Let me add.', tool_calls: [{ name: 'add', args: { a: 1, b: 2 }, id: 'c1' }] }];
    const whole = await new FakeToolCallingModel({ responses }).invoke('1+2?');
    const events: StreamEvent[] = [];
    const streamed = await new FakeToolCallingModel({ responses }).invoke('1+2?', { callbacks: [(e) => void events.push(e)] });
    expect(events.some((e) => e.event === 'on_chat_model_stream')).toBe(true);
    expect(whole.toJSON()).toEqual(streamed.toJSON());
  });
});
