/**
 * The hand-written iterators on every chunk's path (a parser's map, a
 * generator step's scope, a step that collects its input first) behave as
 * the async generators they replace: order, skips, errors, and closing the
 * source when the reader stops early or a step throws.
 */
import { describe, expect, it } from 'vitest';
import { ChatPromptTemplate, FakeListChatModel, generator, lambda, mapChunks, sequence, SKIP, StringOutputParser, type StreamEvent } from '../../src/index.js';
import { toArray } from '../helpers.js';

/** A source of `items` that records whether its `finally` ran. */
function source<T>(items: T[], log: string[], fail?: Error): AsyncGenerator<T> {
  return (async function* () {
    try {
      for (const item of items) yield item;
      if (fail !== undefined) throw fail;
    } finally {
      log.push('closed');
    }
  })();
}

describe('mapChunks', () => {
  it('maps in order and drops what maps to SKIP', async () => {
    const log: string[] = [];
    expect(await toArray(mapChunks(source([1, 2, 3, 4], log), (n) => (n % 2 === 0 ? SKIP : n * 10)))).toEqual([10, 30]);
    expect(log).toEqual(['closed']);
  });

  it('closes the source when the function throws, and when the reader stops early', async () => {
    const log: string[] = [];
    const mapped = mapChunks(source([1, 2, 3], log), (n) => {
      if (n === 2) throw new Error('bad chunk');
      return n;
    });
    await expect(toArray(mapped)).rejects.toThrow('bad chunk');
    expect(log).toEqual(['closed']);
    const early: string[] = [];
    for await (const n of mapChunks(source([1, 2, 3], early), (n) => n)) if (n === 1) break;
    expect(early).toEqual(['closed']);
  });

  it("passes the source's error on", async () => {
    const log: string[] = [];
    await expect(toArray(mapChunks(source([1], log, new Error('source broke')), (n) => n))).rejects.toThrow('source broke');
  });

  it('answers done after the reader left, without reading the source again; a source that throws at once rejects', async () => {
    const log: string[] = [];
    const mapped = mapChunks(source([1, 2, 3], log), (n) => n);
    expect((await mapped.next()).value).toBe(1);
    await mapped.return(undefined);
    expect(await mapped.next()).toEqual({ done: true, value: undefined });
    expect(log).toEqual(['closed']);
    const broken = { [Symbol.asyncIterator]: (): AsyncIterator<number> => ({ next: () => { throw new Error('at once'); } }) };
    await expect(mapChunks(broken, (n) => n).next()).rejects.toThrow('at once');
  });

  it('does not open the source before the first pull', async () => {
    let opened = false;
    const lazy = { [Symbol.asyncIterator]: () => ((opened = true), source([1], [])) };
    const mapped = mapChunks(lazy, (n) => n);
    expect(opened).toBe(false);
    expect(await toArray(mapped)).toEqual([1]);
  });
});

describe('generator steps and collecting steps', () => {
  it('runs a generator step in its scope on every chunk, and its finally in scope when the reader leaves', async () => {
    const seen: string[][] = [];
    const inner = lambda((x: string, config) => {
      seen.push([...(config.tags ?? [])]);
      return x;
    });
    const step = generator(async function* (chunks: AsyncIterable<string>) {
      try {
        for await (const chunk of chunks) yield await inner.invoke(chunk);
      } finally {
        await inner.invoke('cleanup');
      }
    });
    const chain = sequence(
      generator(async function* () {
        yield 'a';
        yield 'b';
        yield 'c';
      }),
      step,
    );
    for await (const chunk of chain.stream(undefined, { tags: ['t'] })) if (chunk === 'b') break;
    // The nested calls (each chunk, then the cleanup after the reader left) inherited the call's tags.
    expect(seen.length).toBe(3);
    expect(seen.every((tags) => tags.includes('t'))).toBe(true);
  });

  it("passes a generator step's error on, and never starts a step whose reader left first", async () => {
    let started = false;
    const failing = sequence(
      generator(async function* () {
        yield 'a';
        throw new Error('step broke');
      }),
      generator(async function* (chunks: AsyncIterable<string>) {
        for await (const chunk of chunks) yield chunk.toUpperCase();
      }),
    );
    const seen: string[] = [];
    await expect(
      (async () => {
        for await (const chunk of failing.stream(undefined)) seen.push(chunk as string);
      })(),
    ).rejects.toThrow('step broke');
    expect(seen).toEqual(['A']);
    const lazy = generator(async function* () {
      started = true;
      yield 1;
    }).stream(undefined);
    await lazy.return(undefined);
    expect(started).toBe(false);
  });

  it('streams a model after its prompt (it collects the prompt first), and leaves cleanly', async () => {
    const chain = ChatPromptTemplate.fromMessages([['human', 'about {topic}']])
      .pipe(new FakeListChatModel({ responses: ['one two three'] }))
      .pipe(new StringOutputParser());
    expect(await toArray(chain.stream({ topic: 'x' }))).toEqual(['one', ' two', ' three']);
    const stream = chain.stream({ topic: 'x' });
    expect((await stream.next()).value).toBe('one');
    expect(await stream.return(undefined)).toEqual({ done: true, value: undefined });
    // A prompt that fails fails the stream.
    await expect(toArray(chain.stream({} as never))).rejects.toMatchObject({ code: expect.stringMatching(/^RUNNEL_ERR_/) });
  });

  it('reports the same events as before through the fast iterators', async () => {
    const chain = ChatPromptTemplate.fromMessages([['human', 'about {topic}']])
      .pipe(new FakeListChatModel({ responses: ['one two'] }))
      .pipe(new StringOutputParser());
    const events: StreamEvent[] = await toArray(chain.streamEvents({ topic: 'x' }));
    const parserChunks = events.filter((e) => e.event === 'on_parser_stream').map((e) => e.data.chunk);
    expect(parserChunks).toEqual(['one', ' two']);
    expect(events.at(-1)).toMatchObject({ event: 'on_chain_end', data: { output: 'one two' } });
  });
});
