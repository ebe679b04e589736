import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createToolCallingAgent, FakeToolCallingModel, ToolMessage, tool, type StreamEvent } from '../../src/index.js';
import { deferred, toArray } from '../helpers.js';

const multiply = tool(({ a, b }) => a * b, { name: 'multiply', description: 'Multiplies', schema: z.object({ a: z.number(), b: z.number() }) });

describe('createToolCallingAgent', () => {
  it('loops model → tools → model until a final answer', async () => {
    const model = new FakeToolCallingModel({
      responses: [
        { tool_calls: [{ name: 'multiply', args: { a: 17, b: 23 }, id: 'c1' }] },
        'The product is 391.',
      ],
    });
    const agent = createToolCallingAgent({ model, tools: [multiply] });
    expect(await agent.invoke({ input: 'What is 17 * 23?' })).toBe('The product is 391.');
    const second = model.calls[1] ?? [];
    const toolMessage = second.at(-1) as ToolMessage;
    expect(toolMessage).toBeInstanceOf(ToolMessage);
    expect(toolMessage.text).toBe('391');
    expect(second.map((m) => m.type)).toEqual(['system', 'human', 'ai', 'tool']);
  });

  it('runs the tool calls of one answer concurrently', async () => {
    const bothStarted = deferred();
    let started = 0;
    const wait = tool(
      async ({ id }) => {
        started += 1;
        if (started === 2) bothStarted.resolve();
        await bothStarted.promise; // deadlocks unless both calls run at once
        return id;
      },
      { name: 'wait', description: 'Waits', schema: z.object({ id: z.string() }) },
    );
    const model = new FakeToolCallingModel({
      responses: [{ tool_calls: [{ name: 'wait', args: { id: 'x' } }, { name: 'wait', args: { id: 'y' } }] }, 'done'],
    });
    expect(await createToolCallingAgent({ model, tools: [wait] }).invoke({ input: 'go' })).toBe('done');
  });

  it('streams the final answer token by token and emits tool events', async () => {
    const model = new FakeToolCallingModel({ responses: [{ tool_calls: [{ name: 'multiply', args: { a: 2, b: 3 } }] }, 'It is six.'] });
    const agent = createToolCallingAgent({ model, tools: [multiply] });
    expect(await toArray(agent.stream({ input: '2*3?' }))).toEqual(['It', ' is', ' six.']);
    const events: StreamEvent[] = await toArray(
      createToolCallingAgent({ model: new FakeToolCallingModel({ responses: [{ tool_calls: [{ name: 'multiply', args: { a: 2, b: 3 } }] }, 'six'] }), tools: [multiply] }).streamEvents({ input: 'x' }),
    );
    expect(events.filter((e) => e.event.startsWith('on_tool')).map((e) => e.event)).toEqual(['on_tool_start', 'on_tool_end']);
    expect(events.filter((e) => e.event === 'on_chat_model_start')).toHaveLength(2);
  });

  // A probe with a real client: a model that said a few words before its tool call ("Let me compute.") had
  // them streamed, glued to the answer, while invoke answered the last step's text alone.
  it('answers with what the model said in every step, the same invoked as streamed', async () => {
    const responses = () => [{ content: 'Let me compute.', tool_calls: [{ name: 'multiply', args: { a: 2, b: 3 } }] }, { tool_calls: [{ name: 'multiply', args: { a: 6, b: 1 } }] }, 'It is six.'];
    const agent = () => createToolCallingAgent({ model: new FakeToolCallingModel({ responses: responses() }), tools: [multiply] });
    const invoked = await agent().invoke({ input: '2*3?' });
    expect(invoked).toBe('Let me compute.\n\nIt is six.');
    const streamed = await toArray(agent().stream({ input: '2*3?' }));
    expect(streamed.join('')).toBe(invoked);
    expect(streamed.length).toBeGreaterThan(2);
  });

  it('tells the model about an unknown tool instead of crashing', async () => {
    const model = new FakeToolCallingModel({ responses: [{ tool_calls: [{ name: 'divide', args: {} }] }, 'ok'] });
    expect(await createToolCallingAgent({ model, tools: [multiply] }).invoke({ input: 'x' })).toBe('ok');
    expect((model.calls[1]?.at(-1) as ToolMessage).text).toMatch(/no tool named divide/);
  });

  it('stops with a clear error at maxIterations', async () => {
    const model = new FakeToolCallingModel({ responses: [{ tool_calls: [{ name: 'multiply', args: { a: 1, b: 1 } }] }] });
    const agent = createToolCallingAgent({ model, tools: [multiply], maxIterations: 3 });
    await expect(agent.invoke({ input: 'loop' })).rejects.toMatchObject({ code: 'RUNNEL_ERR_AGENT_MAX_ITERATIONS' });
    expect(model.calls).toHaveLength(3);
    await expect(agent.invoke({ nope: 1 } as never)).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
  });
});
