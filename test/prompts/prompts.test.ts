import { describe, expect, it } from 'vitest';
import {
  AIMessage,
  ChatPromptTemplate,
  ChatPromptValue,
  FewShotChatMessagePromptTemplate,
  HumanMessage,
  MessagesPlaceholder,
  PromptTemplate,
  StringPromptValue,
  SystemMessage,
} from '../../src/index.js';

describe('PromptTemplate', () => {
  it('fills {variables} and keeps {{ }} as literal braces', async () => {
    const prompt = PromptTemplate.fromTemplate('Say {word} as JSON: {{"word": "{word}"}}');
    expect(prompt.inputVariables).toEqual(['word']);
    const value = await prompt.invoke({ word: 'hi' });
    expect(value).toBeInstanceOf(StringPromptValue);
    expect(value.toString()).toBe('Say hi as JSON: {"word": "hi"}');
    expect(value.toJSON()).toEqual({ type: 'StringPromptValue', text: 'Say hi as JSON: {"word": "hi"}' });
  });

  it('takes partial variables, which the input may still override', async () => {
    const prompt = PromptTemplate.fromTemplate('{greeting}, {name}', { partialVariables: { greeting: 'Hello' } });
    expect(prompt.inputVariables).toEqual(['name']);
    expect((await prompt.invoke({ name: 'Ada' })).toString()).toBe('Hello, Ada');
    expect((await prompt.partial({ name: 'Bob' }).invoke({})).toString()).toBe('Hello, Bob');
  });

  // A probe: a function partial rendered as '' (its JSON), where LangChain calls it.
  it('calls a partial variable that is a function at each formatting; invoke awaits an async one', async () => {
    let calls = 0;
    const prompt = PromptTemplate.fromTemplate('{stamp} {name}', { partialVariables: { stamp: () => `call ${++calls}` } });
    expect((await prompt.invoke({ name: 'Ada' })).toString()).toBe('call 1 Ada');
    expect(prompt.format({ name: 'Bob' })).toBe('call 2 Bob');
    // Given in the input, the partial is not called.
    expect((await prompt.invoke({ name: 'Cy', stamp: 'mine' })).toString()).toBe('mine Cy');
    expect(calls).toBe(2);
    const later = PromptTemplate.fromTemplate('{day}: {task}', { partialVariables: { day: async () => 'Monday' } });
    expect((await later.invoke({ task: 'ship' })).toString()).toBe('Monday: ship');
    expect(() => later.format({ task: 'ship' })).toThrow(/'day' is an async function: format the prompt with invoke/);
    const chat = ChatPromptTemplate.fromMessages([['system', 'Today is {day}.'], ['human', '{task}']]).partial({ day: async () => 'Monday' });
    expect((await chat.invoke({ task: 'ship' })).messages.map((message) => message.text)).toEqual(['Today is Monday.', 'ship']);
  });

  it('names a missing variable', async () => {
    await expect(PromptTemplate.fromTemplate('{a} and {b}').invoke({ a: 1 })).rejects.toMatchObject({
      code: 'RUNNEL_ERR_INPUT_INVALID',
      message: expect.stringContaining("'b'"),
      detail: [{ loc: ['b'], type: 'missing' }],
    });
  });

  it('refuses a malformed template at construction', () => {
    expect(() => PromptTemplate.fromTemplate('oops {unclosed')).toThrow(/unmatched/);
    expect(() => PromptTemplate.fromTemplate('oops }')).toThrow(/single '}'/);
  });

  it('derives its input schema: one string per variable, partials optional', () => {
    const prompt = PromptTemplate.fromTemplate('{a} {b}', { partialVariables: { b: 'x' } });
    expect(prompt.inputJsonSchema()).toMatchObject({ type: 'object', properties: { a: { type: 'string' }, b: { type: 'string' } }, required: ['a'] });
  });
});

describe('ChatPromptTemplate', () => {
  const prompt = ChatPromptTemplate.fromMessages([
    ['system', 'You are {persona}.'],
    new MessagesPlaceholder('history'),
    ['placeholder', '{extra}'],
    ['human', '{question}'],
  ]);

  it('formats role tuples, placeholders and literal messages into a ChatPromptValue', async () => {
    const value = await prompt.invoke({
      persona: 'terse',
      history: [['human', 'hi'], { type: 'ai', content: 'hello' }],
      question: 'why?',
    });
    expect(value).toBeInstanceOf(ChatPromptValue);
    expect(value.messages.map((m) => [m.type, m.text])).toEqual([
      ['system', 'You are terse.'],
      ['human', 'hi'],
      ['ai', 'hello'],
      ['human', 'why?'],
    ]);
    expect(value.toString()).toBe('System: You are terse.\nHuman: hi\nAI: hello\nHuman: why?');
    expect(value.toJSON()).toMatchObject({ type: 'ChatPromptValueConcrete', messages: [{ type: 'system', content: 'You are terse.' }, {}, {}, {}] });
  });

  it('requires a placeholder unless it is optional', async () => {
    await expect(prompt.invoke({ persona: 'p', question: 'q' })).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID', detail: [{ loc: ['history'] }] });
    const optional = ChatPromptTemplate.fromMessages([new MessagesPlaceholder({ variableName: 'history', optional: true }), ['human', '{q}']]);
    expect((await optional.invoke({ q: 'x' })).messages).toHaveLength(1);
  });

  it('derives an input schema with a string per variable and a message list per placeholder', () => {
    const schema = prompt.inputJsonSchema() as { properties: Record<string, { type?: string }>; required: string[] };
    expect(schema.properties.persona?.type).toBe('string');
    expect(schema.properties.history?.type).toBe('array');
    expect(schema.required.sort()).toEqual(['history', 'persona', 'question']);
  });

  it('includes few-shot examples', async () => {
    const fewShot = new FewShotChatMessagePromptTemplate({
      examples: [
        { input: '2+2', output: '4' },
        { input: '2+3', output: '5' },
      ],
      examplePrompt: ChatPromptTemplate.fromMessages([['human', '{input}'], ['ai', '{output}']]),
    });
    const withExamples = ChatPromptTemplate.fromMessages([new SystemMessage('You add.'), fewShot, ['human', '{input}']]);
    const messages = (await withExamples.invoke({ input: '3+3' })).messages;
    expect(messages.map((m) => m.text)).toEqual(['You add.', '2+2', '4', '2+3', '5', '3+3']);
    expect(messages[2]).toBeInstanceOf(AIMessage);
    expect(messages[5]).toBeInstanceOf(HumanMessage);
  });

  it('templates text parts and image URLs of content blocks', async () => {
    const vision = ChatPromptTemplate.fromMessages([
      ['human', [{ type: 'text', text: 'What is in {what}?' }, { type: 'image_url', image_url: { url: '{url}' } }]],
    ]);
    const [message] = (await vision.invoke({ what: 'this', url: 'https://example.test/cat.png' })).messages;
    expect(message?.content).toEqual([
      { type: 'text', text: 'What is in this?' },
      { type: 'image_url', image_url: { url: 'https://example.test/cat.png' } },
    ]);
  });

  it('runs as a prompt: on_prompt_start and on_prompt_end, no stream events', async () => {
    const events: string[] = [];
    for await (const event of ChatPromptTemplate.fromTemplate('{q}').streamEvents({ q: 'x' })) events.push(event.event);
    expect(events).toEqual(['on_prompt_start', 'on_prompt_end']);
  });
});
