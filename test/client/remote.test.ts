import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AIMessage, buildApp, defineChain, Document, lambda, parseSse, RemoteRunnable, type ChainSpec, type StreamEvent } from '../../src/index.js';
import { settleWithin, toArray } from '../helpers.js';
import { observed, startServer, type TestServer } from '../support/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => server.close());

describe('RemoteRunnable', () => {
  it('invokes, batches and streams a remote chain', async () => {
    const echo = new RemoteRunnable<{ name: string }, string>({ url: `${server.url}/echo/` });
    expect(await echo.invoke({ name: 'Ada' })).toBe('hello Ada');
    expect(await echo.batch([{ name: 'a' }, { name: 'b' }])).toEqual(['hello a', 'hello b']);
    // With returnExceptions, one result per position: a bad item does not take the good one's answer with it
    // (a probe: the server refuses a batch whole, and every position got that one 422).
    const mixed = await echo.batch([{ name: 'a' }, { name: 5 } as never, { name: 'c' }], undefined, { returnExceptions: true });
    expect(mixed[0]).toBe('hello a');
    expect(mixed[1]).toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
    expect(mixed[2]).toBe('hello c');
    const joke = new RemoteRunnable<{ topic: string }, string>({ url: `${server.url}/joke` });
    const tokens = await toArray(joke.stream({ topic: 'cats' }));
    expect(tokens.length).toBeGreaterThan(3);
    expect(tokens.join('')).toBe('Why did the cat sit on the computer?');
  });

  it('revives messages and documents', async () => {
    const chat = new RemoteRunnable<{ question: string }, AIMessage>({ url: `${server.url}/chat-model` });
    const answer = await chat.invoke({ question: 'capital of France?' });
    expect(answer).toBeInstanceOf(AIMessage);
    expect(answer.text).toBe('Paris is the capital.');
    expect(answer.usage_metadata?.output_tokens).toBeGreaterThan(0);
    const docs = await new RemoteRunnable<string, Document[]>({ url: `${server.url}/documents` }).invoke('cats');
    expect(docs[0]).toBeInstanceOf(Document);
    expect(docs[0]).toMatchObject({ id: 'd1', pageContent: 'About cats', metadata: { source: 'a.md' } });
  });

  it('proxies streamEvents and streamLog of the remote chain', async () => {
    const joke = new RemoteRunnable<{ topic: string }, string>({ url: `${server.url}/joke` });
    const events: StreamEvent[] = await toArray(joke.streamEvents({ topic: 'cats' }, {}, { includeTypes: ['chat_model'] }));
    expect(events[0]).toMatchObject({ event: 'on_chat_model_start', name: 'FakeListChatModel' });
    expect(events.filter((e) => e.event === 'on_chat_model_stream').length).toBeGreaterThan(3);
    const patches = await toArray(joke.streamLog({ topic: 'cats' }));
    expect(patches[0]?.ops[0]).toMatchObject({ op: 'replace', path: '', value: { name: '/joke' } });
  });

  it('pipes into local chains, as a runnable', async () => {
    const echo = new RemoteRunnable<{ name: string }, string>({ url: `${server.url}/echo` });
    const chain = lambda((name: string) => ({ name })).pipe(echo).pipe((text: string) => text.toUpperCase());
    expect(await chain.invoke('ada')).toBe('HELLO ADA');
  });

  it('surfaces server errors with their code and message, before and after a stream starts', async () => {
    const echo = new RemoteRunnable<unknown, string>({ url: `${server.url}/echo` });
    await expect(echo.invoke({ name: 5 })).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID', statusCode: 422, detail: [{ loc: ['name'] }] });
    const failing = new RemoteRunnable<unknown, string>({ url: `${server.url}/failing` });
    await expect(toArray(failing.stream({ when: 'typed' }))).rejects.toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_RATE_LIMITED', statusCode: 429 });
    await expect(new RemoteRunnable({ url: 'http://127.0.0.1:9/nothing' }).invoke(1)).rejects.toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_UNAVAILABLE' });
  });

  it('closes the connection on abort, and the server aborts the run', async () => {
    const slow = new RemoteRunnable<unknown, string>({ url: `${server.url}/slow` });
    const before = observed.aborted;
    const controller = new AbortController();
    const stream = slow.stream({}, { signal: controller.signal });
    await stream.next();
    controller.abort();
    await expect(stream.next()).rejects.toMatchObject({ code: 'RUNNEL_ERR_ABORTED' });
    await settleWithin(
      (async () => {
        while (observed.aborted === before) await new Promise((r) => setTimeout(r, 10));
      })(),
      2000,
    );
  });
});

