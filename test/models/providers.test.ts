import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { addUsage, AIMessage, AIMessageChunk, calculatorTool, ChatMessage, lambda, MemoryHistoryStore, MessagesPlaceholder, tool, withMessageHistory, ChatAnthropic, createToolCallingAgent, ChatOpenAI, ChatPromptTemplate, HumanMessage, InMemoryCache, JsonOutputParser, setProviderLogger, StringOutputParser, StructuredOutputParser, SystemMessage, ToolMessage, providerRetryAfter, type ChatModel, type ChatModelOptions, type ModelCall, type UsageMetadata } from '../../src/index.js';
import { deferred, settleWithin, toArray } from '../helpers.js';
import { startProviderServer, type ProviderServer, type ScriptedReply } from '../support/provider-server.js';

const KEY = 'sk-test-canary-4f9d2c';

/** One frame of an OpenAI chat-completions stream: `fields` beside the completion's ids. */
const openaiFrame = (fields: Record<string, unknown>): string =>
  `data: ${JSON.stringify({ id: 'chatcmpl-scripted', object: 'chat.completion.chunk', created: 1764500000, model: 'scripted', ...fields })}\n\n`;
/** A frame of the one choice's `delta` and finish reason. */
const deltaFrame = (delta: Record<string, unknown>, finish: string | null = null): string => openaiFrame({ choices: [{ index: 0, delta, finish_reason: finish }] });

const providers = [
  { name: 'openai' as const, make: (server: ProviderServer, options: ChatModelOptions) => new ChatOpenAI({ apiKey: KEY, baseURL: server.url, ...options }) },
  { name: 'anthropic' as const, make: (server: ProviderServer, options: ChatModelOptions) => new ChatAnthropic({ apiKey: KEY, baseURL: server.url, ...options }) },
];

