/**
 * Issue 16: tool calling through `/v1/chat/completions`. A chain whose
 * messages adapter takes the client's tools gets them, and its model's tool
 * calls reach the client as OpenAI tool calls — whole, or streamed as
 * `delta.tool_calls` — and the client's tool results come back to it as tool
 * messages. The client is the real `openai` SDK, including its streaming
 * helper, which rebuilds the tool calls from the deltas. API keys are off:
 * callers are anonymous, as on every route.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChatAnthropic, ChatOpenAI, defineChain, lambda, ScriptedChatModel, type ChainSpec, type ChatTurn, type ToolDefinition } from '../../src/index.js';
import { startProviderServer, type ProviderServer } from '../support/provider-server.js';
import { startServer, type TestServer } from '../support/server.js';

/** A model that calls the first tool it is offered, then answers from the tool's result. */
const model = new ScriptedChatModel({
  respond: (request) => {
    const last = request.messages.at(-1);
    if (last?.type === 'tool') return `It is ${last.text} in Paris.`;
    const offered = request.params.tools?.[0];
    if (offered === undefined) return 'No tools were offered.';
    return { content: 'Let me look.', tool_calls: [{ name: offered.name, args: { city: 'Paris' }, id: 'call_weather_1' }] };
  },
});

/** A turn as a LangServe message. */
function message(turn: ChatTurn): Record<string, unknown> {
  switch (turn.role) {
    case 'system':
      return { type: 'system', content: turn.text };
    case 'user':
      return { type: 'human', content: turn.text };
    case 'assistant':
      return { type: 'ai', content: turn.text, tool_calls: (turn.tool_calls ?? []).map((call) => ({ ...call, type: 'tool_call' })) };
    case 'tool':
      return { type: 'tool', content: turn.text, tool_call_id: turn.tool_call_id };
  }
}

interface ToolsInput {
  messages: Record<string, unknown>[];
  tools: ToolDefinition[];
}

/** At a nested path: its model id has a slash. The model gets the client's tools bound for each request. */
const toolsChain = defineChain({
  path: '/team/tools',
  description: 'Answers with the tools the client offers',
  runnable: lambda((input: ToolsInput) => lambda((x: ToolsInput) => x.messages).pipe(model.bindTools(input.tools))),
  messages: {
    tools: true,
    toInput: ({ turns, tools }) => ({
      input: {
        messages: turns.map(message),
        tools: (tools ?? []).map((t) => ({ name: t.name, description: t.description ?? '', parameters: t.parameters ?? { type: 'object', properties: {} } })),
      },
    }),
  },
});

/** The same chain on Claude, through the real Anthropic wire format (the local provider server). */
function claudeChain(provider: ProviderServer) {
  const claude = new ChatAnthropic({ apiKey: 'sk-ant-test', baseURL: provider.url, model: 'claude-test', maxRetries: 0 });
  return defineChain({
    path: '/claude/tools',
    runnable: lambda((input: ToolsInput) => lambda((x: ToolsInput) => x.messages).pipe(claude.bindTools(input.tools))),
    messages: toolsChain.messages,
  });
}

/** The same chain on an OpenAI-compatible server (the local provider server, in OpenAI's wire format). */
function compatibleChain(provider: ProviderServer) {
  const compatible = new ChatOpenAI({ apiKey: 'sk-test', baseURL: provider.url, model: 'compatible', maxRetries: 0 });
  return defineChain({
    path: '/compat/tools',
    runnable: lambda((input: ToolsInput) => lambda((x: ToolsInput) => x.messages).pipe(compatible.bindTools(input.tools))),
    messages: toolsChain.messages,
  });
}

const weather: OpenAI.ChatCompletionTool = {
  type: 'function',
  function: { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
};
const ask: OpenAI.ChatCompletionMessageParam = { role: 'user', content: 'What is the weather in Paris?' };

let server: TestServer;
let client: OpenAI;
let anthropic: ProviderServer;
let openai: ProviderServer;
beforeAll(async () => {
  anthropic = await startProviderServer('anthropic');
  openai = await startProviderServer('openai');
  server = await startServer({}, [toolsChain, claudeChain(anthropic), compatibleChain(openai)] as ChainSpec<never, unknown>[]);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'anything: keys are off', maxRetries: 0 });
});
afterAll(async () => {
  await server.close();
  await anthropic.close();
  await openai.close();
});

