import { describe, expect, it } from 'vitest';
import {
  buildApp,
  ChatPromptTemplate,
  defineChain,
  FakeListChatModel,
  MemoryHistoryStore,
  MessagesPlaceholder,
  RunnableLambda,
  StringOutputParser,
  withMessageHistory,
  type BaseMessage,
} from '../../src/index.js';
import { settleWithin, toArray } from '../helpers.js';

function chat(options: { responses?: string[]; sleepMs?: number } = {}) {
  const store = new MemoryHistoryStore();
  const model = new FakeListChatModel({ responses: options.responses ?? ['one', 'two', 'three'], sleepMs: options.sleepMs ?? 0 });
  const prompt = ChatPromptTemplate.fromMessages([['system', 'Be brief.'], new MessagesPlaceholder('history'), ['human', '{question}']]);
  const runnable = withMessageHistory<{ question: string }, string>(prompt.pipe(model).pipe(new StringOutputParser()), {
    getHistory: (sessionId, { identity }) => store.history(`${identity}:${sessionId}`),
    inputMessagesKey: 'question',
    historyMessagesKey: 'history',
  });
  return { store, model, runnable };
}
const texts = (messages: BaseMessage[]) => messages.map((m) => `${m.type}:${m.text}`);

describe('withMessageHistory', () => {
  it('continues the conversation of a session, and saves question and answer after the run', async () => {
    const { store, model, runnable } = chat();
    const config = { configurable: { session_id: 's1' } };
    expect(await runnable.invoke({ question: 'first?' }, config)).toBe('one');
    expect(await runnable.invoke({ question: 'second?' }, config)).toBe('two');
    expect(texts(model.calls[1] as BaseMessage[])).toEqual(['system:Be brief.', 'human:first?', 'ai:one', 'human:second?']);
    expect(texts(await store.history('anonymous:s1').getMessages())).toEqual(['human:first?', 'ai:one', 'human:second?', 'ai:two']);
  });

  it('saves a streamed answer whole when the stream ends', async () => {
    const { store, runnable } = chat({ responses: ['a streamed answer'] });
    const stream = runnable.stream({ question: 'q' }, { configurable: { session_id: 'st' } });
    const first = await stream.next();
    expect(first.value).toBe('a');
    expect(await store.history('anonymous:st').getMessages()).toEqual([]);
    await toArray(stream);
    expect(texts(await store.history('anonymous:st').getMessages())).toEqual(['human:q', 'ai:a streamed answer']);
  });

  it('saves nothing for an aborted or failed run', async () => {
    const { store, runnable } = chat({ responses: ['slow answer here'], sleepMs: 50 });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 60);
    await expect(runnable.invoke({ question: 'q' }, { configurable: { session_id: 'ab' }, signal: controller.signal })).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    expect(await store.history('anonymous:ab').getMessages()).toEqual([]);
    await expect(runnable.invoke({ nope: 1 } as never, { configurable: { session_id: 'ab' } })).rejects.toThrow();
    expect(await store.history('anonymous:ab').getMessages()).toEqual([]);
  });

  it('runs concurrent requests of one session one after another: nothing interleaves or is lost', async () => {
    const { store, model, runnable } = chat({ responses: ['r1', 'r2', 'r3'], sleepMs: 5 });
    const config = { configurable: { session_id: 'cc' } };
    const answers = await settleWithin(Promise.all([runnable.invoke({ question: 'a' }, config), toArray(runnable.stream({ question: 'b' }, config)), runnable.invoke({ question: 'c' }, config)]), 5000);
    expect(answers).toEqual(['r1', ['r2'], 'r3']);
    expect(texts(await store.history('anonymous:cc').getMessages())).toEqual(['human:a', 'ai:r1', 'human:b', 'ai:r2', 'human:c', 'ai:r3']);
    expect(texts(model.calls[2] as BaseMessage[])).toEqual(['system:Be brief.', 'human:a', 'ai:r1', 'human:b', 'ai:r2', 'human:c']);
  });

  it('a request aborted while it waits does not let a later one past the request still under way', async () => {
    const store = new MemoryHistoryStore();
    const seen: string[][] = [];
    let letFirstEnd!: () => void;
    const firstMayEnd = new Promise<void>((resolve) => (letFirstEnd = resolve));
    let firstStarted!: () => void;
    const started = new Promise<void>((resolve) => (firstStarted = resolve));
    const answer = RunnableLambda.from(async (messages: BaseMessage[]) => {
      seen.push(texts(messages));
      if (seen.length === 1) {
        firstStarted();
        await firstMayEnd;
      }
      return `answer ${seen.length}`;
    });
    const runnable = withMessageHistory<string, string>(answer, { getHistory: (sessionId, { identity }) => store.history(`${identity}:${sessionId}`) });
    const config = { configurable: { session_id: 'wa' } };
    const first = runnable.invoke('a', config);
    await started;
    const controller = new AbortController();
    const waiting = runnable.invoke('b', { ...config, signal: controller.signal });
    controller.abort();
    await expect(waiting).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    // Arrives after the abort, while the first still runs: it waits for the first, and reads its answer.
    const third = runnable.invoke('c', config);
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(seen).toHaveLength(1);
    letFirstEnd();
    expect(await Promise.all([first, third])).toEqual(['answer 1', 'answer 2']);
    expect(seen[1]).toEqual(['human:a', 'ai:answer 1', 'human:c']);
    expect(texts(await store.history('anonymous:wa').getMessages())).toEqual(['human:a', 'ai:answer 1', 'human:c', 'ai:answer 2']);
    // And the session's place in line is forgotten once everyone has gone.
    await new Promise((resolve) => setImmediate(resolve));
    expect((runnable as unknown as { queues: Map<string, unknown> }).queues.size).toBe(0);
  });

  it('requires session_id (422), lists it in the config schema, and scopes sessions by caller', async () => {
    const { store, runnable } = chat();
    await expect(runnable.invoke({ question: 'q' })).rejects.toMatchObject({ code: 'RUNNEL_ERR_CONFIG_INVALID', statusCode: 422 });
    await expect(runnable.invoke({ question: 'q' }, { configurable: { session_id: 'bad id!' } })).rejects.toMatchObject({ code: 'RUNNEL_ERR_CONFIG_INVALID' });
    expect(runnable.configJsonSchema()).toMatchObject({ properties: { configurable: { properties: { session_id: { title: 'Session ID', type: 'string' } } } } });
    expect(runnable.inputJsonSchema()).toMatchObject({ properties: { question: { type: 'string' } }, required: ['question'] });
    await runnable.invoke({ question: 'alice asks' }, { configurable: { session_id: 'same' }, metadata: { __identity: 'alice' } });
    await runnable.invoke({ question: 'bob asks' }, { configurable: { session_id: 'same' }, metadata: { __identity: 'bob' } });
    expect(texts(await store.history('alice:same').getMessages())).toEqual(['human:alice asks', 'ai:one']);
    expect(texts(await store.history('bob:same').getMessages())).toEqual(['human:bob asks', 'ai:two']);
  });
});

describe('withMessageHistory over HTTP', () => {
  // A trial: a batch whose second config lacked session_id was refused with loc ["config", "configurable",
  // "session_id"], which names no item; the client's own place for it is ["config", 1, …].
  it('a batch item without session_id is named by its index', async () => {
    const app = await buildApp({ chains: [defineChain({ path: '/chat', runnable: chat().runnable as never })] });
    try {
      const res = await app.inject({
        method: 'POST',
        url: '/chat/batch',
        payload: { inputs: [{ question: 'a' }, { question: 'b' }], config: [{ configurable: { session_id: 's1' } }, { configurable: {} }] },
      });
      expect(res.statusCode).toBe(422);
      expect(res.json().detail).toEqual([{ type: 'missing', loc: ['config', 1, 'configurable', 'session_id'], msg: 'Field required' }]);
      const single = await app.inject({ method: 'POST', url: '/chat/invoke', payload: { input: { question: 'a' } } });
      expect(single.json().detail[0].loc).toEqual(['config', 'configurable', 'session_id']);
    } finally {
      await app.close();
    }
  });
});
