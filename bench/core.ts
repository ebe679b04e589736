/**
 * `npm run bench:core`: the Runnable core against @langchain/core and plain
 * async functions, side by side in one process. Per-call medians, and the
 * ratios: how far Runnel is above the floor, how many times faster it is
 * than @langchain/core. Goals (issue 2): invoke and streamEvents ≥ 10× faster
 * than @langchain/core, invoke within 10× of the floor.
 */
import { randomUUID } from 'node:crypto';
import { Runnable as LcRunnable, RunnableLambda as LcLambda, RunnableSequence as LcSequence } from '@langchain/core/runnables';
import type { CallbackManagerForChainRun } from '@langchain/core/callbacks/manager';
import type { RunnableConfig as LcConfig } from '@langchain/core/runnables';
import { ChatPromptTemplate as LcChatPrompt } from '@langchain/core/prompts';
import { StringOutputParser as LcStringParser } from '@langchain/core/output_parsers';
import { FakeListChatModel as LcFakeChat } from '@langchain/core/utils/testing';
import { runnel } from './runnel.js';
import { printTable, runCase, type CaseResult } from './harness.js';

const { ChatPromptTemplate, FakeListChatModel, generator, lambda, sequence, StringOutputParser } = runnel;

const f1 = (x: number): number => x + 1;
const f2 = (x: number): number => x * 2;
const f3 = (x: number): number => x - 3;

// --- the floor: plain async functions -------------------------------------------------
const a1 = async (x: number): Promise<number> => f1(x);
const a2 = async (x: number): Promise<number> => f2(x);
const a3 = async (x: number): Promise<number> => f3(x);
const plainInvoke = async (x: number): Promise<number> => a3(await a2(await a1(x)));
async function* plainStream(x: number): AsyncGenerator<number> {
  yield await plainInvoke(x);
}
/** The same events Runnel emits for the streamed 3-step sequence, built by hand. */
async function* plainEvents(x: number): AsyncGenerator<Record<string, unknown>> {
  const root = randomUUID();
  const event = (kind: string, name: string, id: string, data: unknown, parents: string[]) => ({
    event: kind,
    name,
    run_id: id,
    parent_ids: parents,
    tags: [],
    metadata: {},
    data,
  });
  yield event('on_chain_start', 'RunnableSequence', root, { input: x }, []);
  let value = x;
  const steps = [a1, a2, a3];
  for (let i = 0; i < steps.length; i++) {
    const id = randomUUID();
    yield event('on_chain_start', 'step', id, { input: value }, [root]);
    const out = await (steps[i] as (v: number) => Promise<number>)(value);
    yield event('on_chain_stream', 'step', id, { chunk: out }, [root]);
    yield event('on_chain_end', 'step', id, { output: out, input: value }, [root]);
    value = out;
  }
  yield event('on_chain_stream', 'RunnableSequence', root, { chunk: value }, []);
  yield event('on_chain_end', 'RunnableSequence', root, { output: value }, []);
}
async function* plainSource(n: number): AsyncGenerator<number> {
  for (let i = 0; i < n; i++) yield i;
}
async function* plainMap(source: AsyncIterable<number>, fn: (x: number) => number): AsyncGenerator<number> {
  for await (const x of source) yield fn(x);
}

// --- Runnel -----------------------------------------------------------------------------
const runnelChain = sequence(lambda(f1), lambda(f2), lambda(f3));
const runnelGen = sequence(
  generator(async function* (input: AsyncIterable<number>) {
    for await (const n of input) for (let i = 0; i < n; i++) yield i;
  }),
  generator(async function* (chunks: AsyncIterable<number>) {
    for await (const x of chunks) yield f1(x);
  }),
  generator(async function* (chunks: AsyncIterable<number>) {
    for await (const x of chunks) yield f2(x);
  }),
);

// --- @langchain/core ------------------------------------------------------------------------
const lcChain = LcSequence.from([LcLambda.from(f1), LcLambda.from(f2), LcLambda.from(f3)]);

