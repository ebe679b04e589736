/**
 * An answer its client is told failed keeps no chat history turn a run of it saved: the client sends it again,
 * and the turn would be saved twice. A `/batch` whose item fails takes back the turns its succeeded items
 * saved; an `/invoke`, a `/stream` or a background run whose chain fails after a history inside it saved takes
 * that turn back. Through each real SDK against the local provider server, with the history in real Redis;
 * and, in memory, the turn of an item whose write was under way when another item failed. A client that goes
 * mid-stream, after the history saved, is a real `node:http` client.
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  buildApp,
  ChatAnthropic,
  ChatOpenAI,
  ChatPromptTemplate,
  connectServices,
  defineChain,
  FakeListChatModel,
  generator,
  lambda,
  MemoryHistoryStore,
  MessagesPlaceholder,
  RunnelError,
  StringOutputParser,
  withMessageHistory,
  type BaseMessage,
  type ChatMessageHistory,
  type Runnable,
  type Services,
} from '../../src/index.js';
import { settleWithin } from '../helpers.js';
import { startProviderServer, type ProviderServer } from '../support/provider-server.js';
import { startServer } from '../support/server.js';

const prompt = ChatPromptTemplate.fromMessages([new MessagesPlaceholder('history'), ['human', '{message}']]);

/**
 * The chat chain, whose answer to `fail` fails once `ready` settles (after the other item's turn is saved), as
 * a step after the model can.
 */
function chatWith(model: Runnable<never, unknown>, getHistory: (sessionId: string, caller: { identity: string }) => ChatMessageHistory, ready: () => Promise<void>) {
  const check = lambda(async (text: string, config) => {
    if (!(config.configurable as Record<string, unknown>).session_id?.toString().startsWith('fail')) return text;
    await ready();
    throw new RunnelError('RUNNEL_ERR_OUTPUT_PARSE', 'The answer did not parse');
  });
  const inner = prompt.pipe(model as never).pipe(new StringOutputParser()).pipe(check);
  return defineChain({
    path: '/chat',
    runnable: withMessageHistory<{ message: string }, string>(inner as never, { getHistory, inputMessagesKey: 'message', historyMessagesKey: 'history' }),
  });
}

const texts = (messages: BaseMessage[]) => messages.map((m) => `${m.type}:${m.text}`);