describe('tools through /v1/chat/completions', () => {
  it("answers with the model's tool calls, in OpenAI's shape", async () => {
    const completion = await client.chat.completions.create({ model: 'team/tools', messages: [ask], tools: [weather], tool_choice: 'auto' });
    expect(completion.choices[0]).toMatchObject({
      finish_reason: 'tool_calls',
      message: {
        role: 'assistant',
        content: 'Let me look.',
        tool_calls: [{ id: 'call_weather_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
      },
    });
  });

  it('streams the tool calls as delta.tool_calls, which the SDK rebuilds', async () => {
    const stream = client.chat.completions.stream({ model: 'team/tools', messages: [ask], tools: [weather] });
    const deltas: OpenAI.ChatCompletionChunk[] = [];
    stream.on('chunk', (chunk) => deltas.push(chunk));
    const final = await stream.finalChatCompletion();
    expect(final.choices[0]?.finish_reason).toBe('tool_calls');
    expect(final.choices[0]?.message.content).toBe('Let me look.');
    expect(final.choices[0]?.message.tool_calls).toEqual([{ id: 'call_weather_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }]);
    // The arguments came in more than one piece, as the model streamed them.
    expect(deltas.filter((c) => c.choices[0]?.delta.tool_calls !== undefined).length).toBeGreaterThan(1);
  });

  it("hands the client's tool results back to the chain as tool messages", async () => {
    const completion = await client.chat.completions.create({
      model: 'team/tools',
      tools: [weather],
      messages: [
        ask,
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_weather_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool', tool_call_id: 'call_weather_1', content: [{ type: 'text', text: '18 °C' }] },
      ],
    });
    expect(completion.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: 'It is 18 °C in Paris.' } });
    expect(completion.choices[0]?.message.tool_calls).toBeUndefined();
    const seen = model.calls.at(-1) ?? [];
    expect(seen.map((m) => m.type)).toEqual(['human', 'ai', 'tool']);
    expect(seen[1]).toMatchObject({ tool_calls: [{ id: 'call_weather_1', name: 'get_weather', args: { city: 'Paris' } }] });
    expect(seen[2]).toMatchObject({ tool_call_id: 'call_weather_1' });
    // A call without arguments, as some providers and clients send it (`""`; OpenAI takes it): the empty object.
    await client.chat.completions.create({
      model: 'team/tools',
      tools: [weather],
      messages: [ask, { role: 'assistant', content: null, tool_calls: [{ id: 'call_here', type: 'function', function: { name: 'get_weather', arguments: '' } }] }, { role: 'tool', tool_call_id: 'call_here', content: '18 °C' }],
    });
    expect(model.calls.at(-1)?.[1]).toMatchObject({ tool_calls: [{ id: 'call_here', name: 'get_weather', args: {} }] });
  });

  // Left by the thirty-sixth session's probe: a result no call asked for went to the provider, which refused it,
  // and the client got a 502 where OpenAI answers 400.
  it('refuses a tool result that answers no call of the assistant message before it: a 400 naming it, as OpenAI answers', async () => {
    const calling = { role: 'assistant' as const, content: null, tool_calls: [{ id: 'call_a', type: 'function' as const, function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] };
    const cases: [OpenAI.Chat.ChatCompletionMessageParam[], number][] = [
      // No call at all.
      [[ask, { role: 'tool', tool_call_id: 'call_a', content: '18 °C' }], 1],
      // A call of another id.
      [[ask, calling, { role: 'tool', tool_call_id: 'call_b', content: '18 °C' }], 2],
      // The call's turn is over: a user message came between.
      [[ask, calling, { role: 'tool', tool_call_id: 'call_a', content: '18 °C' }, ask, { role: 'tool', tool_call_id: 'call_a', content: '19 °C' }], 4],
    ];
    const before = model.calls.length;
    for (const [messages, index] of cases) {
      const failed = await client.chat.completions.create({ model: 'team/tools', tools: [weather], messages }).catch((error: unknown) => error);
      expect(failed).toBeInstanceOf(OpenAI.BadRequestError);
      expect(failed).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'invalid_value', param: `messages[${index}].tool_call_id` });
    }
    // Nothing reached the chain's model.
    expect(model.calls.length).toBe(before);
    // Two results of one answer's two calls, each after the other, are taken.
    const two = { ...calling, tool_calls: [...calling.tool_calls, { id: 'call_b', type: 'function' as const, function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] };
    const answered = await client.chat.completions.create({
      model: 'team/tools',
      tools: [weather],
      messages: [ask, two, { role: 'tool', tool_call_id: 'call_a', content: '18 °C' }, { role: 'tool', tool_call_id: 'call_b', content: '19 °C' }],
    });
    expect(answered.choices[0]?.message.content).toBe('It is 19 °C in Paris.');
  });

  it("tool_choice 'none' keeps the tools from the chain; 'required' is refused", async () => {
    const none = await client.chat.completions.create({ model: 'team/tools', messages: [ask], tools: [weather], tool_choice: 'none' });
    expect(none.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: 'No tools were offered.' } });
    const failed = await client.chat.completions.create({ model: 'team/tools', messages: [ask], tools: [weather], tool_choice: 'required' }).catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(OpenAI.BadRequestError);
    expect(failed).toMatchObject({ param: 'tool_choice', code: 'invalid_value' });
  });

  it('lists the chain as a model whose id keeps its inner slash', async () => {
    const models = [];
    for await (const m of client.models.list()) models.push(m.id);
    expect(models).toEqual(['team/tools', 'claude/tools', 'compat/tools']);
  });

  // A probe: Claude numbers its tool calls by content block, after the text's (1, 2), and those numbers were sent
  // as OpenAI's indexes; the SDK rebuilt `[<empty>, call, call]`, which it cannot send back.
  it("streams Claude's parallel tool calls at OpenAI's indexes, 0 and 1, which the SDK rebuilds and sends back", async () => {
    anthropic.script = () => ({ text: 'Let me look.', toolCalls: [{ name: 'get_weather', args: { city: 'Paris' } }, { name: 'get_weather', args: { city: 'Oslo' } }] });
    const stream = client.chat.completions.stream({ model: 'claude/tools', messages: [ask], tools: [weather] });
    const indexes = new Set<number>();
    stream.on('chunk', (chunk) => chunk.choices[0]?.delta.tool_calls?.forEach((call) => indexes.add(call.index)));
    const final = await stream.finalChatCompletion();
    expect([...indexes]).toEqual([0, 1]);
    const message = final.choices[0]?.message;
    expect(final.choices[0]?.finish_reason).toBe('tool_calls');
    expect(message?.tool_calls?.map((call) => call.type === 'function' && [call.id, call.function.name, call.function.arguments])).toEqual([
      ['toolu_sc0', 'get_weather', '{"city":"Paris"}'],
      ['toolu_sc1', 'get_weather', '{"city":"Oslo"}'],
    ]);
    // The assistant's turn goes back as the SDK rebuilt it, with the tools' results.
    anthropic.script = () => ({ text: 'Paris 18 °C, Oslo 9 °C.' });
    const next = await client.chat.completions.create({
      model: 'claude/tools',
      tools: [weather],
      messages: [ask, { role: 'assistant', content: message?.content ?? null, tool_calls: message?.tool_calls ?? [] }, { role: 'tool', tool_call_id: 'toolu_sc0', content: '18 °C' }, { role: 'tool', tool_call_id: 'toolu_sc1', content: '9 °C' }],
    });
    expect(next.choices[0]?.message.content).toBe('Paris 18 °C, Oslo 9 °C.');
  });

  // A probe: a compatible server's tool-call deltas without `index` went out as deltas of call 0 — every one of
  // them, the second call's name and id too — so the SDK rebuilt one call of both calls' arguments.
  it("streams the tool calls of a server that sends deltas without an index as two calls the SDK rebuilds", async () => {
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
      `data: ${JSON.stringify({ id: 'chatcmpl-ni', object: 'chat.completion.chunk', created: 1764500000, model: 'compatible', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    const call = (fields: Record<string, unknown>) => chunk({ tool_calls: [{ type: 'function', ...fields }] });
    openai.script = () => ({
      frames: [
        chunk({ role: 'assistant', content: '' }),
        call({ id: 'call_p', function: { name: 'get_weather', arguments: '' } }),
        call({ id: 'call_p', function: { name: 'get_weather', arguments: '{"city":' } }),
        call({ function: { arguments: '"Paris"}' } }),
        call({ id: 'call_o', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }),
        chunk({}, 'tool_calls'),
        'data: [DONE]\n\n',
      ],
    });
    try {
      const final = await client.chat.completions.stream({ model: 'compat/tools', messages: [ask], tools: [weather] }).finalChatCompletion();
      expect(final.choices[0]?.finish_reason).toBe('tool_calls');
      expect(final.choices[0]?.message.tool_calls?.map((made) => made.type === 'function' && [made.id, made.function.name, made.function.arguments])).toEqual([
        ['call_p', 'get_weather', '{"city":"Paris"}'],
        ['call_o', 'get_weather', '{"city":"Oslo"}'],
      ]);
    } finally {
      openai.script = undefined;
    }
  });

  // A probe: a tool call the provider cut at its token limit streamed as `finish_reason: "tool_calls"`, so the
  // SDK rebuilt a call to run whose arguments were `{"city": "Par`; the same answer unstreamed said `length`.
  it("says finish_reason length for tool calls the provider cut at its token limit, streamed or not, as OpenAI does", async () => {
    openai.script = () => ({ text: 'Let me look.', toolCalls: [{ name: 'get_weather', args: '{"city": "Par' }], finish: 'length' });
    try {
      const streamed = await client.chat.completions.stream({ model: 'compat/tools', messages: [ask], tools: [weather] }).finalChatCompletion();
      expect(streamed.choices[0]?.finish_reason).toBe('length');
      const whole = await client.chat.completions.create({ model: 'compat/tools', messages: [ask], tools: [weather] });
      expect(whole.choices[0]?.finish_reason).toBe('length');
      // A whole call before the cut: still not an answer that ended asking for tools.
      openai.script = () => ({ toolCalls: [{ name: 'get_weather', args: { city: 'Paris' } }], finish: 'length' });
      const cut = await client.chat.completions.create({ model: 'compat/tools', messages: [ask], tools: [weather] });
      expect(cut.choices[0]?.finish_reason).toBe('length');
    } finally {
      openai.script = undefined;
    }
  });

  // A probe: a call whose arguments do not parse ({"city": Rome}, [1]) was streamed as the model wrote it, but left
  // out of the whole answer — one of such calls alone answered content "" with finish_reason stop, as if the
  // model had said nothing. OpenAI passes the arguments on as generated, for the client to validate.
  it('answers calls whose arguments do not parse as the model wrote them, streamed or not, as OpenAI does', async () => {
    const calls = (choice: OpenAI.ChatCompletion['choices'][number] | undefined) => [choice?.finish_reason, choice?.message.tool_calls?.map((call) => (call.type === 'function' ? call.function.arguments : ''))];
    try {
      openai.script = () => ({ toolCalls: [{ name: 'get_weather', args: { city: 'Paris' } }, { name: 'get_weather', args: '{"city": Rome}' }] });
      const expected = ['tool_calls', ['{"city":"Paris"}', '{"city": Rome}']];
      expect(calls((await client.chat.completions.stream({ model: 'compat/tools', messages: [ask], tools: [weather] }).finalChatCompletion()).choices[0])).toEqual(expected);
      expect(calls((await client.chat.completions.create({ model: 'compat/tools', messages: [ask], tools: [weather] })).choices[0])).toEqual(expected);
      openai.script = () => ({ toolCalls: [{ name: 'get_weather', args: '[1]' }] });
      expect(calls((await client.chat.completions.create({ model: 'compat/tools', messages: [ask], tools: [weather] })).choices[0])).toEqual(['tool_calls', ['[1]']]);
    } finally {
      openai.script = undefined;
    }
  });
});