describe.each(providers)('$name adapter through its real SDK', ({ name, make }) => {
  let server: ProviderServer;
  const model = (options: ChatModelOptions = {}): ChatModel => make(server, { maxRetries: 0, ...options });
  /** The provider's reasons for an answer cut at the token limit, and for a whole one. */
  const CUT = name === 'openai' ? 'length' : 'max_tokens';
  const STOP = name === 'openai' ? 'stop' : 'end_turn';
  /** Runs `body` with the provider answering as `script` says (the body may change it), then from its scenarios again. */
  const scripted = async (script: NonNullable<ProviderServer['script']>, body: () => Promise<void>): Promise<void> => {
    server.script = script;
    try {
      await body();
    } finally {
      server.script = undefined;
    }
  };

  beforeAll(async () => {
    server = await startProviderServer(name);
  });
  afterAll(async () => {
    await server.close();
  });

  it('streams text token by token and reports usage', async () => {
    const chunks = await toArray(model({ model: 'text' }).stream('Tell me a joke'));
    expect(chunks.map((c) => c.text).filter((t) => t !== '')).toEqual(['Why', ' did', ' the', ' cat', ' sit?']);
    const answer = await model({ model: 'text' }).invoke('Tell me a joke');
    expect(answer).toBeInstanceOf(AIMessage);
    expect(answer.text).toBe('Why did the cat sit?');
    expect(answer.usage_metadata).toEqual({ input_tokens: 12, output_tokens: 5, total_tokens: 17 });
    expect(answer.response_metadata.finish_reason).toBe(name === 'openai' ? 'stop' : 'end_turn');
  });

  it('sends the conversation in the provider format, with the API key only in its header', async () => {
    const before = server.requests.length;
    await model({ model: 'text', temperature: 0.2, maxTokens: 50, stop: ['\n\n'] }).invoke([
      new SystemMessage('Be brief.'),
      new HumanMessage('hi'),
      new AIMessage({ content: '', tool_calls: [{ name: 'get_weather', args: { city: 'Paris' }, id: 'call_a' }] }),
      new ToolMessage({ content: 'sunny', tool_call_id: 'call_a' }),
    ]);
    const request = server.requests[before];
    expect(request?.body.stream).toBe(true);
    expect(request?.body.temperature).toBe(0.2);
    if (name === 'openai') {
      expect(request?.path).toBe('/v1/chat/completions');
      expect(request?.headers.authorization).toBe(`Bearer ${KEY}`);
      expect(request?.body.max_tokens).toBe(50);
      expect(request?.body.stop).toEqual(['\n\n']);
      expect(request?.body.messages).toEqual([
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool', content: 'sunny', tool_call_id: 'call_a' },
      ]);
    } else {
      expect(request?.path).toBe('/v1/messages');
      // @anthropic-ai/sdk 1.x sends the key as a bearer token; older versions used x-api-key.
      expect(request?.headers['x-api-key'] === KEY || request?.headers.authorization === `Bearer ${KEY}`).toBe(true);
      expect(JSON.stringify(request?.body)).not.toContain(KEY);
      expect(request?.body.system).toBe('Be brief.');
      expect(request?.body.max_tokens).toBe(50);
      expect(request?.body.stop_sequences).toEqual(['\n\n']);
      expect(request?.body.messages).toEqual([
        { role: 'user', content: [{ type: 'text', text: 'hi' }] },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'call_a', name: 'get_weather', input: { city: 'Paris' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_a', content: 'sunny', is_error: false }] },
      ]);
    }
  });

  // A probe: an image in LangChain's standard content block (`{type: 'image', url}` or base64 `data` with its
  // `mimeType`), or Anthropic's own (`source`), was dropped from the request: the model answered without seeing it.
  it('sends an image given as LangChain\'s standard block or Anthropic\'s own, as it sends an image_url', async () => {
    const before = server.requests.length;
    await model({ model: 'text' }).invoke([
      new HumanMessage({
        content: [
          { type: 'text', text: 'What is in these?' },
          { type: 'image', url: 'https://example.com/cat.jpg' },
          { type: 'image', data: 'iVBORw0KGgo=', mimeType: 'image/png' },
          { type: 'image', source_type: 'base64', data: 'R0lGODlh', mime_type: 'image/gif' },
          { type: 'image', source: { type: 'base64', media_type: 'image/webp', data: 'UklGRg==' } },
        ],
      }),
    ]);
    const content = (server.requests[before]?.body.messages as { content: unknown }[])[0]?.content;
    const images = ['https://example.com/cat.jpg', 'data:image/png;base64,iVBORw0KGgo=', 'data:image/gif;base64,R0lGODlh', 'data:image/webp;base64,UklGRg=='];
    if (name === 'openai') {
      expect(content).toEqual([{ type: 'text', text: 'What is in these?' }, ...images.map((url) => ({ type: 'image_url', image_url: { url } }))]);
    } else {
      expect(content).toEqual([
        { type: 'text', text: 'What is in these?' },
        { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
        { type: 'image', source: { type: 'base64', media_type: 'image/gif', data: 'R0lGODlh' } },
        { type: 'image', source: { type: 'base64', media_type: 'image/webp', data: 'UklGRg==' } },
      ]);
    }
  });

  // A probe: a user's file, sound or document block was dropped from the request as well, and the model answered
  // as if it had read it. The provider's own blocks go as they are; any other is refused, and nothing is sent.
  it("sends the provider's own file blocks as they are, and refuses a block it cannot send", async () => {
    const before = server.requests.length;
    const own =
      name === 'openai'
        ? [
            { type: 'file', file: { filename: 'a.pdf', file_data: 'data:application/pdf;base64,JVBERi0=' } },
            { type: 'input_audio', input_audio: { data: 'UklGRg==', format: 'wav' } },
          ]
        : [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' } }];
    await model({ model: 'text' }).invoke([new HumanMessage({ content: [{ type: 'text', text: 'Summarise this' }, ...own] })]);
    expect((server.requests[before]?.body.messages as { content: unknown }[])[0]?.content).toEqual([{ type: 'text', text: 'Summarise this' }, ...own]);
    const other = name === 'openai' ? { type: 'document', source: { type: 'text', data: 'x' } } : { type: 'input_audio', input_audio: { data: 'UklGRg==', format: 'wav' } };
    // Refused before it is sent, it is no model call (a review: /metrics and onModelCall counted it as a failed one).
    const calls: ModelCall[] = [];
    await expect(model({ model: 'text' }).invoke([new HumanMessage({ content: [{ type: 'text', text: 'Listen' }, other] })], { onModelCall: (call) => calls.push(call) })).rejects.toMatchObject({
      code: 'RUNNEL_ERR_INPUT_INVALID',
      message: expect.stringContaining(`content block of type "${other.type}"`),
    });
    expect(calls).toEqual([]);
    // A file stored in the provider account is the deployment's: a caller naming one is refused.
    const stored = name === 'openai' ? { type: 'file', file: { file_id: 'file-abc123' } } : { type: 'document', source: { type: 'file', file_id: 'file_abc123' } };
    await expect(model({ model: 'text' }).invoke([new HumanMessage({ content: [{ type: 'text', text: 'Read' }, stored] })], { onModelCall: (call) => calls.push(call) })).rejects.toMatchObject({
      code: 'RUNNEL_ERR_INPUT_INVALID',
      message: expect.stringContaining('stored in the provider account'),
    });
    expect(calls).toEqual([]);
    expect(server.requests.length).toBe(before + 1);
  });

  // A review: blocks went on as the client sent them (an Anthropic document's nested file, its cache_control);
  // LangChain's own file block went to OpenAI as it was (a 400, a 502 here) or was refused; a block history kept
  // from before failed every later turn; a ChatMessage's image was dropped; an answer's image went to Anthropic.
  it('rebuilds each block from the fields it needs, reads LangChain\'s file blocks, and refuses only what the last question holds', async () => {
    const before = server.requests.length;
    const pdf = { type: 'file', data: 'JVBERi0=', mimeType: 'application/pdf', metadata: { filename: 'a.pdf' } };
    const extra = name === 'openai' ? { type: 'file', file: { file_data: 'data:application/pdf;base64,JVBERi0=', filename: 'b.pdf', file_id: undefined, cache: 1 } } : { type: 'document', source: { type: 'text', data: 'notes', media_type: 'text/plain' }, cache_control: { type: 'ephemeral' } };
    await model({ model: 'text' }).invoke([
      new HumanMessage({ content: [{ type: 'text', text: 'Earlier' }, { type: 'video', url: 'https://example.com/v.mp4' }] }),
      new AIMessage({ content: [{ type: 'text', text: 'Seen' }, { type: 'image_url', image_url: 'https://example.com/mine.png' }] }),
      new ChatMessage({ role: 'user', content: [{ type: 'text', text: 'Read these' }, pdf, extra, { type: 'image', base64: 'R0lGODlh', mime_type: 'image/gif' }] }),
    ]);
    const sent = server.requests[before]?.body.messages as { role: string; content: unknown }[];
    const gif = name === 'openai' ? { type: 'image_url', image_url: { url: 'data:image/gif;base64,R0lGODlh' } } : { type: 'image', source: { type: 'base64', media_type: 'image/gif', data: 'R0lGODlh' } };
    if (name === 'openai') {
      expect(sent).toEqual([
        { role: 'user', content: [{ type: 'text', text: 'Earlier' }] },
        { role: 'assistant', content: 'Seen' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Read these' },
            { type: 'file', file: { file_data: 'data:application/pdf;base64,JVBERi0=', filename: 'a.pdf' } },
            { type: 'file', file: { file_data: 'data:application/pdf;base64,JVBERi0=', filename: 'b.pdf' } },
            gif,
          ],
        },
      ]);
    } else {
      expect(sent).toEqual([
        { role: 'user', content: [{ type: 'text', text: 'Earlier' }] },
        { role: 'assistant', content: [{ type: 'text', text: 'Seen' }] },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Read these' },
            { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' }, title: 'a.pdf' },
            { type: 'document', source: { type: 'text', data: 'notes', media_type: 'text/plain' } },
            gif,
          ],
        },
      ]);
      // A document whose content nests a file of the account is no document it sends.
      const nested = { type: 'document', source: { type: 'content', content: [{ type: 'image', source: { type: 'file', file_id: 'file_x' } }] } };
      await expect(model({ model: 'text' }).invoke([new HumanMessage({ content: [{ type: 'text', text: 'Read' }, nested] })])).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
    }
    await expect(model({ model: 'text' }).invoke([new HumanMessage({ content: [{ type: 'text', text: 'Read' }, { type: 'file', fileId: 'file-abc' }] })])).rejects.toMatchObject({
      code: 'RUNNEL_ERR_INPUT_INVALID',
      message: expect.stringContaining('stored in the provider account'),
    });
    expect(server.requests.length).toBe(before + 1);
  });

  // A probe: a ChatMessage went as a user turn reading "assistant: …" whatever its role, as LangChain sends the
  // role it names; and ChatAnthropic sent a prompt of system text alone as `messages: []`, which the API refuses.
  // A second review: a file and then "summarise the above" (two user messages) had the file left out silently as
  // history; a history message left with no part went to OpenAI as an empty list; a call whose result came after
  // a system message or an answer's second text was left out while its result was sent (Anthropic's 400).
  it('refuses what the whole question holds, leaves out an emptied history message, and finds a result past a system message', async () => {
    const audio = name === 'openai' ? { type: 'document', source: { type: 'text', data: 'x' } } : { type: 'input_audio', input_audio: { data: 'UklGRg==', format: 'wav' } };
    await expect(model({ model: 'text' }).invoke([new HumanMessage({ content: [audio] }), new HumanMessage('What is said in it?')])).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
    const before = server.requests.length;
    await model({ model: 'text' }).invoke([
      new HumanMessage({ content: [audio] }),
      new AIMessage({ content: '', tool_calls: [{ name: 'weather', args: {}, id: 'call_1', type: 'tool_call' }] }),
      new SystemMessage('Tools answer below.'),
      new ToolMessage({ content: 'Sunny', tool_call_id: 'call_1' }),
      new HumanMessage('And now?'),
    ]);
    const sent = server.requests[before]?.body.messages as { role: string; content: unknown; tool_calls?: unknown[] }[];
    expect(sent.some((message) => message.role === 'user' && Array.isArray(message.content) && message.content.length === 0)).toBe(false);
    const text = JSON.stringify(sent);
    expect(text).toContain('call_1');
    expect(text.match(/call_1/g)?.length).toBe(2);
  });

  it("sends a ChatMessage's role where the API has it; a prompt of system text alone is the prompt's fault", async () => {
    const before = server.requests.length;
    await model({ model: 'text' }).invoke([new ChatMessage({ role: 'user', content: 'Hi' }), new ChatMessage({ role: 'assistant', content: 'Hello' }), new ChatMessage({ role: 'critic', content: 'Be kind' })]);
    const sent = server.requests[before]?.body.messages;
    if (name === 'openai') {
      expect(sent).toEqual([{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello' }, { role: 'user', content: 'critic: Be kind' }]);
      return;
    }
    expect(sent).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Hi' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'Hello' }] },
      { role: 'user', content: [{ type: 'text', text: 'critic: Be kind' }] },
    ]);
    // Refused before it is sent: no model call either.
    const calls: ModelCall[] = [];
    await expect(model({ model: 'text' }).invoke([new SystemMessage('Summarise: cats are great')], { onModelCall: (call) => calls.push(call) })).rejects.toMatchObject({
      code: 'RUNNEL_ERR_INPUT_INVALID',
      message: expect.stringContaining('system text alone'),
    });
    expect(calls).toEqual([]);
    expect(server.requests.length).toBe(before + 1);
  });

  it('streams tool-call deltas into parsed tool calls, and sends bound tools', async () => {
    const { z } = await import('zod');
    const before = server.requests.length;
    const withTools = model({ model: 'tools' }).bindTools(
      [{ name: 'get_weather', description: 'Weather in a city', schema: z.object({ city: z.string() }) }],
      { toolChoice: 'get_weather' },
    );
    const chunks = await toArray(withTools.stream('Weather in Paris?'));
    expect(chunks.some((c) => (c as unknown as { tool_call_chunks: unknown[] }).tool_call_chunks.length > 0)).toBe(true);
    const answer = await withTools.invoke('Weather in Paris?');
    expect(answer.tool_calls[0]).toMatchObject({ name: 'get_weather', args: { city: 'Paris' }, type: 'tool_call' });
    if (name === 'openai') {
      expect(answer.tool_calls[1]).toMatchObject({ name: 'get_time', args: { tz: 'CET' }, id: 'call_fx2' });
      expect(server.requests[before]?.body.tool_choice).toEqual({ type: 'function', function: { name: 'get_weather' } });
      expect((server.requests[before]?.body.tools as unknown[])[0]).toMatchObject({ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } });
    } else {
      expect(answer.text).toBe('Let me check.');
      expect(server.requests[before]?.body.tool_choice).toEqual({ type: 'tool', name: 'get_weather' });
      expect((server.requests[before]?.body.tools as unknown[])[0]).toMatchObject({ name: 'get_weather', input_schema: { type: 'object' } });
    }
  });

  it('retries a 429 with retry-after within maxRetries, then surfaces RUNNEL_ERR_PROVIDER_RATE_LIMITED (429)', async () => {
    expect((await model({ model: 'rate-limited-once', maxRetries: 2 }).invoke('hi')).text).toBe('Why did the cat sit?');
    const before = server.requests.length;
    const failure = model({ model: 'rate-limited', maxRetries: 1 }).invoke('hi');
    await expect(failure).rejects.toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_RATE_LIMITED', statusCode: 429 });
    expect(server.requests.length - before).toBe(2);
  });

  it('retries a 500, then surfaces RUNNEL_ERR_PROVIDER_UNAVAILABLE without the key', async () => {
    expect((await model({ model: 'error-once', maxRetries: 1 }).invoke('hi')).text).toBe('Why did the cat sit?');
    const error = await model({ model: 'error', maxRetries: 0 }).invoke('hi').catch((e: unknown) => e as Error);
    expect(error).toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_UNAVAILABLE', statusCode: 502 });
    expect(JSON.stringify({ message: (error as Error).message, detail: (error as { detail?: unknown }).detail })).not.toContain(KEY);
  });

  it('ends a stream that stalls after two chunks with RUNNEL_ERR_PROVIDER_TIMEOUT, closes the request and caches nothing', async () => {
    const cache = new InMemoryCache();
    const stalled = model({ model: 'stall', streamIdleTimeoutMs: 150, cache });
    const abandoned = server.nextAbandon();
    const seen: string[] = [];
    await expect(
      (async () => {
        for await (const chunk of stalled.stream('hi')) seen.push(chunk.text);
      })(),
    ).rejects.toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_TIMEOUT' });
    expect(seen.join('')).toBe('Why did');
    await settleWithin(abandoned, 2000);
    expect(cache.size).toBe(0);
  });

  it('ends a stream with a frame it cannot parse in RUNNEL_ERR_PROVIDER_UNAVAILABLE, caches nothing, and logs the SDK\'s message without the frame', async () => {
    const cache = new InMemoryCache();
    const printed = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    try {
      const error = await model({ model: 'malformed', cache }).invoke('hi').catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_UNAVAILABLE', statusCode: 502 });
      expect(cache.size).toBe(0);
      // Without a provider logger the message goes to the console, the provider's frame does not.
      expect(printed.mock.calls.length).toBeGreaterThan(0);
      expect(JSON.stringify(printed.mock.calls)).toMatch(/Could not parse/);
      expect(JSON.stringify(printed.mock.calls)).not.toContain('XYZZY');
      printed.mockClear();
      const logged: unknown[][] = [];
      const record = (level: string) => (fields: Record<string, unknown>, message: string) => void logged.push([level, fields, message]);
      setProviderLogger({ error: record('error'), warn: record('warn'), info: record('info'), debug: record('debug') });
      await expect(model({ model: 'malformed' }).invoke('hi')).rejects.toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_UNAVAILABLE' });
      expect(printed).not.toHaveBeenCalled();
      expect(logged).toContainEqual(['error', { provider_sdk: name }, 'Could not parse message into JSON:']);
      expect(JSON.stringify(logged)).not.toContain('XYZZY');
    } finally {
      setProviderLogger(undefined);
      printed.mockRestore();
    }
  });

  // A trial: the Anthropic SDK slept through a 120 s retry-after, and the request ended 75 s later as a timeout.
  it('passes on at once a rate limit that asks for a long wait, without retrying', async () => {
    const before = server.requests.length;
    const error = await model({ model: 'rate-limited-until', maxRetries: 2 }).invoke('hi').catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_RATE_LIMITED', statusCode: 429 });
    expect(server.requests.length - before).toBe(1);
    expect(providerRetryAfter(error)).toBeGreaterThan(60);
    // An outage that asks for two minutes: not slept through either, and its wait goes with the error.
    const outage = server.requests.length;
    const down = await model({ model: 'unavailable-long', maxRetries: 2 }).invoke('hi').catch((e: unknown) => e);
    expect(down).toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_UNAVAILABLE' });
    expect(server.requests.length - outage).toBe(1);
    expect(providerRetryAfter(down)).toBe(120);
  });

  it('reads arguments cut short in a finished answer as an invalid tool call, never a call with what was left', async () => {
    server.script = () => ({ toolCalls: [{ name: 'calculator', args: '{"expression": "2 ^ 1' }], finish: CUT });
    try {
      // Not cached (a probe: the cut-short answer was served again from the cache): the next call asks again.
      const cache = new InMemoryCache();
      const before = server.requests.length;
      const answer = await model({ model: 'scripted', cache }).invoke('What is 2 ^ 10?');
      await model({ model: 'scripted', cache }).invoke('What is 2 ^ 10?');
      expect(server.requests.length - before).toBe(2);
      expect(cache.size).toBe(0);
      // An agent given it fails with what went wrong, instead of an empty answer (and runs nothing).
      const agent = createToolCallingAgent({ model: model({ model: 'scripted' }), tools: [calculatorTool()] });
      await expect(agent.invoke({ input: 'What is 2 ^ 10?' })).rejects.toMatchObject({ code: 'RUNNEL_ERR_OUTPUT_PARSE' });
      expect(answer.tool_calls).toEqual([]);
      expect(answer.invalid_tool_calls).toEqual([expect.objectContaining({ name: 'calculator', args: '{"expression": "2 ^ 1', error: expect.stringMatching(/cut short/) })]);
      // Streamed, the pieces preview what has come so far; the whole answer is the same invalid call.
      let merged: AIMessageChunk | undefined;
      for await (const piece of model({ model: 'scripted' }).stream('What is 2 ^ 10?')) {
        const chunk = piece as unknown as AIMessageChunk;
        merged = merged === undefined ? chunk : merged.concat(chunk);
      }
      expect(merged?.tool_calls).toEqual([]);
      expect(merged?.invalid_tool_calls).toHaveLength(1);
      // Cut short before its arguments began: no call either (an empty object would have run the tool).
      server.script = () => ({ toolCalls: [{ name: 'calculator', args: '' }], finish: CUT });
      const bare = await model({ model: 'scripted' }).invoke('What is 2 ^ 10?');
      expect([bare.tool_calls, bare.invalid_tool_calls.length]).toEqual([[], 1]);
      // Whole arguments are a call, however they were split.
      server.script = () => ({ toolCalls: [{ name: 'calculator', args: { expression: '2 ^ 10' } }] });
      expect((await model({ model: 'scripted' }).invoke('What is 2 ^ 10?')).tool_calls).toEqual([expect.objectContaining({ name: 'calculator', args: { expression: '2 ^ 10' } })]);
    } finally {
      server.script = undefined;
    }
  });

  it('gives an agent whose model speaks before its tool call the same answer invoked as streamed', async () => {
    // The second request carries the tool's result: then the model answers.
    const answered = (body: Record<string, unknown>): boolean => JSON.stringify(body.messages).includes('"2"');
    await scripted((body) => (answered(body) ? { text: 'It is 2.' } : { text: 'Let me compute.', toolCalls: [{ name: 'calculator', args: { expression: '1 + 1' } }] }), async () => {
      const agent = createToolCallingAgent({ model: model({ model: 'scripted' }), tools: [calculatorTool()] });
      const invoked = await agent.invoke({ input: 'What is 1 + 1?' });
      expect(invoked).toBe('Let me compute.\n\nIt is 2.');
      expect((await toArray(agent.stream({ input: 'What is 1 + 1?' }))).join('')).toBe(invoked);
    });
  });

  // A probe: OpenAI's models make up a tool `multi_tool_use.parallel`. The agent told the model there is no such
  // tool, in a conversation that sent the call back under that name, which OpenAI refuses (400, `messages[i]
  // .tool_calls[j].function.name` must match ^[a-zA-Z0-9_-]+$; both providers refuse a call named ''): the run
  // ended RUNNEL_ERR_PROVIDER_REJECTED instead of the model learning of its mistake.
  it('sends a call of a name no tool can have back under one the providers take, answered that no tool has it', async () => {
    const SENDABLE = /^[a-zA-Z0-9_-]{1,64}$/;
    type Sent = { role: string; content: unknown; tool_call_id?: string; tool_calls?: { id: string; function: { name: string } }[] };
    /** The calls and the results a request sends back, as [name, id] and [id, text], whichever provider's format. */
    const turns = (messages: Sent[]) => {
      const blocks = messages.flatMap((message) => (Array.isArray(message.content) ? (message.content as Record<string, unknown>[]) : []));
      const calls = [...messages.flatMap((message) => (message.tool_calls ?? []).map((call) => [call.function.name, call.id])), ...blocks.filter((b) => b.type === 'tool_use').map((b) => [b.name, b.id])];
      const results = [...messages.filter((message) => message.role === 'tool').map((message) => [message.tool_call_id, message.content]), ...blocks.filter((b) => b.type === 'tool_result').map((b) => [b.tool_use_id, b.content])];
      return { calls: calls as string[][], results: results as string[][] };
    };
    const answered = (body: Record<string, unknown>): boolean => turns(body.messages as Sent[]).results.length > 0;
    for (const made of ['multi_tool_use.parallel', '']) {
      await scripted((body) => (answered(body) ? { text: 'Once at a time, then.' } : { toolCalls: [{ name: 'calculator', args: { expression: '1 + 1' } }, { name: made, args: { tool_uses: [] } }] }), async () => {
        const agent = createToolCallingAgent({ model: model({ model: 'scripted' }), tools: [calculatorTool()] });
        for (const run of [() => agent.invoke({ input: 'Add twice' }), async () => (await toArray(agent.stream({ input: 'Add twice' }))).join('')]) {
          const before = server.requests.length;
          expect(await run()).toBe('Once at a time, then.');
          const { calls, results } = turns((server.requests[before + 1]?.body.messages ?? []) as Sent[]);
          expect(calls.map(([called]) => called)).toEqual(['calculator', made === '' ? '_' : 'multi_tool_use_parallel']);
          expect(calls.every(([called]) => SENDABLE.test(called ?? ''))).toBe(true);
          expect(results.map(([id]) => id)).toEqual(calls.map(([, id]) => id));
          expect(results[0]?.[1]).toBe('2');
          expect(results[1]?.[1]).toBe(`Error: there is no tool named ${made === '' ? "''" : made}. Use one of: calculator.`);
        }
      });
    }
    // A review: such a name with arguments that do not parse went back as it was (a call refused for its arguments).
    await scripted((body) => (answered(body) ? { text: 'Fine.' } : { toolCalls: [{ name: 'calculator', args: { expression: '1 + 1' } }, { name: 'multi_tool_use.parallel', args: '{"tool_uses": [' }] }), async () => {
      const agent = createToolCallingAgent({ model: model({ model: 'scripted' }), tools: [calculatorTool()] });
      const before = server.requests.length;
      expect(await agent.invoke({ input: 'Add twice' })).toBe('Fine.');
      const { calls, results } = turns((server.requests[before + 1]?.body.messages ?? []) as Sent[]);
      expect(calls.map(([called]) => called)).toEqual(['calculator', 'multi_tool_use_parallel']);
      expect(results.map(([id]) => id)).toEqual(calls.map(([, id]) => id));
      expect(results[1]?.[1]).toContain('the arguments of this call of multi_tool_use.parallel could not be read');
    });
  });

  // A probe: a chat with history whose model called a tool the client never answered (it asked something else)
  // kept the call in its history, and sent it on every later turn without a result, which both APIs refuse (400):
  // every turn of that chat failed RUNNEL_ERR_PROVIDER_REJECTED.
  it('leaves out of the request a call no result answers, so a chat whose history keeps one goes on', async () => {
    const weather = tool(({ city }) => `Sunny in ${city}`, { name: 'weather', description: 'The weather', schema: z.object({ city: z.string() }) });
    const store = new MemoryHistoryStore();
    const prompt = ChatPromptTemplate.fromMessages([new MessagesPlaceholder('history'), ['human', '{question}']]);
    const chat = withMessageHistory<{ question: string }, AIMessage>(prompt.pipe(model({ model: 'scripted' }).bindTools([weather])) as never, {
      getHistory: (sessionId) => store.history(sessionId),
      inputMessagesKey: 'question',
      historyMessagesKey: 'history',
    });
    const config = { configurable: { session_id: `unanswered-${name}` } };
    /** The calls a request sends, whichever provider's format. */
    const callsSent = (body: Record<string, unknown>): unknown[] =>
      (body.messages as { tool_calls?: unknown[]; content: unknown }[]).flatMap((message) => [
        ...(message.tool_calls ?? []),
        ...(Array.isArray(message.content) ? (message.content as { type: string }[]).filter((block) => block.type === 'tool_use') : []),
      ]);
    await scripted(() => ({ toolCalls: [{ name: 'weather', args: { city: 'Paris' } }] }), async () => {
      expect((await chat.invoke({ question: 'Weather in Paris?' }, config)).tool_calls).toHaveLength(1);
    });
    await scripted(() => ({ text: 'Hello!' }), async () => {
      for (const question of ['Never mind. Hi!', 'Still there?']) {
        const before = server.requests.length;
        expect((await chat.invoke({ question }, config)).text).toBe('Hello!');
        const body = server.requests[before]?.body ?? {};
        expect(callsSent(body)).toEqual([]);
        expect(JSON.stringify(body.messages)).toContain('Weather in Paris?');
      }
    });
    // A call answered by its result is sent, with it.
    const answered = [new HumanMessage('Weather?'), new AIMessage({ content: '', tool_calls: [{ name: 'weather', args: { city: 'Oslo' }, id: 'call_1' }, { name: 'weather', args: { city: 'Rome' }, id: 'call_2' }] }), new ToolMessage({ content: 'Sunny', tool_call_id: 'call_2' })];
    await scripted(() => ({ text: 'Sunny in Rome.' }), async () => {
      const before = server.requests.length;
      await model({ model: 'scripted' }).bindTools([weather]).invoke(answered);
      const sent = JSON.stringify(callsSent(server.requests[before]?.body ?? {}));
      expect([sent.includes('"call_1"'), sent.includes('"call_2"')]).toEqual([false, true]);
    });
  });

  // A probe: a tool whose own step timed out (a nested runnable's `timeout`) failed the whole agent with
  // RUNNEL_ERR_TIMEOUT, "The run timed out" (a 504), where any other failure of a tool goes to the model to read.
  it('gives the model a tool’s own timeout to read, as any failure of the tool; the run’s own cancellation still ends it', async () => {
    const hanging = deferred<string>();
    const slowStep = lambda(() => hanging.promise, { name: 'slow_lookup' });
    const lookup = tool(async ({ q }) => slowStep.invoke(q, { timeout: 1 }), { name: 'lookup', description: 'Looks up', schema: z.object({ q: z.string() }) });
    const results: string[] = [];
    const answered = (body: Record<string, unknown>): boolean => {
      const text = JSON.stringify(body.messages);
      if (text.includes('lookup failed')) results.push(text);
      return text.includes('lookup failed');
    };
    try {
      await scripted((body) => (answered(body) ? { text: 'The lookup timed out.' } : { toolCalls: [{ name: 'lookup', args: { q: 'x' } }] }), async () => {
        const agent = createToolCallingAgent({ model: model({ model: 'scripted' }), tools: [lookup] });
        expect(await agent.invoke({ input: 'Look x up' })).toBe('The lookup timed out.');
        expect(results).toHaveLength(1);
        expect(results[0]).toMatch(/lookup failed: The run timed out/);
        // The agent's own run cancelled while its tool waits: that ends the run.
        const started = deferred();
        const stuck = tool(async () => { started.resolve(); return hanging.promise; }, { name: 'lookup', description: 'Looks up', schema: z.object({ q: z.string() }) });
        const controller = new AbortController();
        const run = createToolCallingAgent({ model: model({ model: 'scripted' }), tools: [stuck] }).invoke({ input: 'Look x up' }, { signal: controller.signal });
        await started.promise;
        controller.abort();
        await expect(run).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
      });
    } finally {
      hanging.resolve('late');
    }
  });

  it('passes on an answer cut by the token limit with its reason, and never caches it: the next call asks again', async () => {
    const cache = new InMemoryCache();
    const calls: ModelCall[] = [];
    await scripted(() => ({ text: 'Why did the cat', finish: CUT }), async () => {
      const before = server.requests.length;
      const answer = await model({ model: 'scripted', cache }).invoke('Tell me a joke', { onModelCall: (call) => calls.push(call) });
      expect(answer.text).toBe('Why did the cat');
      expect(answer.response_metadata.finish_reason).toBe(CUT);
      await toArray(model({ model: 'scripted', cache }).stream('Tell me a joke', { onModelCall: (call) => calls.push(call) }));
      expect(server.requests.length - before).toBe(2);
      expect(cache.size).toBe(0);
      expect(calls.map((call) => call.finishReason)).toEqual([CUT, CUT]);
      // A whole answer to the same question is cached, and its reason reported.
      server.script = () => ({ text: 'Why did the cat sit?' });
      await model({ model: 'scripted', cache }).invoke('Tell me a joke', { onModelCall: (call) => calls.push(call) });
      await model({ model: 'scripted', cache }).invoke('Tell me a joke');
      expect(server.requests.length - before).toBe(3);
      expect(calls.at(-1)?.finishReason).toBe(STOP);
      // A filter's stop (Anthropic: its classifier's refusal) is not a whole answer either.
      server.script = () => ({ text: 'I cannot', finish: name === 'openai' ? 'content_filter' : 'refusal' });
      const filtered = new InMemoryCache();
      await model({ model: 'scripted', cache: filtered }).invoke('Tell me a joke');
      expect(filtered.size).toBe(0);
    });
  });

  // A review: an answer shared with an identical call under way, or from the cache, reported no reason, so the
  // caller that got a cut answer that way was told `stop`.
  it('reports every answer\'s finish reason to onModelCall, one given without a request (shared, cached) as cached', async () => {
    const cache = new InMemoryCache();
    const calls: ModelCall[] = [];
    const onModelCall = (call: ModelCall) => void calls.push(call);
    const shared = model({ model: 'scripted', cache });
    await scripted(() => ({ text: 'Why did the cat', finish: CUT }), async () => {
      const before = server.requests.length;
      const answers = await Promise.all([shared.invoke('Same question', { onModelCall }), toArray(shared.stream('Same question', { onModelCall }))]);
      expect(answers[0].text).toBe('Why did the cat');
      expect(server.requests.length - before).toBe(1);
      expect(calls.map((call) => [call.finishReason, call.cached === true]).sort()).toEqual([
        [CUT, false],
        [CUT, true],
      ]);
      calls.length = 0;
      server.script = () => ({ text: 'Why did the cat sit?' });
      await shared.invoke('Whole question', { onModelCall });
      await shared.invoke('Whole question', { onModelCall });
      expect(calls.map((call) => [call.finishReason, call.cached === true, call.cached === true ? call.seconds : 'timed'])).toEqual([
        [STOP, false, 'timed'],
        [STOP, true, 0],
      ]);
    });
  });

  // A probe: when the call identical ones waited on failed, each of them called the provider itself, one after
  // another (a hanging provider: 75 s, then 150 s).
  it('hands a failed call’s error to the identical calls waiting on it: one request in all', async () => {
    const cache = new InMemoryCache();
    const shared = model({ model: 'text', cache });
    const before = server.requests.length;
    const gate = server.gateNext(2);
    const outcome = (answer: Promise<unknown>) => answer.then(() => 'answered', (error: unknown) => (error as { code?: string }).code);
    const calls: ModelCall[] = [];
    const onModelCall = (call: ModelCall) => void calls.push(call);
    const leader = outcome(toArray(shared.stream('Same failing question', { onModelCall })));
    await gate.reached;
    const waiters = [outcome(shared.invoke('Same failing question', { onModelCall })), outcome(toArray(shared.stream('Same failing question', { onModelCall })))];
    // Their steps up to the wait are promise jobs: done before the event loop's next turns.
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    gate.cut();
    expect(await Promise.all([leader, ...waiters])).toEqual(Array(3).fill('RUNNEL_ERR_PROVIDER_UNAVAILABLE'));
    expect(server.requests.length - before).toBe(1);
    expect(cache.size).toBe(0);
    // Each hears of its call: the leader's went to the provider, the waiters' were given without one.
    expect(calls.map((call) => [call.error, call.cached === true]).sort()).toEqual([
      ['RUNNEL_ERR_PROVIDER_UNAVAILABLE', false],
      ['RUNNEL_ERR_PROVIDER_UNAVAILABLE', true],
      ['RUNNEL_ERR_PROVIDER_UNAVAILABLE', true],
    ]);
    // A leader its own caller aborts fails nobody else: one waiter leads in its place, the others wait on it.
    const aborted = server.gateNext(2);
    const stop = new AbortController();
    const first = outcome(toArray(shared.stream('Same aborted question', { signal: stop.signal })));
    await aborted.reached;
    const others = [shared.invoke('Same aborted question'), shared.invoke('Same aborted question'), shared.invoke('Same aborted question')];
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    stop.abort();
    expect(await first).toBe('RUNNEL_ERR_ABORTED');
    expect((await Promise.all(others)).map((answer) => answer.text)).toEqual(Array(3).fill('Why did the cat sit?'));
    expect(server.requests.length - before).toBe(3);
    aborted.cut();
  });

  // A probe: a compatible server's `abort` or `error` (vLLM's, OpenRouter's) was read as a stop, and cached.
  it('answers an end for a reason it does not know, and never caches it', async () => {
    const cache = new InMemoryCache();
    for (const finish of ['abort', 'error']) {
      await scripted(() => ({ text: 'Why did the', finish }), async () => {
        const before = server.requests.length;
        const answer = await model({ model: 'scripted', cache }).invoke('Tell me a joke');
        expect(answer.response_metadata.finish_reason).toBe(finish);
        await toArray(model({ model: 'scripted', cache }).stream('Tell me a joke'));
        expect(server.requests.length - before).toBe(2);
        expect(cache.size).toBe(0);
      });
    }
  });

  it('takes an entry an earlier version cached cut short, or with calls that do not parse, for a miss', async () => {
    const entries: Record<string, AIMessageChunk[]> = {
      cut: [new AIMessageChunk({ content: 'Why did', response_metadata: { finish_reason: CUT } })],
      // A probe planted these: no finish reason (half an answer), and an empty one, were served as whole.
      unfinished: [new AIMessageChunk({ content: 'half an ans' })],
      empty: [new AIMessageChunk({ content: '' })],
      unknown: [new AIMessageChunk({ content: 'Why did', response_metadata: { finish_reason: 'abort' } })],
      broken: [new AIMessageChunk({ content: '', tool_call_chunks: [{ index: 0, id: 'c1', name: 'calculator', args: '{"expression": "2' }], response_metadata: { finish_reason: 'tool_calls' } })],
      whole: [new AIMessageChunk({ content: 'From the cache', response_metadata: { finish_reason: 'stop' } })],
    };
    for (const [kind, entry] of Object.entries(entries)) {
      const stored: AIMessageChunk[][] = [];
      const cache = { lookup: async () => entry, update: async (_key: string, chunks: AIMessageChunk[]) => void stored.push(chunks) };
      const before = server.requests.length;
      const answer = await model({ model: 'text', cache }).invoke('Tell me a joke');
      const streamed = (await toArray(model({ model: 'text', cache }).stream('Tell me a joke'))).map((chunk) => chunk.text).join('');
      if (kind === 'whole') {
        expect([answer.text, streamed, server.requests.length - before]).toEqual(['From the cache', 'From the cache', 0]);
      } else {
        // Asked anew, and the whole answer replaces the entry.
        expect([kind, answer.text, streamed, server.requests.length - before, stored.length]).toEqual([kind, 'Why did the cat sit?', 'Why did the cat sit?', 2, 2]);
      }
    }
  });

  if (name === 'openai') {
    // Left by the thirty-sixth session: o1…o4 and gpt-5 refuse `max_tokens` with a 400.
    it('sends the token limit as max_completion_tokens to a reasoning model, as max_tokens to the others, as the option says', async () => {
      const sent = async (options: ChatModelOptions & { maxCompletionTokens?: boolean }): Promise<Record<string, unknown>> => {
        const before = server.requests.length;
        await new ChatOpenAI({ apiKey: KEY, baseURL: server.url, maxRetries: 0, maxTokens: 50, ...options }).invoke('hi');
        return server.requests[before]?.body ?? {};
      };
      // A fine-tuned one is named after its base model, behind `ft:` (reinforcement fine-tuning of o4-mini).
      for (const reasoning of ['o1', 'o3-mini', 'o4-mini', 'gpt-5', 'gpt-5-mini', 'ft:o4-mini-2025-04-16:acme::BqXw1a2b']) {
        const body = await sent({ model: reasoning });
        expect(body.max_completion_tokens, reasoning).toBe(50);
        expect(body, reasoning).not.toHaveProperty('max_tokens');
      }
      for (const other of ['gpt-4o-mini', 'gpt-4.1', 'llama3.1', 'text', 'ft:gpt-4o-mini-2024-07-18:acme::BqXw1a2b']) {
        const body = await sent({ model: other });
        expect(body.max_tokens, other).toBe(50);
        expect(body, other).not.toHaveProperty('max_completion_tokens');
      }
      // A deployment whose name does not say it (Azure's), and a compatible server that knows only max_tokens.
      expect((await sent({ model: 'my-reasoner', maxCompletionTokens: true })).max_completion_tokens).toBe(50);
      expect((await sent({ model: 'o3', maxCompletionTokens: false })).max_tokens).toBe(50);
      // No limit set: neither.
      const unlimited = await sent({ model: 'o3', maxTokens: undefined });
      expect(unlimited).not.toHaveProperty('max_tokens');
      expect(unlimited).not.toHaveProperty('max_completion_tokens');
    });

    it('says which input tokens the prompt cache gave and which output tokens went to reasoning, as LangChain names them', async () => {
      const details = { prompt_tokens_details: { cached_tokens: 8, audio_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 3, audio_tokens: 0 } };
      await scripted(() => ({ text: 'Why did the cat sit?', openAIUsage: details }), async () => {
        const answer = await model({ model: 'scripted' }).invoke('Tell me a joke');
        expect(answer.usage_metadata).toEqual({ input_tokens: 10, output_tokens: 5, total_tokens: 15, input_token_details: { cache_read: 8 }, output_token_details: { reasoning: 3 } });
        // Streamed: the chunks add up to the same.
        const chunks = await toArray(model({ model: 'scripted' }).stream('Tell me a joke'));
        expect(chunks.reduce<UsageMetadata | undefined>((sum, chunk) => addUsage(sum, chunk.usage_metadata), undefined)).toEqual(answer.usage_metadata);
      });
      // None of either (OpenAI reports them as 0): no details.
      await scripted(() => ({ text: 'Why did the cat sit?', openAIUsage: { prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } } }), async () => {
        expect((await model({ model: 'scripted' }).invoke('Tell me a joke')).usage_metadata).toEqual({ input_tokens: 10, output_tokens: 5, total_tokens: 15 });
      });
    });

    it('reads usage sent in every chunk as the running total it is (a compatible server), not a count per chunk', async () => {
      await scripted(() => ({ text: 'Why did the cat sit?', usageEveryChunk: true }), async () => {
        const answer = await model({ model: 'scripted' }).invoke('Tell me a joke');
        expect(answer.text).toBe('Why did the cat sit?');
        // Summed, the seven usage-bearing chunks counted the prompt seven times (70 in, 20 out).
        expect(answer.usage_metadata).toEqual({ input_tokens: 10, output_tokens: 5, total_tokens: 15 });
      });
    });

    // A probe: a refusal was cached (Anthropic's, its classifier's, never was).
    it('answers a refusal as the model’s words, marked, and never caches it', async () => {
      const cache = new InMemoryCache();
      await scripted(() => ({ refusal: "I can't help with that." }), async () => {
        const before = server.requests.length;
        const answer = await model({ model: 'scripted', cache }).invoke('Tell me a joke');
        expect(answer.text).toBe("I can't help with that.");
        // Joined across the chunks it streamed in, as the content is.
        expect(answer.additional_kwargs.refusal).toBe("I can't help with that.");
        await model({ model: 'scripted', cache }).invoke('Tell me a joke');
        expect(server.requests.length - before).toBe(2);
        expect(cache.size).toBe(0);
      });
    });

    // A probe: a chunk without `choices` (a compatible server's usage-only chunk) or a choice without `delta` (one
    // that sends only the finish reason) threw inside the adapter: the whole answer failed with a 502.
    it('reads a chunk without choices or a choice without a delta as the little it says, the answer whole and cached', async () => {
      const cache = new InMemoryCache();
      const frames = [
        openaiFrame({ choices: [{ index: 0, delta: { role: 'assistant', content: 'Why did the cat sit?' }, finish_reason: null }] }),
        openaiFrame({ choices: [{ index: 0, finish_reason: 'stop' }] }),
        openaiFrame({ usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } }),
        'data: [DONE]\n\n',
      ];
      await scripted(() => ({ frames }), async () => {
        const before = server.requests.length;
        const answer = await model({ model: 'scripted', cache }).invoke('Tell me a joke');
        expect([answer.text, answer.response_metadata.finish_reason, answer.usage_metadata]).toEqual(['Why did the cat sit?', 'stop', { input_tokens: 10, output_tokens: 5, total_tokens: 15 }]);
        expect((await model({ model: 'scripted', cache }).invoke('Tell me a joke')).text).toBe('Why did the cat sit?');
        expect(server.requests.length - before).toBe(1);
      });
    });

    // A probe: a tool call's arguments sent as an object, not their JSON text, threw in the adapter: a 502.
    it('reads tool-call arguments sent as an object as their JSON', async () => {
      const frames = [deltaFrame({ role: 'assistant', tool_calls: [{ index: 0, id: 'call_o', type: 'function', function: { name: 'calculator', arguments: { expression: '2+2' } } }] }), deltaFrame({}, 'tool_calls'), 'data: [DONE]\n\n'];
      await scripted(() => ({ frames }), async () => {
        const answer = await model({ model: 'scripted' }).invoke('What is 2+2?');
        expect(answer.tool_calls.map((call) => [call.name, call.args])).toEqual([['calculator', { expression: '2+2' }]]);
      });
    });

    // Tool-call deltas without `index` (compatible servers that leave it out): each fragment was a call of its
    // own — the name in one, its arguments in others — and none of them a call the chain could run.
    it('reads tool-call deltas without an index: a fragment with no id and no name, or repeating its call\'s id, goes on that call', async () => {
      const call = (fields: Record<string, unknown>) => deltaFrame({ tool_calls: [{ type: 'function', ...fields }] });
      const frames = [
        deltaFrame({ role: 'assistant', content: '' }),
        call({ id: 'call_a', function: { name: 'calculator', arguments: '' } }),
        // A server that repeats the call's id and name in its deltas.
        call({ id: 'call_a', function: { name: 'calculator', arguments: '{"expression":' } }),
        call({ function: { arguments: '"2+2"}' } }),
        call({ id: 'call_b', function: { name: 'calculator', arguments: '{"expression":"3*3"}' } }),
        deltaFrame({}, 'tool_calls'),
        'data: [DONE]\n\n',
      ];
      await scripted(() => ({ frames }), async () => {
        for (const answer of [await model({ model: 'scripted' }).invoke('2+2 and 3*3?'), AIMessageChunk.merge((await toArray(model({ model: 'scripted' }).stream('2+2 and 3*3?'))) as AIMessageChunk[])]) {
          expect(answer.tool_calls.map((made) => [made.id, made.name, made.args])).toEqual([
            ['call_a', 'calculator', { expression: '2+2' }],
            ['call_b', 'calculator', { expression: '3*3' }],
          ]);
          expect(answer.invalid_tool_calls).toEqual([]);
        }
      });
      // A review: two whole calls of one tool, without ids, one after the other, are two calls.
      const twice = [
        deltaFrame({ role: 'assistant', content: '' }),
        call({ function: { name: 'calculator', arguments: '{"expression":"1+1"}' } }),
        call({ function: { name: 'calculator', arguments: '{"expression":"2+2"}' } }),
        deltaFrame({}, 'tool_calls'),
        'data: [DONE]\n\n',
      ];
      await scripted(() => ({ frames: twice }), async () => {
        const answer = await model({ model: 'scripted' }).invoke('1+1 and 2+2?');
        expect(answer.tool_calls.map((made) => [made.name, made.args])).toEqual([
          ['calculator', { expression: '1+1' }],
          ['calculator', { expression: '2+2' }],
        ]);
      });
    });

    // A probe: the agent, streamed, added up each step's answer a chunk at a time, and each concat re-read the tool
    // calls' arguments so far: a call writing 80 KB in 20,000 chunks held the event loop for 12 s more than invoke.
    // Every observed streamed run (stream_events) added up its output so too, and a chat with history its answer.
    it('adds up a streamed step once, however many chunks its tool call’s arguments come in', async () => {
      const pieces = 500;
      const frames = [
        deltaFrame({ role: 'assistant', content: '' }),
        deltaFrame({ tool_calls: [{ index: 0, id: 'call_long', type: 'function', function: { name: 'write', arguments: '{"text":"' } }] }),
        ...Array.from({ length: pieces }, () => deltaFrame({ tool_calls: [{ index: 0, function: { arguments: 'abcd' } }] })),
        deltaFrame({ tool_calls: [{ index: 0, function: { arguments: '"}' } }] }),
        deltaFrame({}, 'tool_calls'),
        'data: [DONE]\n\n',
      ];
      const write = tool(({ text }) => `wrote ${text.length}`, { name: 'write', description: 'Writes', schema: z.object({ text: z.string() }) });
      await scripted((body) => (JSON.stringify(body.messages).includes('wrote 2000') ? { text: 'Written.' } : { frames }), async () => {
        const merges = vi.spyOn(AIMessageChunk, 'merge');
        try {
          const agent = createToolCallingAgent({ model: model({ model: 'scripted' }), tools: [write] });
          expect((await toArray(agent.stream({ input: 'Write it' }))).join('')).toBe('Written.');
          // A few per step (the model's own checks, the agent's sum), never one per chunk.
          expect(merges.mock.calls.length).toBeLessThan(20);
          // Observed (stream_events), each run's output — the model's answer — is added up once too.
          merges.mockClear();
          const events = await toArray(agent.streamEvents({ input: 'Write it' }));
          expect(events.filter((event) => event.event === 'on_chat_model_stream').length).toBeGreaterThan(pieces);
          expect(events.find((event) => event.event === 'on_chat_model_end')?.data.output).toMatchObject({ tool_calls: [{ name: 'write', args: { text: 'abcd'.repeat(pieces) } }] });
          expect(merges.mock.calls.length).toBeLessThan(20);
          // A chat with history, streamed: the answer is saved whole — its tool call — and added up once.
          merges.mockClear();
          const store = new MemoryHistoryStore();
          const chat = withMessageHistory(model({ model: 'scripted' }).bindTools([write]), { getHistory: (sessionId) => store.history(sessionId) });
          await toArray(chat.stream('Write it', { configurable: { session_id: 's1' } }));
          expect(merges.mock.calls.length).toBeLessThan(20);
          const saved = await store.history('s1').getMessages();
          expect(saved.map((message) => message.type)).toEqual(['human', 'ai']);
          expect((saved[1] as AIMessage).tool_calls).toMatchObject([{ id: 'call_long', name: 'write', args: { text: 'abcd'.repeat(pieces) } }]);
          // A parser after the model, observed: its input — the model's chunks — is added up once too.
          merges.mockClear();
          const parsed = model({ model: 'scripted' }).bindTools([write]).pipe(new StringOutputParser());
          const parserEnd = (await toArray(parsed.streamEvents('Write it'))).find((event) => event.event === 'on_parser_end');
          expect(parserEnd?.data.input).toMatchObject({ tool_calls: [{ name: 'write', args: { text: 'abcd'.repeat(pieces) } }] });
          expect(merges.mock.calls.length).toBeLessThan(20);
        } finally {
          merges.mockRestore();
        }
      });
    });

    // A probe: an answer with a call whose arguments did not parse, beside one that did, ran the good call and
    // left the other out of the conversation: the model never learnt it had not run.
    it('answers a call whose arguments do not parse, beside one that does, with an error quoting what the model wrote', async () => {
      const call = (index: number, id: string, args: string) => deltaFrame({ tool_calls: [{ index, id, type: 'function', function: { name: 'calculator', arguments: args } }] });
      const frames = [deltaFrame({ role: 'assistant', content: '' }), call(0, 'call_good', '{"expression":"1+1"}'), call(1, 'call_bad', '{"expression": 2+'), deltaFrame({}, 'tool_calls'), 'data: [DONE]\n\n'];
      type Sent = { role: string; content: string | null; tool_call_id?: string; tool_calls?: { id: string; function: { name: string; arguments: string } }[] };
      await scripted((body) => ((body.messages as Sent[]).at(-1)?.role === 'tool' ? { text: 'Two; the other again.' } : { frames }), async () => {
        const agent = createToolCallingAgent({ model: model({ model: 'scripted' }), tools: [calculatorTool()] });
        for (const run of [() => agent.invoke({ input: '1+1 and 2+?' }), async () => (await toArray(agent.stream({ input: '1+1 and 2+?' }))).join('')]) {
          const before = server.requests.length;
          expect(await run()).toBe('Two; the other again.');
          const sent = (server.requests[before + 1]?.body.messages ?? []) as Sent[];
          const calls = sent.find((message) => message.role === 'assistant')?.tool_calls ?? [];
          expect(calls.map((made) => [made.id, made.function.name])).toEqual([
            ['call_good', 'calculator'],
            ['call_bad', 'calculator'],
          ]);
          const results = sent.filter((message) => message.role === 'tool');
          expect(results.map((result) => result.tool_call_id)).toEqual(['call_good', 'call_bad']);
          expect(results[0]?.content).toBe('2');
          expect(results[1]?.content).toMatch(/^Error: the arguments of this call of calculator could not be read \(.*\), so it did not run\. You wrote: \{"expression": 2\+$/);
        }
      });
    });

    // A review of the above: a call without a name went back named '' (both providers refuse that: a 400 that
    // ended the run); a quote cut at 500 could split an emoji (a lone surrogate, JSON Anthropic refuses); and
    // results were paired by id, so a good call sharing its id with a bad one got the bad one's error.
    it('leaves out an unreadable call without a name, quotes whole characters, and pairs results by place', async () => {
      // The emoji's first half is the 500th character: a cut at 500 would keep it alone.
      const wide = `{"expression": "${'x'.repeat(483)}\u{1F600}`;
      const frames = [
        deltaFrame({ role: 'assistant', content: '' }),
        deltaFrame({ tool_calls: [{ index: 0, id: 'call_same', type: 'function', function: { name: 'calculator', arguments: '{"expression":"1+1"}' } }] }),
        deltaFrame({ tool_calls: [{ index: 1, id: 'call_same', type: 'function', function: { name: 'calculator', arguments: wide } }] }),
        deltaFrame({ tool_calls: [{ index: 2, id: 'call_nameless', type: 'function', function: { arguments: '{"x": 1}' } }] }),
        deltaFrame({}, 'tool_calls'),
        'data: [DONE]\n\n',
      ];
      type Sent = { role: string; content: string | null; tool_call_id?: string; tool_calls?: { id: string; function: { name: string; arguments: string } }[] };
      await scripted((body) => ((body.messages as Sent[]).at(-1)?.role === 'tool' ? { text: 'Done.' } : { frames }), async () => {
        const agent = createToolCallingAgent({ model: model({ model: 'scripted' }), tools: [calculatorTool()] });
        const before = server.requests.length;
        expect(await agent.invoke({ input: 'go' })).toBe('Done.');
        const sent = (server.requests[before + 1]?.body.messages ?? []) as Sent[];
        const calls = sent.find((message) => message.role === 'assistant')?.tool_calls ?? [];
        expect(calls.map((made) => made.function.name)).toEqual(['calculator', 'calculator']);
        const results = sent.filter((message) => message.role === 'tool').map((result) => result.content ?? '');
        expect(results[0]).toBe('2');
        expect(results[1]).toMatch(/^Error: the arguments of this call of calculator could not be read/);
        expect(results[1]).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/);
        expect(results[1]?.endsWith('x…')).toBe(true);
      });
    });

    // A probe: an agent given calls without ids (a compatible server's) answered each with a tool message whose
    // tool_call_id was '', while the assistant turn it sent back named them call_0 and call_1: no result paired
    // with its call (OpenAI and Anthropic refuse such a conversation).
    it('pairs each result of calls sent without ids with its call when the agent sends them back', async () => {
      const call = (index: number, expression: string) => deltaFrame({ tool_calls: [{ index, type: 'function', function: { name: 'calculator', arguments: JSON.stringify({ expression }) } }] });
      const frames = [deltaFrame({ role: 'assistant', content: '' }), call(0, '1+1'), call(1, '2+3'), deltaFrame({}, 'tool_calls'), 'data: [DONE]\n\n'];
      type Sent = { role: string; content: string | null; tool_call_id?: string; tool_calls?: { id: string; function: { arguments: string } }[] };
      await scripted((body) => ((body.messages as Sent[]).at(-1)?.role === 'tool' ? { text: 'Two and five.' } : { frames }), async () => {
        const agent = createToolCallingAgent({ model: model({ model: 'scripted' }), tools: [calculatorTool()] });
        for (const run of [() => agent.invoke({ input: '1+1 and 2+3?' }), async () => (await toArray(agent.stream({ input: '1+1 and 2+3?' }))).join('')]) {
          const before = server.requests.length;
          expect(await run()).toBe('Two and five.');
          const sent = (server.requests[before + 1]?.body.messages ?? []) as Sent[];
          const calls = sent.find((message) => message.role === 'assistant')?.tool_calls ?? [];
          const results = sent.filter((message) => message.role === 'tool');
          expect(new Set(calls.map((made) => made.id)).size).toBe(2);
          // Each result answers its own call: 1+1 → 2, 2+3 → 5.
          const paired = results.map((result) => [JSON.parse(calls.find((made) => made.id === result.tool_call_id)?.function.arguments ?? 'null'), result.content]);
          expect(paired).toEqual([[{ expression: '1+1' }, '2'], [{ expression: '2+3' }, '5']]);
        }
      });
    });
  }

  if (name === 'anthropic') {
    // A probe: `message_stop` without a `message_delta` (no stop_reason) was taken for `end_turn`, and cached.
    it('takes a stream whose message_stop came without a stop reason for one broken off: a 502, nothing cached', async () => {
      const cache = new InMemoryCache();
      await scripted(() => ({ text: 'Why did the cat sit?', anthropicUsage: { deltas: [] } }), async () => {
        await expect(model({ model: 'scripted', cache }).invoke('Tell me a joke')).rejects.toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_UNAVAILABLE' });
        expect(cache.size).toBe(0);
      });
    });
  }

  if (name === 'anthropic') {
    // A probe: a compatible server that sends a tool call's input whole in its `content_block_start` (Anthropic's is
    // `{}`, its arguments streamed after) was answered, and cached, as a call with no arguments.
    it('takes a tool call’s input sent whole at its block’s start, as the SDK does, unless arguments stream after it', async () => {
      const event = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
      const frames = [
        event('message_start', { message: { id: 'msg_odd', type: 'message', role: 'assistant', content: [], model: 'scripted', stop_reason: null, usage: { input_tokens: 10, output_tokens: 1 } } }),
        event('content_block_start', { index: 0, content_block: { type: 'tool_use', id: 'toolu_a', name: 'calculator', input: { expression: '2+2' } } }),
        event('content_block_stop', { index: 0 }),
        event('content_block_start', { index: 1, content_block: { type: 'tool_use', id: 'toolu_b', name: 'calculator', input: { expression: 'stale' } } }),
        event('content_block_delta', { index: 1, delta: { type: 'input_json_delta', partial_json: '' } }),
        event('content_block_delta', { index: 1, delta: { type: 'input_json_delta', partial_json: '{"expression":"3*3"}' } }),
        event('content_block_stop', { index: 1 }),
        event('message_delta', { delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 9 } }),
        event('message_stop', {}),
      ];
      await scripted(() => ({ frames }), async () => {
        const answer = await model({ model: 'scripted' }).invoke('What is 2+2 and 3*3?');
        expect(answer.tool_calls.map((call) => [call.id, call.args])).toEqual([
          ['toolu_a', { expression: '2+2' }],
          ['toolu_b', { expression: '3*3' }],
        ]);
        const streamed = AIMessageChunk.merge((await toArray(model({ model: 'scripted' }).stream('What is 2+2 and 3*3?'))) as AIMessageChunk[]);
        expect(streamed.tool_calls.map((call) => call.args)).toEqual([{ expression: '2+2' }, { expression: '3*3' }]);
      });
    });

    // A probe: an event without the object its type carries (`delta`, `content_block`, `message`) threw in the
    // adapter, and the whole answer failed with a 502.
    it('skips what an event without its object cannot say, and answers', async () => {
      const event = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
      const frames = [
        event('message_start', {}),
        event('content_block_start', { index: 0 }),
        event('content_block_delta', { index: 0 }),
        event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Four.' } }),
        event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 2 } }),
        event('message_delta', { usage: { output_tokens: 3 } }),
        event('message_stop', {}),
      ];
      await scripted(() => ({ frames }), async () => {
        const answer = await model({ model: 'scripted' }).invoke('What is 2+2?');
        expect([answer.text, answer.response_metadata.finish_reason, answer.usage_metadata?.output_tokens]).toEqual(['Four.', 'end_turn', 3]);
      });
    });

    // A probe: the SDK printed a deprecation warning on the console at every request for such a model.
    it('sends the SDK\'s warning for a deprecated model to the provider logger once (to the console once without one)', async () => {
      const printed = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
      const logged: unknown[][] = [];
      const record = (level: string) => (fields: Record<string, unknown>, message: string) => void logged.push([level, fields, message]);
      try {
        // No provider logger (a server started from one's own code): the console, once, prefixed (a review: the
        // stand-in called itself until the stack ran out, and the request failed).
        for (let i = 0; i < 3; i++) expect((await model({ model: 'claude-opus-4-5' }).invoke('hi')).text).toBe('Why did the cat sit?');
        expect(printed.mock.calls).toEqual([[expect.stringMatching(/^anthropic SDK: The model 'claude-opus-4-5' is deprecated/)]]);
        printed.mockClear();
        setProviderLogger({ error: record('error'), warn: record('warn'), info: record('info'), debug: record('debug') });
        for (let i = 0; i < 3; i++) expect((await model({ model: 'claude-sonnet-4-5' }).invoke('hi')).text).toBe('Why did the cat sit?');
        expect(printed).not.toHaveBeenCalled();
        expect(logged).toEqual([['warn', { provider_sdk: 'anthropic' }, expect.stringMatching(/^The model 'claude-sonnet-4-5' is deprecated/)]]);
        // Outside the SDK's call, console.warn is the console's again.
        console.warn('mine');
        expect(printed).toHaveBeenCalledWith('mine');
      } finally {
        setProviderLogger(undefined);
        printed.mockRestore();
      }
    });

    it('keeps an answer whose usage is missing, counts the prompt cache in input, and reads running totals once', async () => {
      const ask = async (anthropicUsage: ScriptedReply['anthropicUsage']) => {
        server.script = () => ({ text: 'Hello there', anthropicUsage });
        try {
          return await model({ model: 'scripted' }).invoke('hi');
        } finally {
          server.script = undefined;
        }
      };
      // A trial: no usage in message_start (or message_delta) turned the whole answer into a 502.
      const noStart = await ask({ start: null });
      expect(noStart.text).toBe('Hello there');
      expect(noStart.usage_metadata).toEqual({ input_tokens: 0, output_tokens: 5, total_tokens: 5 });
      const noDelta = await ask({ deltas: [null] });
      expect(noDelta.text).toBe('Hello there');
      expect(noDelta.usage_metadata).toEqual({ input_tokens: 10, output_tokens: 0, total_tokens: 10 });
      // Tokens written to and read from the prompt cache are input too (Anthropic counts them apart).
      // Each is said apart too, as LangChain names them: providers price them apart.
      const cached = await ask({ start: { input_tokens: 3, cache_creation_input_tokens: 100, cache_read_input_tokens: 200, output_tokens: 1 } });
      expect(cached.usage_metadata).toEqual({ input_tokens: 303, output_tokens: 5, total_tokens: 308, input_token_details: { cache_read: 200, cache_creation: 100 } });
      // Repeated in message_delta as running totals (as the API now sends them): counted once.
      const repeated = await ask({
        start: { input_tokens: 3, cache_creation_input_tokens: 0, cache_read_input_tokens: 200, output_tokens: 1 },
        deltas: [{ input_tokens: 3, cache_creation_input_tokens: 0, cache_read_input_tokens: 200, output_tokens: 5 }],
      });
      expect(repeated.usage_metadata).toEqual({ input_tokens: 203, output_tokens: 5, total_tokens: 208, input_token_details: { cache_read: 200 } });
      // message_delta's counts are running totals: two of them (4, then 8) are 8 tokens, not 12.
      const twice = await ask({ deltas: [{ output_tokens: 4 }, { output_tokens: 8 }] });
      expect(twice.usage_metadata).toEqual({ input_tokens: 10, output_tokens: 8, total_tokens: 18 });
    });

    // A probe: a model's empty answer kept in a chat's history went back as an assistant turn with no content, and
    // blank text as a text block of whitespace, both of which the Messages API refuses (400): every later turn of
    // that chat failed RUNNEL_ERR_PROVIDER_REJECTED.
    it('leaves out empty turns and blank text, which the Messages API refuses, so a chat with an empty answer goes on', async () => {
      type Sent = { role: string; content: { type: string; text?: string }[] };
      // Answers as Anthropic does: a request with an empty turn or a blank text block is refused (here mid-answer).
      const refuses = (messages: Sent[]) => messages.some((message) => message.content.length === 0 || message.content.some((block) => block.type === 'text' && block.text?.trim() === ''));
      const refusal = `event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: 'messages.1: all messages must have non-empty content' } })}\n\n`;
      const store = new MemoryHistoryStore();
      const chat = withMessageHistory(model({ model: 'scripted' }), { getHistory: (sessionId) => store.history(sessionId) });
      const config = { configurable: { session_id: 'empty-answer' } };
      let answer = '';
      await scripted((body) => (refuses(body.messages as Sent[]) ? { frames: [refusal] } : { text: answer }), async () => {
        expect((await chat.invoke('hi', config)).text).toBe('');
        answer = 'Hello again.';
        expect((await chat.invoke([new HumanMessage({ content: [{ type: 'text', text: ' ' }, { type: 'text', text: 'Still there?' }] })], config)).text).toBe('Hello again.');
        expect(server.requests.at(-1)?.body.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'text', text: 'Still there?' }] }]);
      });
    });
  }

  // A probe: every error the provider streamed after its answer began was UNAVAILABLE, a rate limit too.
  it('reads an error sent mid-answer by its type: rate limit, refusal, outage', async () => {
    for (const [scenario, code] of [
      ['midstream-rate-limited', 'RUNNEL_ERR_PROVIDER_RATE_LIMITED'],
      ['midstream-rejected', 'RUNNEL_ERR_PROVIDER_REJECTED'],
      ['midstream-overloaded', 'RUNNEL_ERR_PROVIDER_UNAVAILABLE'],
    ] as const) {
      const seen: string[] = [];
      const failure = await (async () => {
        for await (const chunk of model({ model: scenario }).stream('hi')) seen.push(chunk.text);
      })().catch((error: unknown) => error);
      expect([scenario, failure]).toEqual([scenario, expect.objectContaining({ code })]);
      expect(seen.join('')).not.toBe('');
    }
  });

  // A probe: an upstream that never ended its answer was read for as long as it streamed, every chunk held in
  // memory for the answer; only a client that went away, or a stall, stopped it.
  it('fails an answer that passes maxAnswerChunks with RUNNEL_ERR_PROVIDER_ANSWER_TOO_LONG, closes the request and caches nothing', async () => {
    const cache = new InMemoryCache();
    for (const read of ['invoke', 'stream'] as const) {
      const abandoned = server.nextAbandon();
      const endless = model({ model: 'endless', maxAnswerChunks: 500, cache });
      let seen = 0;
      const call =
        read === 'invoke'
          ? endless.invoke('hi')
          : (async () => {
              for await (const _chunk of endless.stream('hi')) seen += 1;
            })();
      await expect(call).rejects.toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_ANSWER_TOO_LONG', statusCode: 502, retryable: false });
      expect(seen).toBeLessThanOrEqual(500);
      await abandoned;
    }
    expect(cache.size).toBe(0);
    // A limit that is none (NaN would turn it off; 0 would fail every answer) is refused where the model is made.
    for (const maxAnswerChunks of [0, -1, 1.5, Number.NaN]) expect(() => model({ maxAnswerChunks })).toThrow(/maxAnswerChunks must be a whole number/);
  });

  // Left by a review: the limit counted chunks, not their size: an upstream streaming 64 KiB chunks held 12 GiB
  // before it reached 200,000 of them.
  it('fails an answer that passes maxAnswerChars, however few its chunks', async () => {
    const abandoned = server.nextAbandon();
    const wide = model({ model: 'wide', maxAnswerChars: 1_000_000 });
    let seen = 0;
    const reading = (async () => {
      for await (const _chunk of wide.stream('hi')) seen += 1;
    })();
    await expect(reading).rejects.toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_ANSWER_TOO_LONG', message: expect.stringContaining('1000000 characters (maxAnswerChars)') });
    expect(seen).toBeLessThan(20);
    await abandoned;
    for (const maxAnswerChars of [0, 2.5, Number.NaN]) expect(() => model({ maxAnswerChars })).toThrow(/maxAnswerChars must be a whole number/);
  });

  it('closes the upstream socket when the run is aborted mid-stream', async () => {
    const controller = new AbortController();
    const abandoned = server.nextAbandon();
    const stream = model({ model: 'slow' }).stream('hi', { signal: controller.signal });
    await stream.next();
    controller.abort();
    await expect(stream.next()).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    await settleWithin(abandoned, 2000);
  });

  // A probe: a server that sent the answer's end (`data: [DONE]`, `message_stop`) but held the connection open was
  // waited on until the idle timeout: the whole answer failed with a 504, and was not cached.
  it('takes an answer whose end was sent for whole though the server holds the connection open, and closes it', async () => {
    const cache = new InMemoryCache();
    for (const read of ['invoke', 'stream'] as const) {
      const abandoned = server.nextAbandon();
      const held = server.holdNext(1000);
      const call = read === 'invoke' ? model({ model: 'text', cache }).invoke('Tell me a joke') : toArray(model({ model: 'text' }).stream('Tell me a joke')).then((chunks) => AIMessageChunk.merge(chunks as AIMessageChunk[]));
      const answer = await settleWithin(call, 5000);
      await held;
      expect([read, answer.text, answer.response_metadata.finish_reason]).toEqual([read, 'Why did the cat sit?', STOP]);
      await settleWithin(abandoned, 2000);
    }
    expect(cache.size).toBe(1);
  });

  // A probe: an answer with no text and no tool call (a model that ended its turn at once) was cached, since a
  // stream always has chunks (the role's, the usage's): every retry got the empty answer again until it expired.
  it('passes on an empty answer but never caches it: the next call asks again', async () => {
    const cache = new InMemoryCache();
    await scripted(() => ({ text: ' ' }), async () => {
      const before = server.requests.length;
      for (let i = 0; i < 2; i++) {
        const answer = await model({ model: 'scripted', cache }).invoke('Tell me a joke');
        expect([answer.text.trim(), answer.response_metadata.finish_reason]).toEqual(['', STOP]);
      }
      expect(server.requests.length - before).toBe(2);
      expect(cache.size).toBe(0);
    });
  });

  it('caches whole answers: a second identical call makes no request; another parameter does', async () => {
    const cache = new InMemoryCache();
    const cached = model({ model: 'text', cache });
    const before = server.requests.length;
    const first = await cached.invoke('same question');
    const replay = await toArray(cached.stream('same question'));
    expect(server.requests.length - before).toBe(1);
    expect(replay.map((c) => c.text).join('')).toBe(first.text);
    await model({ model: 'text', cache, temperature: 0.9 }).invoke('same question');
    await cached.invoke('same question', { stop: ['x'] });
    expect(server.requests.length - before).toBe(3);
  });

  // A probe: two models of one provider on two servers (a local model and OpenAI, two vLLM hosts) shared one
  // cache entry — the second server was never asked, and its callers got the first one's answer.
  it('keeps the answers of two servers apart in one cache', async () => {
    const other = await startProviderServer(name);
    try {
      const cache = new InMemoryCache();
      await model({ model: 'text', cache }).invoke('which server?');
      const before = other.requests.length;
      await make(other, { maxRetries: 0, model: 'text', cache }).invoke('which server?');
      expect(other.requests.length - before).toBe(1);
      expect(cache.size).toBe(2);
      // A review: reading the endpoint made the SDK's client, which needs a key: a cache hit without one failed.
      const envKey = name === 'openai' ? 'OPENAI_API_KEY' : 'ANTHROPIC_API_KEY';
      const saved = process.env[envKey];
      delete process.env[envKey];
      try {
        const keyless = name === 'openai' ? new ChatOpenAI({ baseURL: server.url, model: 'text', cache, maxRetries: 0 }) : new ChatAnthropic({ baseURL: server.url, model: 'text', cache, maxRetries: 0 });
        expect((await keyless.invoke('which server?')).text).toBe('Why did the cat sit?');
      } finally {
        if (saved !== undefined) process.env[envKey] = saved;
      }
    } finally {
      await other.close();
    }
  });

  // A probe: /extract answered 502 RUNNEL_ERR_OUTPUT_PARSE (retryable) for a model's arguments of the wrong
  // type, and cached that answer: every retry failed from the cache for a day without reaching the model.
  it("caches no structured answer that fails its schema: the retry reaches the model, and a good answer is cached", async () => {
    const schema = z.object({ name: z.string() });
    let args: Record<string, unknown> = { name: 42 };
    await scripted(
      () => ({ toolCalls: [{ name: 'extract', args }] }),
      async () => {
        const cache = new InMemoryCache();
        const extract = model({ model: 'text', cache }).withStructuredOutput(schema);
        const before = server.requests.length;
        await expect(extract.invoke('I am Ada')).rejects.toMatchObject({ code: 'RUNNEL_ERR_OUTPUT_PARSE' });
        await expect(toArray(extract.stream('I am Ada'))).rejects.toMatchObject({ code: 'RUNNEL_ERR_OUTPUT_PARSE' });
        expect(server.requests.length - before).toBe(2);
        expect(cache.size).toBe(0);
        args = { name: 'Ada' };
        expect(await extract.invoke('I am Ada')).toEqual({ name: 'Ada' });
        expect(await extract.invoke('I am Ada')).toEqual({ name: 'Ada' });
        expect(server.requests.length - before).toBe(3);
        expect(cache.size).toBe(1);
      },
    );
  });

  // A review: a model piped into a JSON or structured parser cached the answer the parser then refused.
  it('caches no answer the parser after it refuses (JSON, structured), and caches one it takes', async () => {
    let text = 'Sure! Here is no JSON at all.';
    await scripted(
      () => ({ text }),
      async () => {
        for (const parser of [new JsonOutputParser(), StructuredOutputParser.fromZod(z.object({ name: z.string() }))]) {
          const cache = new InMemoryCache();
          const chain = ChatPromptTemplate.fromMessages([['human', '{q}']]).pipe(model({ model: 'text', cache })).pipe(parser);
          text = 'Sure! Here is no JSON at all.';
          const before = server.requests.length;
          await expect(chain.invoke({ q: 'who?' })).rejects.toMatchObject({ code: 'RUNNEL_ERR_OUTPUT_PARSE' });
          await expect(toArray(chain.stream({ q: 'who?' }))).rejects.toMatchObject({ code: 'RUNNEL_ERR_OUTPUT_PARSE' });
          expect([server.requests.length - before, cache.size]).toEqual([2, 0]);
          text = '{"name": "Ada"}';
          expect(await chain.invoke({ q: 'who?' })).toEqual({ name: 'Ada' });
          expect(await chain.invoke({ q: 'who?' })).toEqual({ name: 'Ada' });
          expect([server.requests.length - before, cache.size]).toEqual([3, 1]);
        }
      },
    );
  });

  it('works inside a prompt | model chain', async () => {
    const prompt = ChatPromptTemplate.fromMessages([['system', 'You are {persona}.'], ['human', '{question}']]);
    const answer = await prompt.pipe(model({ model: 'text' })).invoke({ persona: 'a cat', question: 'why?' });
    expect(answer.text).toBe('Why did the cat sit?');
  });
});
