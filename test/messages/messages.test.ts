import { describe, expect, it } from 'vitest';
import {
  AIMessage,
  AIMessageChunk,
  ChatMessage,
  coerceMessage,
  coerceMessages,
  concat,
  HumanMessage,
  SystemMessage,
  ToolMessage,
  fromOpenAIChunk,
} from '../../src/index.js';

describe('message JSON', () => {
  it('serializes exactly as PROTOCOL.md shows', () => {
    expect(JSON.parse(JSON.stringify(new HumanMessage('hi')))).toEqual({
      type: 'human',
      content: 'hi',
      additional_kwargs: {},
      response_metadata: {},
      name: null,
      id: null,
    });
    const ai = new AIMessage({
      content: 'Hello',
      id: 'run-1',
      response_metadata: { model_name: 'm', finish_reason: 'stop' },
      tool_calls: [{ name: 'search', args: { q: 'cats' }, id: 'call_1' }],
      usage_metadata: { input_tokens: 3, output_tokens: 4, total_tokens: 7 },
    });
    expect(JSON.parse(JSON.stringify(ai))).toEqual({
      type: 'ai',
      content: 'Hello',
      additional_kwargs: {},
      response_metadata: { model_name: 'm', finish_reason: 'stop' },
      name: null,
      id: 'run-1',
      tool_calls: [{ name: 'search', args: { q: 'cats' }, id: 'call_1', type: 'tool_call' }],
      invalid_tool_calls: [],
      usage_metadata: { input_tokens: 3, output_tokens: 4, total_tokens: 7 },
    });
    expect(new ToolMessage({ content: 'r', tool_call_id: 'call_1' }).toJSON()).toMatchObject({ type: 'tool', tool_call_id: 'call_1', artifact: null, status: 'success' });
    expect(new ChatMessage({ content: 'too long', role: 'critic' }).toJSON()).toMatchObject({ type: 'chat', role: 'critic' });
    const chunk = new AIMessageChunk({ content: '', tool_call_chunks: [{ name: 'search', args: '{"q":', id: 'call_1', index: 0 }] });
    expect(chunk.toJSON()).toMatchObject({
      type: 'AIMessageChunk',
      tool_call_chunks: [{ name: 'search', args: '{"q":', id: 'call_1', index: 0, type: 'tool_call_chunk' }],
    });
  });

  it('round-trips through JSON', () => {
    const messages = [
      new SystemMessage('s'),
      new HumanMessage({ content: [{ type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAA' } }] }),
      new AIMessage({ content: 'a', tool_calls: [{ name: 't', args: { x: 1 }, id: 'c1' }] }),
      new ToolMessage({ content: 'r', tool_call_id: 'c1', status: 'error' }),
      new ChatMessage({ content: 'c', role: 'critic' }),
    ];
    const back = coerceMessages(JSON.parse(JSON.stringify(messages)));
    expect(back.map((m) => m.constructor.name)).toEqual(['SystemMessage', 'HumanMessage', 'AIMessage', 'ToolMessage', 'ChatMessage']);
    expect(back.map((m) => m.toJSON())).toEqual(messages.map((m) => m.toJSON()));
  });
});

describe('coercion', () => {
  it('accepts strings, tuples, OpenAI-style objects and the JS client extras', () => {
    expect(coerceMessage('hi')).toBeInstanceOf(HumanMessage);
    expect(coerceMessage(['ai', 'hello'])).toBeInstanceOf(AIMessage);
    expect(coerceMessage(['system', 'be kind'])).toBeInstanceOf(SystemMessage);
    expect(coerceMessage({ role: 'user', content: 'u' })).toBeInstanceOf(HumanMessage);
    expect(coerceMessage({ role: 'assistant', content: 'a' })).toBeInstanceOf(AIMessage);
    expect(coerceMessage({ role: 'tool', content: 'r', tool_call_id: 'c' })).toMatchObject({ tool_call_id: 'c' });
    expect(coerceMessage({ type: 'human', content: 'x', example: false })).toBeInstanceOf(HumanMessage);
    expect(coerceMessage({ type: 'generic', content: 'x', role: 'critic' })).toMatchObject({ role: 'critic', type: 'chat' });
    const assistant = coerceMessage({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }],
    }) as AIMessage;
    expect(assistant.tool_calls).toEqual([{ name: 'f', args: { a: 1 }, id: 'c1', type: 'tool_call' }]);
  });

  it('never revives lc constructor payloads, and locates what is wrong', () => {
    const lc = { lc: 1, type: 'constructor', id: ['langchain_core', 'messages', 'HumanMessage'], kwargs: { content: 'x' } };
    expect(() => coerceMessage(lc)).toThrow(expect.objectContaining({ code: 'RUNNEL_ERR_INPUT_INVALID' }));
    try {
      coerceMessages([{ type: 'human', content: 'ok' }, { type: 'ai', content: 42 }], ['messages']);
      expect.unreachable();
    } catch (error) {
      expect((error as { detail: { loc: unknown[] }[] }).detail[0]?.loc.slice(0, 2)).toEqual(['messages', 1]);
    }
    expect(() => coerceMessages('nope')).toThrow(/list of messages/);
  });
});

describe('chunk merge', () => {
  it('concatenates content, merges tool-call chunks by index into tool calls, adds usage', () => {
    const parts = [
      new AIMessageChunk({ content: 'Let', id: 'm1', tool_call_chunks: [{ index: 0, id: 'c1', name: 'search', args: '{"q": "ca' }] }),
      new AIMessageChunk({ content: ' me', tool_call_chunks: [{ index: 0, args: 'ts"}' }, { index: 1, id: 'c2', name: 'add', args: '{"a": 1' }] }),
      new AIMessageChunk({ content: '', tool_call_chunks: [{ index: 1, args: ', "b": 2}' }], usage_metadata: { input_tokens: 5, output_tokens: 2, total_tokens: 7 } }),
      new AIMessageChunk({ content: '', usage_metadata: { input_tokens: 0, output_tokens: 3, total_tokens: 3 } }),
    ];
    const whole = parts.reduce((a, b) => concat(a, b));
    expect(whole).toBeInstanceOf(AIMessageChunk);
    expect(whole.content).toBe('Let me');
    expect(whole.id).toBe('m1');
    expect(whole.tool_calls).toEqual([
      { name: 'search', args: { q: 'cats' }, id: 'c1', type: 'tool_call' },
      { name: 'add', args: { a: 1, b: 2 }, id: 'c2', type: 'tool_call' },
    ]);
    expect(whole.usage_metadata).toEqual({ input_tokens: 5, output_tokens: 5, total_tokens: 10 });
    expect(whole.toMessage()).toBeInstanceOf(AIMessage);
    expect(whole.toMessage().tool_calls).toHaveLength(2);
  });

  it('puts arguments that are not a JSON object into invalid_tool_calls', () => {
    const bad = new AIMessageChunk({ content: '', tool_call_chunks: [{ index: 0, id: 'c1', name: 'f', args: '[1, 2]' }] });
    expect(bad.tool_calls).toEqual([]);
    expect(bad.invalid_tool_calls).toEqual([{ name: 'f', args: '[1, 2]', id: 'c1', error: expect.any(String), type: 'invalid_tool_call' }]);
  });

  it('shows partial tool-call arguments while they stream', () => {
    const partial = new AIMessageChunk({ content: '', tool_call_chunks: [{ index: 0, id: 'c', name: 'f', args: '{"city": "Par' }] });
    expect(partial.tool_calls[0]?.args).toEqual({ city: 'Par' });
  });
});

// A probe: an OpenAI-compatible server that repeats a call's id and name in every delta made
// `calculatorcalculatorcalculator`, a tool no agent has.
describe('tool-call chunks', () => {
  it('take a name or id sent again whole once, and join one sent in pieces', () => {
    const repeated = AIMessageChunk.merge(
      ['{"expression"', ': "2 + 3"', '}'].map((args) => new AIMessageChunk({ content: '', tool_call_chunks: [{ index: 0, id: 'call_r', name: 'calculator', args }] })),
    );
    expect(repeated.tool_calls).toEqual([expect.objectContaining({ name: 'calculator', id: 'call_r', args: { expression: '2 + 3' } })]);
    const pieces = AIMessageChunk.merge([
      new AIMessageChunk({ content: '', tool_call_chunks: [{ index: 0, id: 'call_', name: 'calc', args: '{' }] }),
      new AIMessageChunk({ content: '', tool_call_chunks: [{ index: 0, id: 'p', name: 'ulator', args: '}' }] }),
    ]);
    expect(pieces.tool_calls).toEqual([expect.objectContaining({ name: 'calculator', id: 'call_p', args: {} })]);
  });
});

describe('fromOpenAIChunk', () => {
  const chunk = (choices: unknown[]) => ({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices }) as unknown as Parameters<typeof fromOpenAIChunk>[0];
  it('reads the first choice only, and a refusal as the answer', () => {
    // Two choices interleaved (n > 1): only index 0 is the answer.
    expect(fromOpenAIChunk(chunk([{ index: 1, delta: { content: 'B0' }, finish_reason: null }]))).toBeUndefined();
    expect(fromOpenAIChunk(chunk([{ index: 1, delta: { content: 'B1' }, finish_reason: null }, { index: 0, delta: { content: 'A1' }, finish_reason: null }]))?.text).toBe('A1');
    expect(fromOpenAIChunk(chunk([{ index: 0, delta: { content: null, refusal: "I'm sorry, " }, finish_reason: null }]))?.text).toBe("I'm sorry, ");
    // Content in parts (some compatible servers) stays parts: a refusal is read only where there is no content.
    expect(fromOpenAIChunk(chunk([{ index: 0, delta: { content: [{ type: 'text', text: 'x' }], refusal: null }, finish_reason: null }]))?.content).toEqual([{ type: 'text', text: 'x' }]);
  });
});