for (const sdk of ['openai', 'anthropic'] as const) {
  describe(`a failed answer through the real ${sdk} SDK, history in Redis`, () => {
    let provider: ProviderServer;
    let services: Services;
    beforeAll(async () => {
      provider = await startProviderServer(sdk);
      services = await connectServices({ redisUrl: 'redis://127.0.0.1:6379', namespace: `runnel-test-batch-${randomUUID()}` });
    });
    afterAll(async () => {
      await services.close();
      await provider.close();
    });
    /** The real SDK's chat model, on the local provider server. */
    const sdkModel = () =>
      sdk === 'openai'
        ? new ChatOpenAI({ apiKey: 'sk-test-0000', baseURL: provider.url, model: 'text', maxRetries: 0 })
        : new ChatAnthropic({ apiKey: 'sk-ant-test-0000', baseURL: provider.url, model: 'text', maxRetries: 0 });
    const getHistory = (sessionId: string, caller: { identity: string }) => services.history(caller.identity, sessionId);

    it('takes back the turns its succeeded items saved, and keeps the sessions it did not touch', async () => {
      const model = sdkModel();
      const saved = (sessionId: string) => getHistory(sessionId, { identity: 'anonymous' }).getMessages();
      const ok = `ok-${randomUUID()}`;
      // The failing item waits until the other has saved its turn: the batch fails after a turn is kept.
      const ready = async () => {
        while ((await saved(ok)).length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      };
      const app = await buildApp({ chains: [chatWith(model as never, getHistory, ready)] });
      try {
        // A turn of an earlier request stays: only what the batch saved goes.
        const earlier = await app.inject({ method: 'POST', url: '/chat/invoke', payload: { input: { message: 'earlier' }, config: { configurable: { session_id: ok } } } });
        expect(earlier.statusCode).toBe(200);
        const before = texts(await saved(ok));
        expect(before).toHaveLength(2);
        const res = await app.inject({
          method: 'POST',
          url: '/chat/batch',
          payload: {
            inputs: [{ message: 'kept?' }, { message: 'fails' }],
            config: [{ configurable: { session_id: ok } }, { configurable: { session_id: `fail-${randomUUID()}` } }],
          },
        });
        expect(res.statusCode).toBe(502);
        expect(res.json().message).toMatch(/^inputs\[1\]: /);
        expect(texts(await saved(ok))).toEqual(before);
        // The same batch with both items succeeding keeps both turns, once.
        const again = await app.inject({ method: 'POST', url: '/chat/batch', payload: { inputs: [{ message: 'kept?' }], config: [{ configurable: { session_id: ok } }] } });
        expect(again.statusCode).toBe(200);
        expect(texts(await saved(ok))).toEqual([...before, 'human:kept?', `ai:${again.json().output[0]}`]);
      } finally {
        await app.close();
      }
    });

    // A history inside the chain saves its turn, and a step after it fails: the answer is an error, the turn goes.
    it('an /invoke, a /stream and a background run whose step after the history fails keep no turn', async () => {
      const model = sdkModel();
      const chat = withMessageHistory<{ message: string }, string>(prompt.pipe(model as never).pipe(new StringOutputParser()) as never, {
        getHistory,
        inputMessagesKey: 'message',
        historyMessagesKey: 'history',
      });
      const check = lambda((text: string) => {
        if (text.length > 0) throw new RunnelError('RUNNEL_ERR_OUTPUT_PARSE', 'The answer did not parse');
        return text;
      });
      const app = await buildApp({
        chains: [
          defineChain({
            path: '/nested',
            runnable: chat.pipe(check) as never,
            // Served as a model too (/v1/chat/completions): the conversation's id is the session.
            messages: { toInput: ({ id, turns }) => ({ input: { message: turns.at(-1)?.text ?? '' } as never, configurable: { session_id: id } }) },
          }),
        ],
      });
      try {
        const saved = (sessionId: string) => getHistory(sessionId, { identity: 'anonymous' }).getMessages();
        const body = (sessionId: string) => ({ input: { message: 'hello' }, config: { configurable: { session_id: sessionId } } });
        const invoked = `inv-${randomUUID()}`;
        const res = await app.inject({ method: 'POST', url: '/nested/invoke', payload: body(invoked) });
        expect(res.statusCode).toBe(502);
        expect(await saved(invoked)).toEqual([]);
        const streamed = `str-${randomUUID()}`;
        const stream = await app.inject({ method: 'POST', url: '/nested/stream', payload: body(streamed) });
        expect(stream.body).toMatch(/event: error\r?\ndata: .*RUNNEL_ERR_OUTPUT_PARSE/);
        expect(await saved(streamed)).toEqual([]);
        const background = `run-${randomUUID()}`;
        const submitted = await app.inject({ method: 'POST', url: '/nested/runs', payload: body(background) });
        expect(submitted.statusCode).toBe(202);
        const ended = await app.inject({ method: 'GET', url: `/nested/runs/${submitted.json().run_id}/wait?timeout_s=30` });
        expect(ended.json()).toMatchObject({ status: 'error', error: { code: 'RUNNEL_ERR_OUTPUT_PARSE' } });
        expect(await saved(background)).toEqual([]);
        const completed = `v1-${randomUUID()}`;
        const completion = await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: { model: 'nested', metadata: { session_id: completed }, messages: [{ role: 'user', content: 'hello' }] } });
        expect(completion.statusCode).toBe(502);
        expect(await saved(completed)).toEqual([]);
      } finally {
        await app.close();
      }
    });

    // The same from a real client's side: a client that goes mid-stream, after the history inside the chain saved
    // its turn, is told nothing more — its answer failed, and the turn goes.
    it('a /stream whose node:http client goes after the history saved keeps no turn', async () => {
      const chat = withMessageHistory<{ message: string }, string>(prompt.pipe(sdkModel() as never).pipe(new StringOutputParser()) as never, {
        getHistory,
        inputMessagesKey: 'message',
        historyMessagesKey: 'history',
      });
      // After the history: the answer, then a step that takes its time.
      const after = generator(async function* (inputs: AsyncIterable<string>) {
        let text = '';
        for await (const chunk of inputs) text += chunk;
        yield `${text} `;
        await new Promise((resolve) => setTimeout(resolve, 60_000).unref());
        yield 'and more';
      });
      const server = await startServer({}, [defineChain({ path: '/nested', runnable: chat.pipe(after) as never })]);
      try {
        const sessionId = `gone-${randomUUID()}`;
        const saved = () => getHistory(sessionId, { identity: 'anonymous' }).getMessages();
        const request = httpRequest(`${server.url}/nested/stream`, { method: 'POST', agent: false, headers: { 'content-type': 'application/json' } });
        request.on('error', () => {});
        request.end(JSON.stringify({ input: { message: 'hello' }, config: { configurable: { session_id: sessionId } } }));
        const [response] = (await once(request, 'response')) as [IncomingMessage];
        let seen = '';
        response.setEncoding('utf8');
        // Leaving the loop leaves the connection open: the client goes at `destroy()` below.
        for await (const chunk of response.iterator({ destroyOnReturn: false })) {
          seen += chunk as string;
          if (seen.includes('event: data')) break;
        }
        // The history saved its turn before the step after it sent anything.
        expect(texts(await saved())).toEqual(['human:hello', expect.stringMatching(/^ai:/)]);
        request.destroy();
        await settleWithin(
          (async () => {
            while ((await saved()).length > 0) await new Promise((resolve) => setTimeout(resolve, 10));
          })(),
          10_000,
        );
      } finally {
        await server.close();
      }
    });
  });
}

