import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  AIMessageChunk,
  collect,
  CommaSeparatedListOutputParser,
  FakeListChatModel,
  generator,
  JsonOutputParser,
  lambda,
  sequence,
  StringOutputParser,
  StructuredOutputParser,
} from '../../src/index.js';
import { toArray } from '../helpers.js';

const chunks = (...texts: string[]) =>
  generator(async function* () {
    for (const text of texts) yield new AIMessageChunk(text);
  });

describe('StringOutputParser', () => {
  it('streams the text of message chunks as they come', async () => {
    const chain = sequence(chunks('Hel', 'lo', ''), new StringOutputParser());
    expect(await toArray(chain.stream(undefined))).toEqual(['Hel', 'lo']);
    expect(await new StringOutputParser().invoke(new AIMessageChunk('whole'))).toBe('whole');
    expect(await new StringOutputParser().invoke('plain')).toBe('plain');
  });
});

describe('JsonOutputParser', () => {
  it('streams ever more complete objects as the model types, through a ```json fence', async () => {
    const chain = sequence(chunks('Here:\n```json\n{"na', 'me": "Ad', 'a", "tags": ["x"', ', "y"]}\n```'), new JsonOutputParser());
    const snapshots = await toArray(chain.stream(undefined));
    expect(snapshots).toEqual([{}, { name: 'Ad' }, { name: 'Ada', tags: ['x'] }, { name: 'Ada', tags: ['x', 'y'] }]);
    // Snapshots replace each other when a stream is collected, rather than adding up.
    expect(await collect(chain.stream(undefined))).toEqual({ name: 'Ada', tags: ['x', 'y'] });
    expect(await chain.invoke(undefined)).toEqual({ name: 'Ada', tags: ['x', 'y'] });
    const downstream = sequence(chain, lambda((value: unknown) => value));
    expect(await collect(downstream.stream(undefined))).toEqual({ name: 'Ada', tags: ['x', 'y'] });
  });

  it('fails with RUNNEL_ERR_OUTPUT_PARSE carrying the text when the answer is not JSON', async () => {
    await expect(new JsonOutputParser().invoke('Sorry, I cannot.')).rejects.toMatchObject({
      code: 'RUNNEL_ERR_OUTPUT_PARSE',
      detail: { text: 'Sorry, I cannot.' },
    });
    await expect(toArray(sequence(chunks('not', ' json'), new JsonOutputParser()).stream(undefined))).rejects.toMatchObject({
      code: 'RUNNEL_ERR_OUTPUT_PARSE',
    });
  });
});

describe('StructuredOutputParser', () => {
  const parser = StructuredOutputParser.fromZod(z.object({ name: z.string(), age: z.number().int() }));

  it('parses and validates, with format instructions naming the schema', async () => {
    expect(await parser.invoke('```json\n{"name": "Ada", "age": 36}\n```')).toEqual({ name: 'Ada', age: 36 });
    expect(parser.getFormatInstructions()).toContain('"age"');
    expect(parser.outputJsonSchema()).toMatchObject({ properties: { name: { type: 'string' }, age: { type: 'integer' } } });
  });

  it('carries the raw text and the zod issues on failure', async () => {
    const error = await parser.invoke('{"name": "Ada", "age": "old"}').catch((e: unknown) => e);
    expect(error).toMatchObject({
      code: 'RUNNEL_ERR_OUTPUT_PARSE',
      detail: { text: '{"name": "Ada", "age": "old"}', issues: [{ loc: ['age'], type: 'invalid_type' }] },
    });
  });
});

describe('CommaSeparatedListOutputParser', () => {
  it('splits on commas, streaming each item once complete', async () => {
    const chain = sequence(chunks('red, gr', 'een,', ' blue'), new CommaSeparatedListOutputParser());
    expect(await toArray(chain.stream(undefined))).toEqual([['red'], ['green'], ['blue']]);
    expect(await chain.invoke(undefined)).toEqual(['red', 'green', 'blue']);
  });

  it('works after a model', async () => {
    const model = new FakeListChatModel({ responses: ['cats, dogs, birds'] });
    expect(await model.pipe(new CommaSeparatedListOutputParser()).invoke('pets?')).toEqual(['cats', 'dogs', 'birds']);
  });
});
