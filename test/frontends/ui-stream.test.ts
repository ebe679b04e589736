/**
 * Issue 16: `/{path}/ui_stream` read by the real AI SDK (`ai@6`'s
 * `DefaultChatTransport` and `readUIMessageStream`, which check every part
 * against the SDK's own schema), from the shipped chains on real Redis and
 * Postgres: offline, and on the real `openai` SDK against the local provider
 * server for the model guarantees (abort closes the model request; nothing
 * partial is cached or saved).
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { AbstractChat, DefaultChatTransport, readUIMessageStream, type ChatState, type ChatStatus, type UIMessage, type UIMessageChunk } from 'ai';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { chatChain } from '../../chains/chat.js';
import { createChains } from '../../chains/index.js';
import { jokeChain } from '../../chains/joke.js';
import { buildApp, ChatOpenAI, connectServices, defineChain, FakeListChatModel, generator, lambda, RunnelError, type ChainSpec, type RunnableConfig, type Services } from '../../src/index.js';
import { deferred, settleWithin } from '../helpers.js';
import { sampleValue } from '../support/prometheus.js';
import { startProviderServer, type ProviderServer } from '../support/provider-server.js';

const DATABASE_URL = process.env.RUNNEL_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/runnel_test';
const KEY = 'ui-key-0123456789abcdef';
const auth = { authorization: `Bearer ${KEY}` };
const EVE = 'eve-key-0123456789abcdef';
const WORDS = Array.from({ length: 40 }, (_, i) => `s${i} `);
const STORY = WORDS.join('');

/** Holds each `/story` run after its first word until the test lets it go: a client leaves and rejoins mid-answer. */
let gate = deferred();

const story = defineChain({
  path: '/story',
  runnable: generator(async function* (inputs: AsyncIterable<{ topic: string }>) {
    for await (const _ of inputs);
    yield WORDS[0] as string;
    await gate.promise;
    yield* WORDS.slice(1);
  }).withTypes({ input: z.object({ topic: z.string() }), output: z.string() }),
  messages: { toInput: ({ turns }) => ({ input: { topic: turns.at(-1)?.text ?? '' } }) },
});

/** Fails before its first part (`before`: a provider's 429) or after it (`after`). */
const broken = defineChain({
  path: '/broken',
  runnable: generator(async function* (inputs: AsyncIterable<{ when: string }>) {
    let when = 'before';
    for await (const input of inputs) when = input.when;
    if (when === 'before') throw new RunnelError('RUNNEL_ERR_PROVIDER_RATE_LIMITED', 'provider rate-limited the request (429)');
    yield 'partial ';
    throw new RunnelError('RUNNEL_ERR_PROVIDER_UNAVAILABLE', 'provider broke off (502)');
  }).withTypes({ input: z.object({ when: z.string() }), output: z.string() }),
  messages: { toInput: ({ turns }) => ({ input: { when: turns.at(-1)?.text ?? '' } }) },
});

/** An object-valued chain: its answer is its output as JSON text, as on /v1/chat/completions. */
const facts = defineChain({
  path: '/facts',
  runnable: lambda((input: { topic: string }) => ({ topic: input.topic, count: 2 }), { input: z.object({ topic: z.string() }), output: z.object({ topic: z.string(), count: z.number() }) }),
  messages: { toInput: ({ turns }) => ({ input: { topic: turns.at(-1)?.text ?? '' } }) },
});

/** An object-valued chain whose output has a `content` key: data, not a message. */
const article = defineChain({
  path: '/article',
  runnable: lambda((input: { topic: string }) => ({ content: `About ${input.topic}`, title: 'T', tags: ['a'] }), { input: z.object({ topic: z.string() }), output: z.object({ content: z.string(), title: z.string(), tags: z.array(z.string()) }) }),
  messages: { toInput: ({ turns }) => ({ input: { topic: turns.at(-1)?.text ?? '' } }) },
});

