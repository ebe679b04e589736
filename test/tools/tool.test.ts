import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { lambda, ToolMessage, tool, type StreamEvent } from '../../src/index.js';
import { toArray } from '../helpers.js';

const add = tool(({ a, b }) => a + b, {
  name: 'add',
  description: 'Adds two numbers',
  schema: z.object({ a: z.number(), b: z.number() }),
});

describe('tool', () => {
  it('runs on its arguments and has run type tool', async () => {
    expect(await add.invoke({ a: 1, b: 2 })).toBe(3);
    const events = await toArray(add.streamEvents({ a: 1, b: 2 }));
    expect(events.map((e: StreamEvent) => e.event)).toEqual(['on_tool_start', 'on_tool_end']);
  });

  it('answers a tool call with a ToolMessage', async () => {
    const message = (await add.invoke({ name: 'add', args: { a: 2, b: 3 }, id: 'call_1', type: 'tool_call' })) as ToolMessage;
    expect(message).toBeInstanceOf(ToolMessage);
    expect(message.toJSON()).toMatchObject({ type: 'tool', content: '5', tool_call_id: 'call_1', name: 'add', status: 'success' });
  });

  it('gives invalid arguments back to the model as an error ToolMessage, not a crash', async () => {
    const message = (await add.invoke({ name: 'add', args: { a: 'two' }, id: 'call_2', type: 'tool_call' })) as ToolMessage;
    expect(message.status).toBe('error');
    expect(message.text).toMatch(/invalid arguments for add: a: .*; b: /);
    await expect(add.invoke({ a: 'two' } as never)).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
  });

  it('reports a failing function as an error ToolMessage too', async () => {
    const broken = tool(() => { throw new Error('disk full'); }, { name: 'save', description: 'Saves', schema: z.object({}) });
    const message = (await broken.invoke({ name: 'save', args: {}, id: 'c', type: 'tool_call' })) as ToolMessage;
    expect(message).toMatchObject({ status: 'error', content: 'Error: save failed: disk full' });
  });

  it('exposes its arguments as JSON Schema for binding, and runs nested runnables as its children', async () => {
    expect(add.inputJsonSchema()).toMatchObject({ type: 'object', properties: { a: { type: 'number' } }, required: ['a', 'b'] });
    const inner = lambda((x: number) => x * 2, { name: 'double' });
    const doubler = tool(async ({ x }) => inner.invoke(x), { name: 'doubler', description: 'Doubles', schema: z.object({ x: z.number() }) });
    const events = await toArray(doubler.streamEvents({ x: 4 }));
    const start = events.find((e) => e.event === 'on_tool_start');
    expect(events.find((e) => e.name === 'double')?.parent_ids).toEqual([start?.run_id]);
    expect(() => tool(() => 1, { name: 'bad name!', description: '', schema: z.object({}) })).toThrow(/Tool names/);
  });
});