describe('RemoteRunnable inside a served chain', () => {
  it("keeps the server's internal metadata (its caller's identity) from the remote server", async () => {
    // The remote server records the configs it is sent, as a LangServe server that takes any metadata would see them.
    const configs: unknown[] = [];
    const upstream = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        const sent = JSON.parse(body) as { config: unknown };
        configs.push(...(Array.isArray(sent.config) ? sent.config : [sent.config]));
        if (req.url?.endsWith('/stream') === true) {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.end('event: data\r\ndata: "ok"\r\n\r\nevent: end\r\n\r\n');
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(req.url?.endsWith('/batch') === true ? { output: ['ok'], metadata: {} } : { output: 'ok', metadata: {} }));
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const remote = new RemoteRunnable<string, string>({ url: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/echo` });
    const chain = defineChain({ path: '/relay', configKeys: ['configurable', 'metadata'], runnable: lambda((text: string) => text).pipe(remote) });
    const app = await buildApp({ chains: [chain] as ChainSpec<never, unknown>[], config: { apiKeys: [{ name: 'alice', key: 'alice-key-0123456789abcdef' }] } });
    try {
      const headers = { authorization: 'Bearer alice-key-0123456789abcdef', 'content-type': 'application/json' };
      for (const [endpoint, body] of [
        ['invoke', { input: 'hi', config: { metadata: { topic: 'cats' } } }],
        ['stream', { input: 'hi', config: { metadata: { topic: 'cats' } } }],
      ] as const) {
        const answer = await app.inject({ method: 'POST', url: `/relay/${endpoint}`, headers, payload: body });
        expect(answer.statusCode).toBe(200);
      }
      await remote.batch(['hi'], { metadata: { topic: 'cats', __identity: 'alice', __cache_partition: 'alice' } });
      expect(configs).toHaveLength(3);
      for (const config of configs) expect(config).toEqual({ metadata: { topic: 'cats' } });
    } finally {
      await app.close();
      await new Promise((resolve) => upstream.close(resolve));
    }
  });
});

describe('RemoteRunnable with credentials in its URL', () => {
  it('is refused where it is made, without quoting them: every call failed with a message that did, which clients of a served chain read', () => {
    let thrown: unknown;
    try {
      new RemoteRunnable({ url: 'http://svc:pw-SECRET@127.0.0.1:9/joke' });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toMatchObject({ code: 'RUNNEL_ERR_INVALID_ARGUMENT' });
    expect((thrown as Error).message).toContain('headers');
    expect((thrown as Error).message).not.toContain('pw-SECRET');
    expect(() => new RemoteRunnable({ url: 'http://svc@127.0.0.1:9/joke' })).toThrow(/user name or password/);
    // An @ in the path is no credential.
    expect(() => new RemoteRunnable({ url: 'http://127.0.0.1:9/team@x/joke' })).not.toThrow();
  });
});

describe('parseSse', () => {
  it('handles \\r\\n, \\n and \\r line ends, multi-line data and comments, across chunk boundaries', async () => {
    const bytes = new TextEncoder().encode(': ping\r\n\r\nevent: data\r\ndata: 1\r\n\r\nevent: data\ndata: a\ndata: b\n\nevent: end\r\r');
    const chunks = async function* () {
      for (let i = 0; i < bytes.length; i += 3) yield bytes.slice(i, i + 3);
    };
    expect(await toArray(parseSse(chunks()))).toEqual([
      { event: 'data', data: '1' },
      { event: 'data', data: 'a\nb' },
      { event: 'end', data: '' },
    ]);
  });

  it("keeps each message's own id (what a client sends back as Last-Event-ID)", async () => {
    const bytes = new TextEncoder().encode('id: 1-0\r\nevent: metadata\r\ndata: {}\r\n\r\nevent: data\r\ndata: 1\r\n\r\nid: 1-2\nevent: end\n\n');
    const chunks = async function* () {
      yield bytes;
    };
    expect(await toArray(parseSse(chunks()))).toEqual([
      { id: '1-0', event: 'metadata', data: '{}' },
      { event: 'data', data: '1' },
      { id: '1-2', event: 'end', data: '' },
    ]);
  });
});
