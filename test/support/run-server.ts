/**
 * A Runnel process for the durable-run tests: its chains stream at a known
 * pace, its runs and queue live in Redis under RUNNEL_RUN_NAMESPACE, and its
 * workers start with it (as `npm start`'s do). Prints "ready <port>".
 *
 * - `/story`: 30 words, one every 30 ms;
 * - `/long`: 300 words, one every 200 ms (a run to cancel or to kill);
 * - `/noop`: answers its input at once;
 * - `/fast`: 200 words as fast as they come (the benchmarks' chain; also on /ui_stream and /v1/chat/completions).
 */
import { z } from 'zod';
import { buildApp, ChatPromptTemplate, connectServices, defineChain, exitOnSignals, FakeListChatModel, lambda, loadServerConfig, StringOutputParser } from '../../src/index.js';
import { startRunWorkers, stopWorkersOnSignals } from '../../src/server/worker-process.js';

export const STORY = Array.from({ length: 30 }, (_, i) => `w${i}`).join(' ');
const LONG = Array.from({ length: 300 }, (_, i) => `l${i}`).join(' ');
const FAST = Array.from({ length: 200 }, (_, i) => `f${i}`).join(' ');
const prompt = ChatPromptTemplate.fromMessages([['human', '{topic}']]);
const topic = z.object({ topic: z.string() });

export const runChains = [
  defineChain({ path: '/story', runnable: prompt.pipe(new FakeListChatModel({ responses: [STORY], sleepMs: 30 })).pipe(new StringOutputParser()), inputSchema: topic }),
  defineChain({ path: '/long', runnable: prompt.pipe(new FakeListChatModel({ responses: [LONG], sleepMs: 200 })).pipe(new StringOutputParser()), inputSchema: topic }),
  defineChain({ path: '/noop', configKeys: ['configurable', 'run_id'], runnable: lambda((input: { n: number }) => input.n, { input: z.object({ n: z.number() }), output: z.number() }) }),
  defineChain({
    path: '/fast',
    runnable: prompt.pipe(new FakeListChatModel({ responses: [FAST], recordCalls: 0 })).pipe(new StringOutputParser()),
    inputSchema: topic,
    // A chat model for the frontends' routes too (bench:frontends): the last message is the topic.
    messages: { toInput: ({ turns }) => ({ input: { topic: turns.at(-1)?.text ?? '' } }) },
  }),
];

if (process.argv[1]?.endsWith('run-server.ts')) {
  const config = loadServerConfig(process.env);
  // Redis commands wait up to 10 s here, not the 500 ms a server's own default allows: these processes run
  // beside the rest of the suite on a loaded 2-core machine, where a stalled turn of the event loop made a
  // command time out and a replica's run end RUNNEL_ERR_REDIS_UNAVAILABLE (CI, Node 20) — a margin of time
  // this test of replicas does not mean to measure.
  const services = await connectServices({ redisUrl: config.redisUrl, namespace: config.runNamespace, redisCommandTimeoutMs: 10_000 });
  if (process.env.RUNNEL_ROLE === 'worker') {
    // As `npm run worker` runs: workers only, no HTTP.
    const log = { info: (message: string) => console.log(message), error: (message: string) => console.error(message) };
    const worker = startRunWorkers({ config, chains: runChains as never, services, log });
    await worker.queue.counts();
    stopWorkersOnSignals(worker, 10_000, log);
    console.log('ready worker');
  } else {
    const app = await buildApp({ chains: runChains as never, config, services, runWorkers: 'start' });
    await app.listen({ port: config.port, host: '127.0.0.1' });
    console.log(`ready ${(app.server.address() as { port: number }).port}`);
    exitOnSignals(app);
  }
}
