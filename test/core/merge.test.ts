import { describe, expect, it, vi } from 'vitest';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { AIMessageChunk, asSnapshot, ChunkSum, collect, concat, generator, lambda } from '../../src/index.js';

class Chunk {
  constructor(readonly text: string, readonly count = 1) {}
  concat(other: Chunk): Chunk {
    return new Chunk(this.text + other.text, this.count + other.count);
  }
}

describe('concat', () => {
  it('concatenates strings and arrays', () => {
    expect(concat('Hel', 'lo')).toBe('Hello');
    expect(concat([1], [2, 3])).toEqual([1, 2, 3]);
  });

  it('merges plain objects key-wise, recursively for mergeable values', () => {
    expect(concat({ a: 'He', n: { t: 'x' }, keep: 1 }, { a: 'y', n: { t: 'z', u: [1] }, add: true })).toEqual({
      a: 'Hey',
      n: { t: 'xz', u: [1] },
      keep: 1,
      add: true,
    });
  });

  it('lets objects with a concat method merge themselves (how message chunks plug in)', () => {
    const merged = concat(new Chunk('a'), new Chunk('b'));
    expect(merged).toBeInstanceOf(Chunk);
    expect(merged).toEqual(new Chunk('ab', 2));
    expect(concat({ message: new Chunk('x') }, { message: new Chunk('y') })).toEqual({ message: new Chunk('xy', 2) });
  });

  it('lets the later value win where values cannot be added', () => {
    expect(concat(1, 2)).toBe(2);
    expect(concat({ n: 1 }, { n: 2 })).toEqual({ n: 2 });
    expect(concat(undefined, 'a')).toBe('a');
  });

  it('collects a whole stream', async () => {
    async function* parts(): AsyncGenerator<string> {
      yield 'a';
      yield 'b';
    }
    expect(await collect(parts())).toBe('ab');
  });
});

describe('an observed stream of snapshots', () => {
  // A JSON parser's every chunk is a whole snapshot of the object so far: the run's output is the last one, and
  // the ones before it must be let go as they are replaced (kept until the end, n snapshots of a growing object
  // are quadratic memory).
  it('lets go of each snapshot once a later one replaces it', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const refs: WeakRef<object>[] = [];
    const snapshots = generator<unknown, object>(async function* (inputs) {
      for await (const _ of inputs) void _;
      for (let i = 0; i < 5; i++) {
        const snapshot = asSnapshot({ items: Array.from({ length: i + 1 }, (_, j) => `item ${j}`) });
        refs.push(new WeakRef(snapshot));
        yield snapshot;
      }
    });
    let last: unknown;
    let held = -1;
    for await (const event of snapshots.streamEvents(null)) {
      if (event.event === 'on_chain_end') last = event.data.output;
      if (event.event !== 'on_chain_stream' || refs.length !== 4) continue;
      // The fourth snapshot streamed: the first three are replaced.
      await new Promise((resolve) => setImmediate(resolve));
      gc();
      held = refs.slice(0, 3).filter((ref) => ref.deref() !== undefined).length;
    }
    expect(held).toBe(0);
    expect(last).toEqual({ items: ['item 0', 'item 1', 'item 2', 'item 3', 'item 4'] });
  });
});

describe('ChunkSum', () => {
  it('adds up as concat does pairwise, message chunks among other chunks included', () => {
    const message = (text: string, args?: string): AIMessageChunk =>
      new AIMessageChunk({ content: text, tool_call_chunks: args === undefined ? [] : [{ index: 0, id: args === '{"a"' ? 'c1' : undefined, name: args === '{"a"' ? 't' : undefined, args }] });
    const runs: unknown[][] = [
      [message('He'), message('l', '{"a"'), message('lo', ':1}')],
      [undefined, message('a'), message('b')],
      ['text', message('a'), message('b')],
      [{ k: 'v' }, { k: 'w' }, message('a'), message('b')],
      [new Chunk('x'), message('b'), message('c')],
      [message('a'), message('b'), asSnapshot({ o: 'whole' })],
      [{ o: 'a' }, asSnapshot({ o: 'b' }), { o: 'c' }],
      // A review: a snapshot message chunk was added to the held-back ones ('HelHello') instead of replacing them.
      [asSnapshot(message('Hel')), asSnapshot(message('Hello'))],
      [message('a'), message('b'), asSnapshot(message('whole')), message('!')],
    ];
    for (const chunks of runs) {
      const pairwise = chunks.slice(1).reduce((acc, chunk) => concat(acc, chunk), chunks[0]);
      const sum = new ChunkSum<unknown>();
      for (const chunk of chunks) sum.push(chunk);
      expect(JSON.parse(JSON.stringify(sum.value()))).toEqual(JSON.parse(JSON.stringify(pairwise)));
    }
  });
});

describe('a step that takes its input whole', () => {
  // A lambda after a model collects the model's chunks: a concat per chunk re-read the tool calls' arguments so
  // far at every one, as the observed runs' sums did.
  it('adds up message chunks once, not once per chunk', async () => {
    const merges = vi.spyOn(AIMessageChunk, 'merge');
    try {
      const model = generator<unknown, AIMessageChunk>(async function* (inputs) {
        for await (const _ of inputs) void _;
        for (let i = 0; i < 100; i++) yield new AIMessageChunk({ content: 'a', tool_call_chunks: [{ index: 0, ...(i === 0 ? { id: 'c1', name: 't' } : {}), args: i === 0 ? '{"x":"' : i === 99 ? '"}' : 'y' }] });
      });
      const chain = model.pipe(lambda((message: AIMessageChunk) => ({ text: message.content, args: message.tool_calls[0]?.args })));
      const outputs: unknown[] = [];
      for await (const output of chain.stream(null)) outputs.push(output);
      expect(outputs).toEqual([{ text: 'a'.repeat(100), args: { x: 'y'.repeat(98) } }]);
      expect(merges.mock.calls.length).toBeLessThan(5);
    } finally {
      merges.mockRestore();
    }
  });
});