/** A stream-transforming step built the way @langchain/core's own parsers are. */
class LcGenerator extends LcRunnable<number, number> {
  lc_namespace = ['runnel', 'bench'];
  constructor(private readonly fn: (input: AsyncGenerator<number>) => AsyncGenerator<number>) {
    super();
  }
  async invoke(input: number, options?: LcConfig): Promise<number> {
    let last = 0;
    for await (const chunk of await this.stream(input, options)) last = chunk;
    return last;
  }
  async *_transformGen(input: AsyncGenerator<number>, _run?: CallbackManagerForChainRun): AsyncGenerator<number> {
    yield* this.fn(input);
  }
  override async *transform(input: AsyncGenerator<number>, options?: Partial<LcConfig>): AsyncGenerator<number> {
    yield* this._transformStreamWithConfig(input, this._transformGen.bind(this), options);
  }
}
const lcGen = LcSequence.from([
  new LcGenerator(async function* (input) {
    for await (const n of input) for (let i = 0; i < n; i++) yield i;
  }),
  new LcGenerator(async function* (chunks) {
    for await (const x of chunks) yield f1(x);
  }),
  new LcGenerator(async function* (chunks) {
    for await (const x of chunks) yield f2(x);
  }),
]);

// --- prompt | fake model (50 tokens) | string parser ---------------------------------------------
// @langchain/core's fake streams one character per chunk, Runnel's one word: both answers are 50 chunks.
const ourAnswer = Array.from({ length: 50 }, () => 'x').join(' ');
const theirAnswer = 'x'.repeat(50);
const messages: [string, string][] = [
  ['system', 'You are a comedian.'],
  ['human', 'Tell me a joke about {topic}'],
];
const runnelLlmChain = ChatPromptTemplate.fromMessages(messages)
  .pipe(new FakeListChatModel({ responses: [ourAnswer] }))
  .pipe(new StringOutputParser());
const lcLlmChain = LcChatPrompt.fromMessages(messages)
  .pipe(new LcFakeChat({ responses: [theirAnswer] }))
  .pipe(new LcStringParser());

/** Median microseconds from calling stream() to the first chunk. */
async function timeToFirstChunk(open: () => Promise<AsyncIterable<unknown>>, runs = 300): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    const iterator = (await open())[Symbol.asyncIterator]();
    await iterator.next();
    samples.push((performance.now() - start) * 1000);
    await iterator.return?.();
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)] as number;
}

async function drain(iterable: AsyncIterable<unknown>): Promise<number> {
  let count = 0;
  for await (const _ of iterable) count++;
  return count;
}

const inputs = Array.from({ length: 100 }, (_, i) => i);

async function checkEquivalence(): Promise<void> {
  const expected = await plainInvoke(5);
  const results = [await runnelChain.invoke(5), await lcChain.invoke(5)];
  if (results.some((r) => r !== expected)) throw new Error(`outputs differ: ${JSON.stringify(results)} vs ${expected}`);
  const ours = await drain(runnelGen.stream(200));
  const theirs = await drain(await lcGen.stream(200));
  if (ours !== 200 || theirs !== 200) throw new Error(`generator chunk counts differ: ${ours}, ${theirs}`);
  const ourText = await runnelLlmChain.invoke({ topic: 'cats' });
  const theirText = await lcLlmChain.invoke({ topic: 'cats' });
  if (ourText !== ourAnswer || theirText !== theirAnswer) throw new Error('LLM chains answered unexpectedly');
  console.log(`chunks per 50-token stream: runnel ${await drain(runnelLlmChain.stream({ topic: 'x' }))}, @langchain/core ${await drain(await lcLlmChain.stream({ topic: 'x' }))}`);
  const ourEvents = await drain(runnelChain.streamEvents(5));
  const theirEvents = await drain(lcChain.streamEvents(5, { version: 'v2' }));
  console.log(`events per 3-step streamEvents call: runnel ${ourEvents}, @langchain/core ${theirEvents}, floor ${await drain(plainEvents(5))}`);
}

