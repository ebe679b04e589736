/**
 * The servers `bench/http.ts` measures, one per process:
 * `node <compiled>.mjs <kind> <port>` (bench/http.ts compiles it); prints `ready` when listening.
 * Each process loads only what its kind serves (Runnel, @langchain/core, express): a heap that holds
 * another contender's modules makes every garbage collection dearer.
 *
 * - floor: raw Fastify routes: the 3-step chain's output with plain functions, and SSE frames from 3 plain async generators;
 * - runnel: Runnel's app serving the 3-step lambda chain (/bench) and a 3-step generator sequence of 200 chunks (/chunks);
 * - runnel-traced: the same with OpenTelemetry tracing on, exporting to BENCH_OTLP_URL;
 * - runnel-x2: the same as runnel, served by two processes on one port (`serveOnProcesses`, as RUNNEL_PROCESSES=2 does);
 * - fastify-lc, express-lc: hand-written routes calling the same chains built with @langchain/core;
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import Fastify from 'fastify';
import type * as Runnel from '../src/index.js';

/** Runnel's compiled `dist/`, as `npm start` runs it (bench/runnel.ts does the same for the in-process benches). */
const loadRunnel = async (): Promise<typeof Runnel> => (await import(pathToFileURL(resolve(process.cwd(), 'dist/src/index.js')).href)) as typeof Runnel;

const [kind, portText] = process.argv.slice(2);
const port = Number(portText);
const f1 = (x: number): number => x + 1;
const f2 = (x: number): number => x * 2;
const f3 = (x: number): number => x - 3;

const frame = (event: string, data: unknown): string => `event: ${event}\r\ndata: ${JSON.stringify(data)}\r\n\r\n`;
const SSE = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' };

// The SSE workload on both sides: 200 chunks through a 3-step generator sequence (as in bench:core).
async function* source(): AsyncGenerator<string> {
  for (let i = 0; i < 200; i++) yield `c${i}`;
}
async function* upper(chunks: AsyncIterable<unknown>): AsyncGenerator<string> {
  for await (const chunk of chunks) yield String(chunk).toUpperCase();
}
async function* tag(chunks: AsyncIterable<unknown>): AsyncGenerator<string> {
  for await (const chunk of chunks) yield `${String(chunk)}!`;
}

/** @langchain/core's runnables, and a stream-transforming step built the way its own parsers are. */
async function loadLangChain() {
  const { Runnable: LcRunnable, RunnableLambda: LcLambda, RunnableSequence: LcSequence } = await import('@langchain/core/runnables');
  class LcGenerator extends LcRunnable<unknown, string> {
    lc_namespace = ['bench'];
    constructor(private readonly fn: (input: AsyncGenerator<unknown>) => AsyncGenerator<string>) {
      super();
    }
    async invoke(): Promise<string> {
      return '';
    }
    async *_gen(input: AsyncGenerator<unknown>): AsyncGenerator<string> {
      yield* this.fn(input);
    }
    override async *transform(input: AsyncGenerator<unknown>, options?: object): AsyncGenerator<string> {
      yield* this._transformStreamWithConfig(input, this._gen.bind(this), options);
    }
  }
  return { LcLambda, LcSequence, LcGenerator };
}

