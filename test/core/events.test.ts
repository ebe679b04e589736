import { describe, expect, it } from 'vitest';
import {
  dispatchCustomEvent,
  FakeListChatModel,
  generator,
  lambda,
  parallel,
  Runnable,
  sequence,
  StringOutputParser,
  type RunLogPatch,
  type RunType,
  type StreamEvent,
} from '../../src/index.js';
import { toArray } from '../helpers.js';
import { logOutput } from '../../src/core/stream-log.js';

/** A component that declares its run type, as prompts and parsers do. */
class Upper extends Runnable<string, string> {
  readonly name = 'Upper';
  override readonly runType: RunType = 'parser';
  protected override async *_transform(inputs: AsyncIterable<string>): AsyncGenerator<string> {
    for await (const chunk of inputs) yield chunk.toUpperCase();
  }
}

/** Every run that starts ends exactly once, with an end or an error event. */
function expectBalanced(events: StreamEvent[]): void {
  const started = events.filter((e) => e.event.endsWith('_start')).map((e) => e.run_id);
  const ended = events.filter((e) => e.event.endsWith('_end') || e.event.endsWith('_error')).map((e) => e.run_id);
  expect(new Set(started).size).toBe(started.length);
  expect([...ended].sort()).toEqual([...started].sort());
}

describe('streamEvents', () => {
  it('emits the events of a streaming sequence in order, with parents and run types', async () => {
    const words = generator(async function* () {
      yield 'a';
      yield 'b';
    });
    const chain = sequence(words, new Upper());
    const events = await toArray(chain.streamEvents(undefined, { runName: '/demo', metadata: { __internal: 1, user: 'u' } }));
    expect(events.map((e) => `${e.event}:${e.name}`)).toEqual([
      'on_chain_start:/demo',
      'on_chain_start:RunnableGenerator',
      'on_chain_stream:RunnableGenerator',
      'on_parser_start:Upper',
      'on_parser_stream:Upper',
      'on_chain_stream:/demo',
      'on_chain_stream:RunnableGenerator',
      'on_parser_stream:Upper',
      'on_chain_stream:/demo',
      'on_chain_end:RunnableGenerator',
      'on_parser_end:Upper',
      'on_chain_end:/demo',
    ]);
    const root = events[0] as StreamEvent;
    expect(root.parent_ids).toEqual([]);
    expect(root.data).toEqual({ input: undefined });
    for (const event of events.slice(1)) {
      if (event.name !== '/demo') expect(event.parent_ids).toEqual([root.run_id]);
    }
    expect(events.every((e) => !('__internal' in e.metadata) && e.metadata.user === 'u')).toBe(true);
    expect(events.at(-1)?.data.output).toBe('AB');
    expect(events.find((e) => e.event === 'on_parser_end')?.data).toEqual({ output: 'AB', input: 'ab' });
    expectBalanced(events);
  });

  it('balances start and end events for every run, including failures', async () => {
    const chain = sequence(
      parallel({ ok: (x: number) => x, fails: () => Promise.reject(new Error('branch failed')) }),
      (x: unknown) => x,
    );
    const events: StreamEvent[] = [];
    await expect(
      (async () => {
        for await (const event of chain.streamEvents(1)) events.push(event);
      })(),
    ).rejects.toThrow('branch failed');
    expectBalanced(events);
    expect(events.at(-1)?.event).toBe('on_chain_error');
  });

  it('turns dispatchCustomEvent into on_custom_event under the lambda run', async () => {
    const step = lambda(
      async (x: number) => {
        dispatchCustomEvent('progress', { done: 0.5 });
        return x;
      },
      { name: 'worker' },
    );
    const events = await toArray(step.streamEvents(1));
    const custom = events.find((e) => e.event === 'on_custom_event') as StreamEvent;
    expect(custom.name).toBe('progress');
    expect(custom.data).toEqual({ done: 0.5 });
    expect(custom.run_id).toBe(events[0]?.run_id);
    expect(() => dispatchCustomEvent('outside', {})).toThrow(/inside a running lambda/);
  });

  it('filters by name, type and tag', async () => {
    const chain = sequence(lambda((x: string) => x, { name: 'keep' }), new Upper()).withConfig({ tags: ['root'] });
    const byType = await toArray(chain.streamEvents('x', {}, { includeTypes: ['parser'] }));
    expect(new Set(byType.map((e) => e.name))).toEqual(new Set(['Upper']));
    const byName = await toArray(chain.streamEvents('x', {}, { includeNames: ['keep'] }));
    expect(new Set(byName.map((e) => e.name))).toEqual(new Set(['keep']));
    const excluded = await toArray(chain.streamEvents('x', {}, { excludeTags: ['seq:step:1'] }));
    expect(excluded.some((e) => e.name === 'keep')).toBe(false);
    expect(excluded.some((e) => e.name === 'Upper')).toBe(true);
  });

  it('delivers the same events to config callbacks', async () => {
    const received: StreamEvent[] = [];
    const chain = sequence((x: number) => `${x}`, new Upper());
    const streamed = await toArray(chain.streamEvents(1, { callbacks: [(e) => void received.push(e)] }));
    expect(received).toEqual(streamed);
    const viaInvoke: StreamEvent[] = [];
    await chain.invoke(1, { callbacks: [(e) => void viaInvoke.push(e)] });
    expect(viaInvoke.map((e) => e.event)).toContain('on_parser_end');
    expectBalanced(viaInvoke);
  });

  it('lets a callback fail without failing the run', async () => {
    const step = lambda((x: number) => x * 2);
    const output = await step.invoke(2, {
      callbacks: [
        () => {
          throw new Error('observer bug');
        },
        async () => Promise.reject(new Error('async observer bug')),
      ],
    });
    expect(output).toBe(4);
  });

  it('streams events of a model invoked inside a lambda as they happen', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const inner = lambda((x: number) => x + 1, { name: 'inner' });
    const outer = lambda(
      async (x: number) => {
        const y = await inner.invoke(x);
        await gate;
        return y;
      },
      { name: 'outer' },
    );
    const events = outer.streamEvents(1);
    const seen: string[] = [];
    for (;;) {
      const { value } = await events.next();
      seen.push(`${value?.event}:${value?.name}`);
      if (value?.event === 'on_chain_end') break;
    }
    // The inner run's end arrives while the outer run is still waiting.
    expect(seen).toEqual(['on_chain_start:outer', 'on_chain_start:inner', 'on_chain_end:inner']);
    release();
    expect((await toArray(events)).map((e) => e.event)).toEqual(['on_chain_stream', 'on_chain_end']);
  });
});