async function listen(chains: ChainSpec<never, unknown>[], services: Services): Promise<{ app: FastifyInstance; url: string }> {
  const app = await buildApp({ chains, services, config: { apiKeys: [{ name: 'ui', key: KEY }, { name: 'eve', key: EVE }], metricsKeys: ['ui'], runNamespace: services.namespace as string } });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` };
}

const userMessage = (text: string): UIMessage => ({ id: randomUUID(), role: 'user', parts: [{ type: 'text', text }] });

/** The text of a UI message: its text parts, joined. */
const textOf = (message: UIMessage | undefined): string =>
  (message?.parts ?? [])
    .filter((part) => part.type === 'text')
    .map((part) => (part as { text: string }).text)
    .join('');

/** Reads a UI message stream to its last message, as `useChat` builds it. */
/** The AI SDK's chat as `useChat` drives it, its state in plain fields. */
class TestChat extends AbstractChat<UIMessage> {
  constructor(transport: DefaultChatTransport<UIMessage>) {
    const state: ChatState<UIMessage> = {
      status: 'ready' as ChatStatus,
      error: undefined,
      messages: [],
      pushMessage: (message) => void state.messages.push(message),
      popMessage: () => void state.messages.pop(),
      replaceMessage: (index, message) => void (state.messages[index] = message),
      snapshot: (thing) => structuredClone(thing),
    };
    super({ transport, state });
  }
}

async function lastMessage(stream: ReadableStream<UIMessageChunk>): Promise<UIMessage | undefined> {
  let last: UIMessage | undefined;
  for await (const message of readUIMessageStream({ stream, terminateOnError: true })) last = message;
  return last;
}

async function invoke(url: string, input: unknown, config?: unknown): Promise<unknown> {
  const res = await fetch(`${url}/invoke`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ input, ...(config === undefined ? {} : { config }) }) });
  expect(res.status).toBe(200);
  return ((await res.json()) as { output: unknown }).output;
}

describe('/ui_stream through the AI SDK, offline', () => {
  let app: FastifyInstance;
  let url: string;
  let services: Services;
  const transport = (path: string, body?: Record<string, unknown>, headers = auth) => new DefaultChatTransport<UIMessage>({ api: `${url}${path}/ui_stream`, headers, body });

  beforeAll(async () => {
    services = await connectServices({ redisUrl: 'redis://127.0.0.1:6379', databaseUrl: DATABASE_URL, namespace: `runnel-test-ui-${randomUUID()}`, cacheNamespace: `runnel-test-ui:${randomUUID()}` });
    const { chains, docs } = createChains({ services, env: {} });
    await docs.seed();
    ({ app, url } = await listen([...chains, story, broken, facts, article] as ChainSpec<never, unknown>[], services));
  });
  afterAll(async () => {
    await app.close();
  });

  it('answers /joke as a UI message whose text is /invoke’s answer, with the header the AI SDK checks', async () => {
    const raw = await fetch(`${url}/joke/ui_stream`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ id: 'c', messages: [userMessage('otters')] }) });
    expect(raw.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    expect(raw.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const body = await raw.text();
    expect(body.trimEnd().endsWith('data: [DONE]')).toBe(true);

    const stream = await transport('/joke').sendMessages({ chatId: randomUUID(), messages: [userMessage('otters')], trigger: 'submit-message', messageId: undefined, abortSignal: undefined });
    const message = await lastMessage(stream);
    expect(message?.role).toBe('assistant');
    expect(textOf(message)).toBe(await invoke(`${url}/joke`, { topic: 'otters' }));
    expect(message?.parts.map((part) => part.type)).toEqual(['step-start', 'text']);
  });

  it('shows /agent’s tool call and result as a tool part, then its answer', async () => {
    const stream = await transport('/agent').sendMessages({ chatId: randomUUID(), messages: [userMessage('What is (3 + 4) * 12?')], trigger: 'submit-message', messageId: undefined, abortSignal: undefined });
    const message = await lastMessage(stream);
    const tools = (message?.parts ?? []).filter((part) => part.type.startsWith('tool-'));
    expect(tools).toHaveLength(1);
    expect(tools[0]).toMatchObject({ type: 'tool-calculator', state: 'output-available', input: { expression: '(3 + 4) * 12' }, output: '84' });
    expect(textOf(message)).toBe(await invoke(`${url}/agent`, { input: 'What is (3 + 4) * 12?' }));
    expect(textOf(message)).toContain('84');
  });

  it('shows a tool that failed under /agent as a failed tool part (output-error with its message), live and durable', async () => {
    for (const body of [undefined, { on_disconnect: 'continue' }]) {
      const stream = await transport('/agent', body).sendMessages({ chatId: randomUUID(), messages: [userMessage('What is 1 / 0?')], trigger: 'submit-message', messageId: undefined, abortSignal: undefined });
      const message = await lastMessage(stream);
      const tools = (message?.parts ?? []).filter((part) => part.type.startsWith('tool-'));
      expect(tools, JSON.stringify(body)).toEqual([expect.objectContaining({ type: 'tool-calculator', state: 'output-error', errorText: 'Error: calculator failed: Division by zero', input: { expression: '1 / 0' } })]);
    }
  });

  it('a run that fails before its first part is an HTTP error the transport raises (no empty answer); after it, an error part', async () => {
    const before = await fetch(`${url}/broken/ui_stream`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ id: 'c', messages: [userMessage('before')] }) });
    expect(before.status).toBe(429);
    expect(before.headers.get('retry-after')).toBe('1');
    expect(await before.json()).toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_RATE_LIMITED' });
    const send = (text: string) => transport('/broken').sendMessages({ chatId: randomUUID(), messages: [userMessage(text)], trigger: 'submit-message', messageId: undefined, abortSignal: undefined });
    await expect(send('before')).rejects.toThrow(/RUNNEL_ERR_PROVIDER_RATE_LIMITED/);
    const errors: string[] = [];
    let last: UIMessage | undefined;
    for await (const message of readUIMessageStream({ stream: await send('after'), onError: (error) => errors.push((error as Error).message) })) last = message;
    expect(textOf(last)).toBe('partial ');
    expect(errors).toEqual(['RUNNEL_ERR_PROVIDER_UNAVAILABLE: provider broke off (502)']);
  });

  it('keeps a /chat conversation under the chat id, the caller’s own', async () => {
    const chatId = `chat-${randomUUID()}`;
    const first = userMessage('My name is Ada');
    const one = await lastMessage(await transport('/chat').sendMessages({ chatId, messages: [first], trigger: 'submit-message', messageId: undefined, abortSignal: undefined }));
    expect(textOf(one)).toContain('My name is Ada');
    const second = userMessage('What did I say first?');
    const two = await lastMessage(await transport('/chat').sendMessages({ chatId, messages: [first, one as UIMessage, second], trigger: 'submit-message', messageId: undefined, abortSignal: undefined }));
    expect(textOf(two)).toContain('you first said “My name is Ada”');
    const history = (await (await fetch(`${url}/chat/history/${chatId}`, { headers: auth })).json()) as { messages: { type: string; content: string }[] };
    expect(history.messages.map((m) => [m.type, m.content])).toEqual([
      ['human', 'My name is Ada'],
      ['ai', textOf(one)],
      ['human', 'What did I say first?'],
      ['ai', textOf(two)],
    ]);
  });

  // A probe: useChat sends the whole conversation with each message, and /chat reads only the new one; a long
  // conversation reached the body limit (413 on every later message). docs/frontends.md gives the transport
  // that sends the new message alone: checked here as useChat drives it.
  it('keeps a /chat conversation when the transport sends the new message alone (prepareSendMessagesRequest)', async () => {
    const sent: number[] = [];
    const lastOnly = new DefaultChatTransport<UIMessage>({
      api: `${url}/chat/ui_stream`,
      headers: auth,
      prepareSendMessagesRequest: ({ id, messages, trigger, messageId, body }) => ({ body: { ...body, id, messages: messages.slice(-1), trigger, messageId } }),
      fetch: async (input, init) => {
        sent.push((JSON.parse(String(init?.body)) as { messages: unknown[] }).messages.length);
        return fetch(input, init);
      },
    });
    const chat = new TestChat(lastOnly);
    await chat.sendMessage({ text: 'My name is Ada' });
    await chat.sendMessage({ text: 'What did I say first?' });
    expect([chat.status, chat.messages.map((m) => m.role)]).toEqual(['ready', ['user', 'assistant', 'user', 'assistant']]);
    expect(sent).toEqual([1, 1]);
    expect(textOf(chat.messages[3])).toContain('you first said “My name is Ada”');
  });

  it('refuses what it cannot answer before streaming: bad bodies 422, no key 401, a chain without an adapter 404', async () => {
    const send = (path: string, body: unknown, headers: Record<string, string> = auth) => fetch(`${url}${path}/ui_stream`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const empty = await send('/joke', { id: 'c', messages: [] });
    expect(empty.status).toBe(422);
    expect(((await empty.json()) as { detail: { loc: unknown[] }[] }).detail[0]?.loc).toEqual(['messages']);
    const notJson = await fetch(`${url}/joke/ui_stream`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{"messages": [' });
    expect(((await notJson.json()) as { message: string }).message).toBe('Invalid JSON body: send a JSON object, such as {"messages": [{"role": "user", "parts": [{"type": "text", "text": "..."}]}]}');
    const assistantLast = await send('/joke', { id: 'c', messages: [{ id: 'a', role: 'assistant', parts: [{ type: 'text', text: 'hi' }] }] });
    expect(assistantLast.status).toBe(422);
    expect((await send('/joke', { id: 'c', messages: [userMessage('x')] }, {})).status).toBe(401);
    // A webhook only a durable stream would call (a probe: it was ignored).
    const webhook = await send('/joke', { id: 'c', messages: [userMessage('x')], webhook: 'https://hooks.example.com/done' });
    expect(webhook.status).toBe(422);
    expect(((await webhook.json()) as { detail: { loc: unknown[] }[] }).detail[0]?.loc).toEqual(['webhook']);
    expect((await send('/rag', { id: 'c', messages: [userMessage('x')] })).status).toBe(404);
    // /chat's id is its session: one that cannot be is refused before the stream, not in it.
    const badId = await send('/chat', { id: 'my chat/1', messages: [userMessage('x')] });
    expect(badId.status).toBe(422);
    expect(((await badId.json()) as { detail: { loc: unknown[] }[] }).detail[0]?.loc).toEqual(['id']);
    // The server holds the answer regenerate() would replace: refused, rather than saving the question twice.
    const regenerate = await send('/chat', { id: 'c-regen', messages: [userMessage('x')], trigger: 'regenerate-message' });
    expect(regenerate.status).toBe(422);
    expect(((await regenerate.json()) as { detail: { loc: unknown[] }[] }).detail[0]?.loc).toEqual(['trigger']);

    // The AI SDK turns a refusal into an error its useChat shows.
    await expect(transport('/joke').sendMessages({ chatId: 'c', messages: [{ id: 'a', role: 'assistant', parts: [{ type: 'text', text: 'hi' }] }], trigger: 'submit-message', messageId: undefined, abortSignal: undefined })).rejects.toThrow(/last message/);
  });

  it('marks the stream, and only the stream, with the AI SDK’s header: live and durable, not a JSON error answered before it', async () => {
    const post = (path: string, body: Record<string, unknown>, text = 'cats') =>
      fetch(`${url}${path}/ui_stream`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ id: randomUUID(), messages: [userMessage(text)], ...body }) });
    for (const body of [{}, { on_disconnect: 'continue' }]) {
      const res = await post('/joke', body);
      expect([res.status, res.headers.get('x-vercel-ai-ui-message-stream')]).toEqual([200, 'v1']);
      await res.text();
    }
    // A probe: the 429 of a run that failed before its first part carried it too.
    const refused = await post('/broken', {}, 'before');
    expect([refused.status, refused.headers.get('content-type'), refused.headers.get('x-vercel-ai-ui-message-stream')]).toEqual([429, 'application/json; charset=utf-8', null]);
    await refused.text();
  });

  it('answers with an object-valued chain’s output as JSON text (it was an empty message), live and durable', async () => {
    // A probe: /v1/chat/completions gave the JSON, /ui_stream only start and finish.
    for (const body of [undefined, { on_disconnect: 'continue' }]) {
      const message = await lastMessage(await transport('/facts', body).sendMessages({ chatId: randomUUID(), messages: [userMessage('otters')], trigger: 'submit-message', messageId: undefined, abortSignal: undefined }));
      expect(JSON.parse(textOf(message))).toEqual({ topic: 'otters', count: 2 });
      // A probe: an object with a `content` key was taken for a message: its text alone, the rest lost.
      const whole = await lastMessage(await transport('/article', body).sendMessages({ chatId: randomUUID(), messages: [userMessage('otters')], trigger: 'submit-message', messageId: undefined, abortSignal: undefined }));
      expect(JSON.parse(textOf(whole))).toEqual({ content: 'About otters', title: 'T', tags: ['a'] });
    }
  });

  // A probe: sendMessage() without a message goes on from the answer, naming it as messageId; that was taken
  // for an edit, and /chat said it could not replace an earlier message.
  it("refuses to go on from an answer (sendMessage() without a message), naming the answer, not an edit", async () => {
    for (const path of ['/chat', '/joke']) {
      const chat = new TestChat(transport(path));
      await chat.sendMessage({ text: 'otters' });
      expect([chat.status, chat.messages.map((m) => m.role)]).toEqual(['ready', ['user', 'assistant']]);
      await chat.sendMessage();
      expect(chat.status).toBe('error');
      expect(chat.error?.message).toMatch(/messageId names the assistant's answer/);
    }
  });

  it('refuses an edit on /chat, whose history would keep the turns the page dropped; a chain without history answers it', async () => {
    // A probe: the AI SDK's sendMessage({text, messageId}) replaced a message on the page and dropped the turns
    // after it, while /chat's history kept them all and answered from them.
    const chatId = `chat-${randomUUID()}`;
    const first = userMessage('I am Ada');
    const one = await lastMessage(await transport('/chat').sendMessages({ chatId, messages: [first], trigger: 'submit-message', messageId: undefined, abortSignal: undefined }));
    const second = userMessage('I like cats');
    await lastMessage(await transport('/chat').sendMessages({ chatId, messages: [first, one as UIMessage, second], trigger: 'submit-message', messageId: undefined, abortSignal: undefined }));
    const edited = { ...first, parts: [{ type: 'text' as const, text: 'I am Bob' }] };
    await expect(transport('/chat').sendMessages({ chatId, messages: [edited], trigger: 'submit-message', messageId: first.id, abortSignal: undefined })).rejects.toThrow(/cannot replace an earlier message/);
    const history = (await (await fetch(`${url}/chat/history/${chatId}`, { headers: auth })).json()) as { messages: { content: string }[] };
    expect(history.messages.map((m) => m.content).filter((text) => text.startsWith('I '))).toEqual(['I am Ada', 'I like cats']);
    // The raw answer names the field.
    const raw = await fetch(`${url}/chat/ui_stream`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ id: chatId, messages: [edited], trigger: 'submit-message', messageId: first.id }) });
    expect(raw.status).toBe(422);
    expect(((await raw.json()) as { detail: { loc: unknown[] }[] }).detail[0]?.loc).toEqual(['messageId']);
    // A chain that keeps no history answers the conversation as the page now has it.
    const joke = await lastMessage(await transport('/joke').sendMessages({ chatId: randomUUID(), messages: [edited], trigger: 'submit-message', messageId: first.id, abortSignal: undefined }));
    expect(textOf(joke).length).toBeGreaterThan(0);
    // A probe: a messageId naming no message sent (or not the last, which the AI SDK never sends) ran as an edit.
    for (const messageId of ['no-such-message', first.id]) {
      const stray = await fetch(`${url}/joke/ui_stream`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ id: randomUUID(), messages: [first, one, userMessage('next')], trigger: 'submit-message', messageId }) });
      expect(stray.status, messageId).toBe(422);
      expect(((await stray.json()) as { message: string }).message).toMatch(/^messageId names no message the chat ends with/);
    }
  });

  it('refuses an attachment the chain would never see (it was dropped, and the answer read as if the model had seen it)', async () => {
    // What useChat's sendMessage({text, files}) sends: the file as a data URL part beside the text.
    const withFile: UIMessage = {
      id: randomUUID(),
      role: 'user',
      parts: [
        { type: 'text', text: 'What is in this picture?' },
        { type: 'file', mediaType: 'image/png', filename: 'cat.png', url: 'data:image/png;base64,iVBORw0KGgo=' },
      ],
    };
    await expect(transport('/joke').sendMessages({ chatId: randomUUID(), messages: [withFile], trigger: 'submit-message', messageId: undefined, abortSignal: undefined })).rejects.toThrow(
      'Only text parts are supported: messages[0].parts[1] is a file.',
    );
    // The AI SDK keeps the refused message in the chat and sends it again with the next one: that turn is answered.
    const next = await lastMessage(await transport('/joke').sendMessages({ chatId: randomUUID(), messages: [withFile, userMessage('otters, then')], trigger: 'submit-message', messageId: undefined, abortSignal: undefined }));
    expect(next?.role).toBe('assistant');
    // An assistant's earlier parts that are not text (tools, reasoning, sources) are history, not input: kept out quietly.
    const earlier: UIMessage = { id: randomUUID(), role: 'assistant', parts: [{ type: 'reasoning', text: 'thinking' }, { type: 'source-url', sourceId: 's1', url: 'https://example.com/' }, { type: 'text', text: 'Ask me.' }] };
    const answer = await lastMessage(await transport('/joke').sendMessages({ chatId: randomUUID(), messages: [userMessage('otters'), earlier, userMessage('otters again')], trigger: 'submit-message', messageId: undefined, abortSignal: undefined }));
    expect(answer?.role).toBe('assistant');
  });

  /** Starts a durable `/story` answer and drops the connection after its first words (the run goes on, held at its gate). */
  async function startAndDrop(chatId: string): Promise<void> {
    gate = deferred();
    const abort = new AbortController();
    const stream = await transport('/story', { on_disconnect: 'continue' }).sendMessages({ chatId, messages: [userMessage('a story')], trigger: 'submit-message', messageId: undefined, abortSignal: abort.signal });
    const reader = stream.getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error('the stream ended before the drop');
      if (value.type === 'text-delta') break;
    }
    abort.abort();
    await reader.cancel().catch(() => undefined);
  }

  it('resumes a durable stream after the client drops (the transport’s reconnect), and answers 204 when none is under way', async () => {
    const chatId = `story-${randomUUID()}`;
    const durable = transport('/story', { on_disconnect: 'continue' });
    // Counted under an endpoint of their own, 204 or not (a trial found the 204s under `stream`).
    const counted = async (status: string) =>
      sampleValue(await (await fetch(`${url}/metrics`, { headers: auth })).text(), 'runnel_requests_total', { chain: '/story', endpoint: 'ui_stream_resume', status }) ?? 0;
    const [none, some] = [await counted('204'), await counted('200')];
    expect(await durable.reconnectToStream({ chatId })).toBeNull();
    await startAndDrop(chatId);
    // The resume is a UI message stream too, marked as one.
    const raw = await fetch(`${url}/story/ui_stream/${chatId}/stream`, { headers: auth });
    expect([raw.status, raw.headers.get('x-vercel-ai-ui-message-stream')]).toEqual([200, 'v1']);
    await raw.body?.cancel();
    const resumed = await durable.reconnectToStream({ chatId });
    expect(resumed).not.toBeNull();
    gate.resolve();
    const message = await lastMessage(resumed as ReadableStream<UIMessageChunk>);
    // The whole answer, from its first word: nothing lost, nothing twice.
    expect(textOf(message)).toBe(STORY);
    // The run has ended: nothing to resume any more.
    expect(await durable.reconnectToStream({ chatId })).toBeNull();
    expect([await counted('204'), await counted('200')]).toEqual([none + 2, some + 1]);
  });

  it('a resumed stream is not cut when the server starts to stop: the AI SDK would take the cut for the whole answer', async () => {
    const own = await buildApp({ chains: [story] as ChainSpec<never, unknown>[], config: { apiKeys: [{ name: 'ui', key: KEY }], shutdownGraceMs: 60_000 } });
    await own.listen({ port: 0, host: '127.0.0.1' });
    const ownUrl = `http://127.0.0.1:${(own.server.address() as AddressInfo).port}`;
    try {
      gate = deferred();
      const chatId = `story-${randomUUID()}`;
      const ownTransport = new DefaultChatTransport<UIMessage>({ api: `${ownUrl}/story/ui_stream`, headers: auth, body: { on_disconnect: 'continue' } });
      const abort = new AbortController();
      const first = (await ownTransport.sendMessages({ chatId, messages: [userMessage('a story')], trigger: 'submit-message', messageId: undefined, abortSignal: abort.signal })).getReader();
      while ((await first.read()).value?.type !== 'text-delta');
      abort.abort();
      await first.cancel().catch(() => undefined);
      const resumed = await ownTransport.reconnectToStream({ chatId });
      const closing = own.shutdown();
      gate.resolve();
      expect(textOf(await lastMessage(resumed as ReadableStream<UIMessageChunk>))).toBe(STORY);
      await closing;
    } finally {
      gate.resolve();
      await own.close();
    }
  });

  it('another caller resumes nothing of someone else’s chat', async () => {
    const chatId = `story-${randomUUID()}`;
    await startAndDrop(chatId);
    expect(await transport('/story', undefined, { authorization: `Bearer ${EVE}` }).reconnectToStream({ chatId })).toBeNull();
    expect((await fetch(`${url}/story/ui_stream/${chatId}/stream`)).status).toBe(401);
    const own = await transport('/story').reconnectToStream({ chatId });
    gate.resolve();
    expect(textOf(await lastMessage(own as ReadableStream<UIMessageChunk>))).toBe(STORY);
  });
});