describe('a failed /batch, history in memory', () => {
  it("takes back a turn whose write was under way when another item failed, once that write lands", async () => {
    const store = new MemoryHistoryStore();
    let writing!: () => void;
    const writeStarted = new Promise<void>((resolve) => (writing = resolve));
    let letWrite!: () => void;
    const writeMay = new Promise<void>((resolve) => (letWrite = resolve));
    let landed = false;
    // Item 0's write waits, under way, until the batch has answered its failure.
    const getHistory = (sessionId: string, caller: { identity: string }): ChatMessageHistory => {
      const history = store.history(`${caller.identity}:${sessionId}`);
      return {
        getMessages: () => history.getMessages(),
        clear: () => history.clear(),
        addMessages: async (messages) => {
          writing();
          await writeMay;
          const takeBack = await history.addMessages(messages);
          landed = true;
          return takeBack;
        },
      };
    };
    const model = new FakeListChatModel({ responses: ['an answer'] });
    const app = await buildApp({ chains: [chatWith(model as never, getHistory, () => writeStarted)] });
    try {
      const res = await app.inject({
        method: 'POST',
        url: '/chat/batch',
        payload: { inputs: [{ message: 'slow save' }, { message: 'fails' }], config: [{ configurable: { session_id: 'late' } }, { configurable: { session_id: 'fail-1' } }] },
      });
      expect(res.statusCode).toBe(502);
      letWrite();
      // The write lands after the answer, and is taken back as soon as it reports itself.
      await settleWithin(
        (async () => {
          while (!landed || store.read('anonymous:late').length > 0) await new Promise((resolve) => setImmediate(resolve));
        })(),
        10_000,
      );
      expect(store.read('anonymous:late')).toEqual([]);
      // Emptied, the session is not held.
      expect(store.size).toBe(0);
    } finally {
      await app.close();
    }
  });
});