describe('streamLog', () => {
  function apply(doc: any, patch: RunLogPatch): any {
    for (const op of patch.ops) {
      if (op.path === '') {
        doc = structuredClone(op.value);
        continue;
      }
      const parts = op.path.slice(1).split('/').map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
      const last = parts.pop() as string;
      const parent = parts.reduce((node, key) => node[key], doc);
      if (last === '-') parent.push(op.value);
      else parent[last] = op.value;
    }
    return doc;
  }

  it('builds the run log with JSON Patch, sub-runs under /logs with :N for repeated names', async () => {
    const chain = sequence(
      (x: number) => x + 1,
      (x: number) => x * 2,
    );
    const patches = await toArray(chain.streamLog(1, { runName: '/add' }));
    expect(patches[0]?.ops[0]).toMatchObject({ op: 'replace', path: '', value: { streamed_output: [], final_output: null, logs: {}, name: '/add', type: 'chain' } });
    const log = patches.reduce(apply, null);
    expect(log.final_output).toBe(4);
    expect(log.streamed_output).toEqual([4]);
    expect(Object.keys(log.logs)).toEqual(['RunnableLambda', 'RunnableLambda:2']);
    expect(log.logs['RunnableLambda:2']).toMatchObject({ final_output: { output: 4 }, tags: ['seq:step:2'], type: 'chain' });
    expect(typeof log.logs.RunnableLambda.end_time).toBe('string');
  });

  it("gives each sub-run's final_output the shape of LangServe's run log", () => {
    const message = { type: 'AIMessageChunk', content: [{ type: 'text', text: 'hi' }, ' there'] };
    expect(logOutput('llm', message)).toEqual({ generations: [[{ text: 'hi there', generation_info: null, type: 'ChatGenerationChunk', message }]], llm_output: null, run: null, type: 'LLMResult' });
    expect(logOutput('retriever', [{ id: 'd' }])).toEqual({ documents: [{ id: 'd' }] });
    expect(logOutput('prompt', 'text')).toBe('text');
    expect(logOutput('tool', { a: 1 })).toEqual({ output: { a: 1 } });
    expect(logOutput('chain', { a: 1 })).toEqual({ a: 1 });
    expect(logOutput('parser', 'x')).toEqual({ output: 'x' });
    expect(logOutput('chain', new Date(0))).toEqual({ output: new Date(0) });
  });

  it('applies filters to sub-runs only', async () => {
    const chain = sequence(lambda((x: string) => x, { name: 'first' }), new Upper());
    const log = (await toArray(chain.streamLog('ab', {}, { includeTypes: ['parser'] }))).reduce(apply, null);
    expect(Object.keys(log.logs)).toEqual(['Upper']);
    expect(log.logs.Upper.streamed_output).toEqual(['AB']);
    // Strings are a model's tokens only, as LangChain's run log has them (a probe: a client adding up every
    // streamed_output_str counted a parser's text twice).
    expect(log.logs.Upper.streamed_output_str).toEqual([]);
    expect(log.final_output).toBe('AB');
  });

  it("puts a model's tokens, and only a model's, in streamed_output_str", async () => {
    const chain = new FakeListChatModel({ responses: ['two words'] }).pipe(new StringOutputParser());
    const log = (await toArray(chain.streamLog('hi'))).reduce(apply, null);
    expect(log.logs.FakeListChatModel.type).toBe('llm');
    expect(log.logs.FakeListChatModel.streamed_output_str.join('')).toBe('two words');
    expect(log.logs.FakeListChatModel.streamed_output).toHaveLength(log.logs.FakeListChatModel.streamed_output_str.length);
    expect(log.logs.StrOutputParser.streamed_output.join('')).toBe('two words');
    expect(log.logs.StrOutputParser.streamed_output_str).toEqual([]);
  });
});
