import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { assign, branch, lambda, parallel, passthrough, pick, Runnable, sequence, type Run } from '../../src/index.js';

const topicToText = lambda((x: { topic: string }) => `about ${x.topic}`).withTypes({
  input: z.object({ topic: z.string() }),
  output: z.string(),
});
const textToLength = lambda((s: string) => s.length).withTypes({ input: z.string(), output: z.number().int() });

describe('schemas', () => {
  it('a lambda is unknown unless typed', () => {
    const plain = lambda((x: number) => x);
    expect(plain.inputJsonSchema()).toEqual({ title: 'RunnableLambdaInput' });
    const typed = lambda((x: number) => x, { input: z.number(), output: z.number() });
    expect(typed.inputJsonSchema()).toMatchObject({ type: 'number' });
  });

  it('a sequence takes the input of its first step and the output of its last', () => {
    const chain = sequence(topicToText, textToLength);
    expect(chain.inputJsonSchema()).toMatchObject({
      title: 'RunnableSequenceInput',
      type: 'object',
      properties: { topic: { type: 'string' } },
      required: ['topic'],
    });
    expect(chain.outputJsonSchema()).toMatchObject({ type: 'integer' });
  });

  it('a parallel outputs an object of its branch outputs', () => {
    const both = parallel({ text: topicToText, same: passthrough() });
    expect(both.outputJsonSchema()).toMatchObject({
      type: 'object',
      properties: { text: { type: 'string' }, same: { type: 'object', properties: { topic: { type: 'string' } } } },
      required: ['text', 'same'],
    });
    expect(both.inputJsonSchema()).toMatchObject({ properties: { topic: { type: 'string' } } });
  });

  it('assign extends its input with the new keys, pick keeps the picked keys', () => {
    const chain = sequence(topicToText.pipe((text: string) => ({ text, n: 1 })).withTypes({
      output: z.object({ text: z.string(), n: z.number() }),
    }), assign({ length: textToLength.pipe((n: number) => n) as never }));
    const withLength = sequence(
      lambda((x: { text: string }) => x).withTypes({ input: z.object({ text: z.string() }), output: z.object({ text: z.string() }) }),
      assign({ length: lambda((x: { text: string }) => x.text.length, { output: z.number() }) }),
    );
    expect(withLength.outputJsonSchema()).toMatchObject({
      properties: { text: { type: 'string' }, length: { type: 'number' } },
      required: ['text', 'length'],
    });
    const picked = sequence(withLength, pick('length'));
    expect(picked.outputJsonSchema()).toMatchObject({ type: 'number' });
    const pickedMany = withLength.pick(['text']);
    expect(pickedMany.outputJsonSchema()).toMatchObject({ type: 'object', properties: { text: { type: 'string' } } });
    void chain;
  });

  it('passthrough is identity, a branch outputs the union of its branches', () => {
    expect(sequence(topicToText, passthrough()).outputJsonSchema()).toMatchObject({ type: 'string' });
    const either = branch<{ topic: string }, number | string>([(x: { topic: string }) => x.topic === 'n', topicToText.pipe(textToLength)], topicToText);
    expect(either.outputJsonSchema()).toMatchObject({ anyOf: [{ type: 'integer' }, { type: 'string' }] });
  });
});

class Model extends Runnable<string, string> {
  readonly name = 'Model';
  temperature = 0.7;
  model = 'small';
  protected override async _call(input: string, _run: Run): Promise<string> {
    return `${this.model}@${this.temperature}: ${input}`;
  }
}

describe('configurable fields and alternatives', () => {
  const model = new Model().configurableFields({
    temperature: { id: 'temperature', name: 'Temperature', description: 'Sampling temperature', schema: z.number().min(0).max(2) },
    model: { id: 'model_name' },
  });
  const other = lambda((input: string) => `other: ${input}`, { name: 'Other' });
  const chain = sequence((x: { q: string }) => x.q, model.configurableAlternatives({ id: 'llm', alternatives: { other } }));

  it('lists every configurable field reachable in the chain, alternatives as an enum', () => {
    expect(chain.configJsonSchema()).toEqual({
      title: 'RunnableSequenceConfig',
      type: 'object',
      properties: {
        configurable: {
          title: 'Configurable',
          type: 'object',
          properties: {
            llm: { title: 'Llm', type: 'string', enum: ['default', 'other'], default: 'default' },
            temperature: { title: 'Temperature', description: 'Sampling temperature', type: 'number', minimum: 0, maximum: 2, default: 0.7 },
            model_name: { title: 'Model Name', type: 'string', default: 'small' },
          },
        },
      },
    });
    expect(lambda((x: number) => x).configJsonSchema()).toEqual({ title: 'RunnableLambdaConfig', type: 'object', properties: {} });
  });

  it('applies configurable values per call without changing the runnable', async () => {
    expect(await chain.invoke({ q: 'hi' })).toBe('small@0.7: hi');
    expect(await chain.invoke({ q: 'hi' }, { configurable: { temperature: 0, model_name: 'big' } })).toBe('big@0: hi');
    expect(await chain.invoke({ q: 'hi' }, { configurable: { llm: 'other' } })).toBe('other: hi');
    expect(await chain.invoke({ q: 'hi' })).toBe('small@0.7: hi');
  });

  it('rejects invalid values with RUNNEL_ERR_CONFIG_INVALID and a loc', async () => {
    await expect(chain.invoke({ q: 'hi' }, { configurable: { temperature: 5 } })).rejects.toMatchObject({
      code: 'RUNNEL_ERR_CONFIG_INVALID',
      statusCode: 422,
      detail: [{ loc: ['configurable', 'temperature'] }],
    });
    await expect(chain.invoke({ q: 'hi' }, { configurable: { model_name: 3 } })).rejects.toMatchObject({ code: 'RUNNEL_ERR_CONFIG_INVALID' });
    await expect(chain.invoke({ q: 'hi' }, { configurable: { llm: 'missing' } })).rejects.toMatchObject({ code: 'RUNNEL_ERR_CONFIG_INVALID' });
    await expect(chain.invoke({ q: 'hi' }, { configurable: { llm: '__proto__' } })).rejects.toMatchObject({ code: 'RUNNEL_ERR_CONFIG_INVALID' });
  });

  it('refuses to make a field configurable that the runnable does not have', () => {
    expect(() => new Model().configurableFields({ nope: { id: 'nope' } })).toThrow(/no field 'nope'/);
  });
});