/** Runnel's app with the benchmark's chains, listening on the port. */
async function serveRunnel(kind: string, runnel: typeof Runnel): Promise<void> {
  const { buildApp, ChatPromptTemplate, defineChain, FakeListChatModel, generator, lambda, sequence, StringOutputParser } = runnel;
  // Traced: OTLP/protobuf with the batch processor to the bench's sink (BENCH_OTLP_URL), every request sampled.
  const tracing = kind === 'runnel-traced' ? runnel.loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: process.env.BENCH_OTLP_URL }) : undefined;
  const app = await buildApp({
    chains: [
      defineChain({ path: '/bench', runnable: sequence(lambda(f1), lambda(f2), lambda(f3)) }),
      defineChain({ path: '/chunks', runnable: sequence(generator(source), generator(upper), generator(tag)) }),
      // An LLM chain as Runnel serves them: prompt ▸ chat model (a fake, 20 words) ▸ parser.
      defineChain({
        path: '/llm',
        runnable: ChatPromptTemplate.fromMessages([['human', 'Tell me about {topic}']])
          .pipe(new FakeListChatModel({ responses: ['one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty'], recordCalls: 0 }))
          .pipe(new StringOutputParser()),
      }),
      // The same with a model that takes its time (a word a millisecond, about 20 ms), as real ones do.
      defineChain({
        path: '/llm-paced',
        runnable: ChatPromptTemplate.fromMessages([['human', 'Tell me about {topic}']])
          .pipe(new FakeListChatModel({ responses: ['one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty'], sleepMs: 1, recordCalls: 0 }))
          .pipe(new StringOutputParser()),
      }),
    ] as never,
    config: { maxStreams: 10_000, tracing },
  });
  await app.listen({ port, host: '127.0.0.1' });
}

async function main(): Promise<void> {
  if (kind === 'floor') {
    const app = Fastify();
    app.post('/invoke', async (request) => ({ output: f3(f2(f1((request.body as { input: number }).input))) }));
    app.post('/stream', async (_request, reply) => {
      reply.hijack();
      reply.raw.writeHead(200, SSE);
      reply.raw.write(frame('metadata', { run_id: 'x' }));
      for await (const chunk of tag(upper(source()))) {
        if (!reply.raw.write(frame('data', chunk))) await new Promise((resolve) => reply.raw.once('drain', resolve));
      }
      reply.raw.end('event: end\r\n\r\n');
    });
    await app.listen({ port, host: '127.0.0.1' });
  } else if (kind === 'runnel' || kind === 'runnel-traced') {
    await serveRunnel(kind, await loadRunnel());
  } else if (kind === 'runnel-x2') {
    // Two processes on one port: this one forks them and returns; each prints `ready` when it listens.
    const runnel = await loadRunnel();
    await runnel.serveOnProcesses({ count: 2, deadlineMs: 10_000 }, async () => {
      await serveRunnel(kind, runnel);
      console.log('ready');
    });
    return;
  } else if (kind === 'fastify-lc' || kind === 'express-lc') {
    const { LcLambda, LcSequence, LcGenerator } = await loadLangChain();
    const chain = LcSequence.from([LcLambda.from(f1), LcLambda.from(f2), LcLambda.from(f3)]);
    const chunks = LcSequence.from([new LcGenerator(source), new LcGenerator(upper), new LcGenerator(tag)]);
    if (kind === 'fastify-lc') {
      const app = Fastify();
      app.post('/invoke', async (request) => ({ output: await chain.invoke((request.body as { input: number }).input) }));
      app.post('/stream', async (_request, reply) => {
        reply.hijack();
        reply.raw.writeHead(200, SSE);
        reply.raw.write(frame('metadata', { run_id: 'x' }));
        for await (const chunk of await chunks.stream(1)) {
          if (!reply.raw.write(frame('data', chunk))) await new Promise((resolve) => reply.raw.once('drain', resolve));
        }
        reply.raw.end('event: end\r\n\r\n');
      });
      await app.listen({ port, host: '127.0.0.1' });
    } else {
      const { default: express } = await import('express');
      const app = express();
      app.use(express.json());
      app.post('/invoke', (req, res, next) => {
        chain.invoke((req.body as { input: number }).input).then((output) => res.json({ output }), next);
      });
      await new Promise<void>((resolve) => app.listen(port, '127.0.0.1', () => resolve()));
    }
  } else {
    throw new Error(`unknown server kind ${kind}`);
  }
  console.log('ready');
}

process.on('SIGTERM', () => process.exit(0));
await main();
