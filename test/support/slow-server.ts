/**
 * A Runnel process for the shutdown tests: `/slow` streams a token every
 * 50 ms for a minute (on `/ui_stream` too), `/wait` answers /invoke after 1.5 s (printing "started" when it begins), `/forever`
 * never answers by itself, `/gated`
 * streams one token and its last only after `POST /release`; signals are handled exactly as `npm start`
 * handles them. Prints "ready <port>".
 */
import { buildApp, ChatPromptTemplate, defineChain, exitOnSignals, FakeListChatModel, generator, lambda, sleep, StringOutputParser } from '../../src/index.js';

const story = Array.from({ length: 1200 }, (_, i) => `t${i}`).join(' ');
let release!: () => void;
const gate = new Promise<void>((resolve) => (release = resolve));
const app = await buildApp({
  chains: [
    defineChain({
      path: '/slow',
      runnable: ChatPromptTemplate.fromMessages([['human', '{topic}']]).pipe(new FakeListChatModel({ responses: [story], sleepMs: 50 })).pipe(new StringOutputParser()),
      // The AI SDK's UI message stream too (the last message is the topic).
      messages: { toInput: ({ turns }) => ({ input: { topic: turns.at(-1)?.text ?? '' } }) },
    }),
    defineChain({
      path: '/gated',
      runnable: generator(async function* (inputs: AsyncIterable<unknown>) {
        for await (const input of inputs) void input;
        yield 'waiting ';
        await gate;
        yield 'released';
      }),
    }),
    // Never answers by itself (a model call longer than any grace): only an abort ends it.
    defineChain({
      path: '/forever',
      runnable: lambda(async (x: string) => {
        console.log(`started forever ${x}`);
        return new Promise<string>(() => {});
      }),
    }),
    defineChain({
      path: '/wait',
      runnable: lambda(async (x: string) => {
        console.log(`started ${x}`);
        await sleep(1500);
        return `waited for ${x}`;
      }),
    }),
  ] as never,
  config: { shutdownGraceMs: Number(process.env.RUNNEL_SHUTDOWN_GRACE_MS ?? 1000), maxStreams: 1000 },
});
// Not a chain route: it answers while the server drains.
app.post('/release', async () => {
  release();
  return { released: true };
});
await app.listen({ port: 0, host: '127.0.0.1' });
exitOnSignals(app);
console.log(`ready ${(app.server.address() as { port: number }).port}`);