async function main(): Promise<void> {
  console.log(`node ${process.version}, @langchain/core ${(await import('@langchain/core/package.json', { with: { type: 'json' } })).default.version}`);
  await checkEquivalence();
  const results: CaseResult[] = [];
  results.push(
    await runCase('3-step invoke', [
      { name: 'plain', run: () => plainInvoke(1) },
      { name: 'runnel', run: () => runnelChain.invoke(1) },
      { name: '@langchain/core', run: () => lcChain.invoke(1) },
    ]),
  );
  results.push(
    await runCase('3-step stream', [
      { name: 'plain', run: () => drain(plainStream(1)) },
      { name: 'runnel', run: () => drain(runnelChain.stream(1)) },
      { name: '@langchain/core', run: async () => drain(await lcChain.stream(1)) },
    ]),
  );
  results.push(
    await runCase('3-step streamEvents', [
      { name: 'plain', run: () => drain(plainEvents(1)) },
      { name: 'runnel', run: () => drain(runnelChain.streamEvents(1)) },
      { name: '@langchain/core', run: () => drain(lcChain.streamEvents(1, { version: 'v2' })) },
    ]),
  );
  results.push(
    await runCase('3-step batch(100)', [
      { name: 'plain', run: () => Promise.all(inputs.map(plainInvoke)) },
      { name: 'runnel', run: () => runnelChain.batch(inputs) },
      { name: '@langchain/core', run: () => lcChain.batch(inputs) },
    ], { rounds: 11 }),
  );
  results.push(
    await runCase('200 chunks, 3-step generator stream', [
      { name: 'plain', run: () => drain(plainMap(plainMap(plainSource(200), f1), f2)) },
      { name: 'runnel', run: () => drain(runnelGen.stream(200)) },
      { name: '@langchain/core', run: async () => drain(await lcGen.stream(200)) },
    ], { rounds: 11 }),
  );
  const topic = { topic: 'cats' };
  const llm: CaseResult[] = [];
  llm.push(
    await runCase('prompt ▸ model ▸ parser: invoke', [
      { name: 'runnel', run: () => runnelLlmChain.invoke(topic) },
      { name: '@langchain/core', run: () => lcLlmChain.invoke(topic) },
    ], { rounds: 11 }),
  );
  llm.push(
    await runCase('prompt ▸ model ▸ parser: stream 50 tokens', [
      { name: 'runnel', run: () => drain(runnelLlmChain.stream(topic)) },
      { name: '@langchain/core', run: async () => drain(await lcLlmChain.stream(topic)) },
    ], { rounds: 11 }),
  );
  llm.push(
    await runCase('prompt ▸ model ▸ parser: streamEvents', [
      { name: 'runnel', run: () => drain(runnelLlmChain.streamEvents(topic)) },
      { name: '@langchain/core', run: () => drain(lcLlmChain.streamEvents(topic, { version: 'v2' })) },
    ], { rounds: 11 }),
  );
  llm.push({
    name: 'prompt ▸ model ▸ parser: time to first chunk',
    medians: {
      runnel: await timeToFirstChunk(async () => runnelLlmChain.stream(topic)),
      '@langchain/core': await timeToFirstChunk(() => lcLlmChain.stream(topic)),
    },
  });

  console.log('\nMedian time per call (lower is better):\n');
  printTable(results, { floor: 'plain', ours: 'runnel', peer: '@langchain/core' });
  console.log('');
  printTable(llm, { floor: 'plain', ours: 'runnel', peer: '@langchain/core' });
  const get = (name: string) => results.find((r) => r.name === name)?.medians as Record<string, number>;
  const invoke = get('3-step invoke');
  const events = get('3-step streamEvents');
  console.log('\nGoals:');
  const goal = (label: string, ok: boolean, value: string) => console.log(`- ${ok ? 'met ' : 'MISSED'} ${label}: ${value}`);
  goal('invoke ≥ 10× faster than @langchain/core', invoke['@langchain/core']! / invoke.runnel! >= 10, `${(invoke['@langchain/core']! / invoke.runnel!).toFixed(1)}×`);
  goal('streamEvents ≥ 10× faster than @langchain/core', events['@langchain/core']! / events.runnel! >= 10, `${(events['@langchain/core']! / events.runnel!).toFixed(1)}×`);
  goal('invoke within 10× of the plain floor', invoke.runnel! / invoke.plain! <= 10, `${(invoke.runnel! / invoke.plain!).toFixed(1)}×`);
  for (const result of llm) {
    const ratio = result.medians['@langchain/core']! / result.medians.runnel!;
    goal(`${result.name} ≥ 10× faster than @langchain/core`, ratio >= 10, `${ratio.toFixed(1)}×`);
  }
}

await main();