// A review: with a step kept back and the stream opened by its lazy timer, the next item was never encoded —
// the answer's text was lost, and the message finished "stop", empty.
describe('/ui_stream of a chain streamed as events, opened by its timer while a step is kept back', () => {
  it('sends every part after the open: the step, then the text', async () => {
    const gate = deferred();
    const model = new FakeListChatModel({ responses: ['draft'] });
    const afterModel = defineChain({
      path: '/after-model',
      runnable: lambda(async (input: string, config: RunnableConfig) => {
        const draft = await model.invoke(input, config);
        await gate.promise;
        return `hello ${draft.text}`;
      }),
      messages: { stream: 'events', toInput: ({ turns }) => ({ input: turns.at(-1)?.text ?? '' }) },
    });
    // The lazy open waits a ping interval at most: 50 ms here, while the run waits on the gate.
    const app = await buildApp({ chains: [afterModel] as ChainSpec<never, unknown>[], config: { pingMs: 50 } });
    await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const res = await fetch(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}/after-model/ui_stream`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ id: 'c', messages: [userMessage('hi')] }),
      });
      // Its headers came before the run went on: the timer opened it.
      expect(res.status).toBe(200);
      gate.resolve();
      const parts = (await res.text())
        .split('\n\n')
        .filter((frame) => frame.startsWith('data: {'))
        .map((frame) => JSON.parse(frame.slice('data: '.length)) as { type: string; delta?: string });
      expect(parts.map((part) => part.type)).toEqual(['start', 'start-step', 'text-start', 'text-delta', 'text-end', 'finish-step', 'finish']);
      expect(parts.find((part) => part.type === 'text-delta')?.delta).toBe('hello draft');
    } finally {
      await app.close();
    }
  });
});

describe('/ui_stream on the real openai SDK', () => {
  const WHOLE = 'Why did the cat sit?';
  let provider: ProviderServer;
  let services: Services;
  let app: FastifyInstance;
  let url: string;
  const transport = (path: string) => new DefaultChatTransport<UIMessage>({ api: `${url}${path}/ui_stream`, headers: auth });

  beforeAll(async () => {
    provider = await startProviderServer('openai');
    services = await connectServices({ redisUrl: 'redis://127.0.0.1:6379', namespace: `runnel-test-ui-${randomUUID()}`, cacheNamespace: `runnel-test-ui-openai:${randomUUID()}` });
    const context = { services, env: { OPENAI_API_KEY: 'sk-test-0000', OPENAI_BASE_URL: provider.url } };
    // A chain streamed as run events (the agent's way): its model's step opens before any text.
    const steps = defineChain({
      path: '/steps',
      runnable: new ChatOpenAI({ apiKey: 'sk-test-0000', baseURL: provider.url, model: 'rate-limited', maxRetries: 0 }),
      messages: { stream: 'events', toInput: ({ turns }) => ({ input: turns.at(-1)?.text ?? '' }) },
    });
    ({ app, url } = await listen([jokeChain(context), chatChain(context), steps] as ChainSpec<never, unknown>[], services));
  });
  afterAll(async () => {
    await app.close();
    await provider.close();
  });

  // A probe: /agent's provider failing before any answer gave 200, `start`, `start-step` and an error part —
  // the empty answer beside the error that a chain streamed as output is spared.
  it('answers a run streamed as events whose model fails before any part as a plain HTTP error, its step unsent', async () => {
    const res = await fetch(`${url}/steps/ui_stream`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ id: 'c', messages: [userMessage('hello')] }) });
    expect([res.status, res.headers.get('retry-after'), res.headers.get('x-vercel-ai-ui-message-stream')]).toEqual([429, '1', null]);
    expect(await res.json()).toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_RATE_LIMITED' });
    const send = transport('/steps').sendMessages({ chatId: randomUUID(), messages: [userMessage('hello')], trigger: 'submit-message', messageId: undefined, abortSignal: undefined });
    await expect(send).rejects.toThrow(/RUNNEL_ERR_PROVIDER_RATE_LIMITED/);
  });

  it('streams the provider’s answer as the UI message', async () => {
    const message = await lastMessage(await transport('/joke').sendMessages({ chatId: randomUUID(), messages: [userMessage(`cats ${randomUUID()}`)], trigger: 'submit-message', messageId: undefined, abortSignal: undefined }));
    expect(textOf(message)).toBe(WHOLE);
  });

  it('finishes an answer the provider cut at its token limit with finishReason length, live and durable; the run record keeps the reason', async () => {
    provider.script = () => ({ text: 'Why did the', finish: 'length' });
    try {
      for (const body of [undefined, { on_disconnect: 'continue' }]) {
        const stream = await new DefaultChatTransport<UIMessage>({ api: `${url}/joke/ui_stream`, headers: auth, body }).sendMessages({
          chatId: randomUUID(),
          messages: [userMessage(`cut ${randomUUID()}`)],
          trigger: 'submit-message',
          messageId: undefined,
          abortSignal: undefined,
        });
        const parts: UIMessageChunk[] = [];
        for await (const part of stream as unknown as AsyncIterable<UIMessageChunk>) parts.push(part);
        expect([body, parts.find((part) => part.type === 'finish')]).toEqual([body, { type: 'finish', finishReason: 'length' }]);
      }
      // The run's log keeps the reason for the AI SDK; LangServe's `end` carries none (a join's is `data: null`).
      const raw = await (
        await fetch(`${url}/joke/stream`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ input: { topic: `raw ${randomUUID()}` }, on_disconnect: 'continue' }) })
      ).text();
      expect(raw).toMatch(/\r\nevent: end\r\n\r\n$/);
      const runId = (JSON.parse(/data: (\{"run_id"[^\r]*)/.exec(raw)?.[1] ?? '{}') as { run_id: string }).run_id;
      expect(await (await fetch(`${url}/joke/runs/${runId}/stream`, { headers: auth })).text()).toMatch(/\r\nevent: end\r\ndata: null\r\n\r\n$/);
      // The run's record says so too.
      expect(await (await fetch(`${url}/joke/runs/${runId}`, { headers: auth })).json()).toMatchObject({ status: 'success', finish_reason: 'length' });
      // A whole answer finishes with stop.
      provider.script = undefined;
      const stream = await transport('/joke').sendMessages({ chatId: randomUUID(), messages: [userMessage(`whole ${randomUUID()}`)], trigger: 'submit-message', messageId: undefined, abortSignal: undefined });
      const parts: UIMessageChunk[] = [];
      for await (const part of stream as unknown as AsyncIterable<UIMessageChunk>) parts.push(part);
      expect(parts.find((part) => part.type === 'finish')).toEqual({ type: 'finish', finishReason: 'stop' });
    } finally {
      provider.script = undefined;
    }
  });

  it('regenerate asks the provider again (the cache would give the same answer back); submitting the same question is served by the cache', async () => {
    const messages = [userMessage(`regen ${randomUUID()}`)];
    const ask = async (trigger: 'submit-message' | 'regenerate-message', body?: Record<string, unknown>) =>
      textOf(await lastMessage(await new DefaultChatTransport<UIMessage>({ api: `${url}/joke/ui_stream`, headers: auth, body }).sendMessages({ chatId: randomUUID(), messages, trigger, messageId: undefined, abortSignal: undefined })));
    const before = provider.requests.length;
    expect(await ask('submit-message')).toBe(WHOLE);
    expect(provider.requests.length).toBe(before + 1);
    expect(await ask('submit-message')).toBe(WHOLE);
    expect(provider.requests.length).toBe(before + 1);
    expect(await ask('regenerate-message')).toBe(WHOLE);
    expect(provider.requests.length).toBe(before + 2);
    // A durable stream's run too.
    expect(await ask('regenerate-message', { on_disconnect: 'continue' })).toBe(WHOLE);
    expect(provider.requests.length).toBe(before + 3);
  });

  it('a client that stops mid-answer closes the model request; nothing partial is cached or saved', async () => {
    const topic = `stop ${randomUUID()}`;
    const held = provider.holdNext(4);
    const abandoned = provider.nextAbandon();
    const abort = new AbortController();
    const stream = await transport('/joke').sendMessages({ chatId: randomUUID(), messages: [userMessage(topic)], trigger: 'submit-message', messageId: undefined, abortSignal: abort.signal });
    await settleWithin(held, 10_000);
    abort.abort();
    await stream.cancel().catch(() => undefined);
    await settleWithin(abandoned, 10_000);
    // The same question again is asked of the provider anew, and answered whole.
    const requests = provider.requests.length;
    const again = await lastMessage(await transport('/joke').sendMessages({ chatId: randomUUID(), messages: [userMessage(topic)], trigger: 'submit-message', messageId: undefined, abortSignal: undefined }));
    expect(textOf(again)).toBe(WHOLE);
    expect(provider.requests.length).toBe(requests + 1);

    const chatId = `stop-${randomUUID()}`;
    const heldChat = provider.holdNext(4);
    const abandonedChat = provider.nextAbandon();
    const chatAbort = new AbortController();
    const chatStream = await transport('/chat').sendMessages({ chatId, messages: [userMessage('cut short')], trigger: 'submit-message', messageId: undefined, abortSignal: chatAbort.signal });
    await settleWithin(heldChat, 10_000);
    chatAbort.abort();
    await chatStream.cancel().catch(() => undefined);
    await settleWithin(abandonedChat, 10_000);
    const next = await lastMessage(await transport('/chat').sendMessages({ chatId, messages: [userMessage('again')], trigger: 'submit-message', messageId: undefined, abortSignal: undefined }));
    expect(textOf(next)).toBe(WHOLE);
    const history = (await (await fetch(`${url}/chat/history/${chatId}`, { headers: auth })).json()) as { messages: { type: string; content: string }[] };
    expect(history.messages.map((m) => [m.type, m.content])).toEqual([
      ['human', 'again'],
      ['ai', WHOLE],
    ]);
  });
});
