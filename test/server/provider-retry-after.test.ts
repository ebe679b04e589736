/**
 * A provider's rate limit reaches the client with the wait the provider asked
 * for: the model's request goes through its real SDK to a local server
 * speaking the provider's wire format, the 429 comes back over real HTTP, and
 * the clients read `retry-after` — Node's fetch on `/invoke`, the real openai
 * SDK on `/v1/chat/completions`.
 */
import type { FastifyInstance } from 'fastify';
import { createServer } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, ChatAnthropic, ChatOpenAI, defineChain, generator, JsonOutputParser, providerRetryAfter, RunnelError, type ChainSpec, type ChatModel } from '../../src/index.js';
import { startProviderServer, type ProviderServer } from '../support/provider-server.js';
import { jsonLogLines } from '../support/log-lines.js';

const KEY = 'sk-test-canary-4f9d2c';

const providers = [
  { name: 'openai' as const, make: (server: ProviderServer, model: string): ChatModel => new ChatOpenAI({ apiKey: KEY, baseURL: server.url, model, maxRetries: 0 }) },
  { name: 'anthropic' as const, make: (server: ProviderServer, model: string): ChatModel => new ChatAnthropic({ apiKey: KEY, baseURL: server.url, model, maxRetries: 0 }) },
];

describe.each(providers)('a $name rate limit, passed on', ({ name, make }) => {
  let server: ProviderServer;
  let app: FastifyInstance;
  let base: string;

  beforeAll(async () => {
    server = await startProviderServer(name);
    const chain = (path: string, model: string) =>
      defineChain({ path, runnable: make(server, model), messages: { toInput: ({ turns }) => ({ input: turns.at(-1)?.text ?? '' }) } });
    app = await buildApp({
      chains: [chain('/long', 'rate-limited-long'), chain('/until', 'rate-limited-until'), chain('/short', 'rate-limited'), chain('/once', 'rate-limited-once'), chain('/outage', 'unavailable-long')] as ChainSpec<never, unknown>[],
    });
    base = await app.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await app.close();
    await server.close();
  });

  it('answers /invoke 429 with the retry-after the provider sent', async () => {
    for (const [path, wait] of [['/long', 7], ['/short', 1]] as const) {
      const res = await fetch(`${base}${path}/invoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: 'hi' }) });
      expect(res.status, path).toBe(429);
      expect(((await res.json()) as { code: string }).code).toBe('RUNNEL_ERR_PROVIDER_RATE_LIMITED');
      expect(res.headers.get('retry-after'), path).toBe(String(wait));
    }
    // An HTTP date two minutes ahead: about 120 s, whatever the clock did meanwhile.
    const until = await fetch(`${base}/until/invoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: 'hi' }) });
    expect(until.status).toBe(429);
    expect(Number(until.headers.get('retry-after'))).toBeGreaterThan(60);
    expect(Number(until.headers.get('retry-after'))).toBeLessThanOrEqual(121);
    // An outage that said how long it lasts: 502, with that wait.
    const outage = await fetch(`${base}/outage/invoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: 'hi' }) });
    expect(outage.status).toBe(502);
    expect(((await outage.json()) as { code: string }).code).toBe('RUNNEL_ERR_PROVIDER_UNAVAILABLE');
    expect(outage.headers.get('retry-after')).toBe('120');
  });

  it('answers /v1/chat/completions 429 with it, as the openai SDK reads it', async () => {
    const client = new OpenAI({ apiKey: 'unused', baseURL: `${base}/v1`, maxRetries: 0 });
    const failure = await client.chat.completions.create({ model: 'long', messages: [{ role: 'user', content: 'hi' }] }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(OpenAI.RateLimitError);
    expect((failure as InstanceType<typeof OpenAI.RateLimitError>).headers.get('retry-after')).toBe('7');
  });

  it('answers a streamed completion that fails before its first piece with an HTTP 429 too, which the SDK retries', async () => {
    const strict = new OpenAI({ apiKey: 'unused', baseURL: `${base}/v1`, maxRetries: 0 });
    const failure = await strict.chat.completions.create({ model: 'long', stream: true, messages: [{ role: 'user', content: 'hi' }] }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(OpenAI.RateLimitError);
    expect((failure as InstanceType<typeof OpenAI.RateLimitError>).headers.get('retry-after')).toBe('7');
    // The provider refuses the first request only: the SDK's own retry (after the 1 s passed on) gets the answer.
    const retrying = new OpenAI({ apiKey: 'unused', baseURL: `${base}/v1`, maxRetries: 1 });
    const before = server.requests.length;
    let text = '';
    for await (const chunk of await retrying.chat.completions.create({ model: 'once', stream: true, messages: [{ role: 'user', content: 'hi' }] })) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe('Why did the cat sit?');
    expect(server.requests.length - before).toBe(2);
  });
});

describe('providerRetryAfter', () => {
  const rateLimited = (headers: Record<string, string>) => ({ message: 'wrapped', cause: { status: 429, headers: new Headers(headers) } });

  it('reads retry-after-ms first, then retry-after as seconds or a date, in whole seconds from 1 to 3600', () => {
    const now = Date.parse('2026-12-02T10:00:00Z');
    expect(providerRetryAfter(rateLimited({ 'retry-after-ms': '2500', 'retry-after': '9' }), now)).toBe(3);
    expect(providerRetryAfter(rateLimited({ 'retry-after': '9' }), now)).toBe(9);
    expect(providerRetryAfter(rateLimited({ 'retry-after': '0' }), now)).toBe(1);
    expect(providerRetryAfter(rateLimited({ 'retry-after': '86400' }), now)).toBe(3600);
    expect(providerRetryAfter(rateLimited({ 'retry-after': 'Wed, 02 Dec 2026 10:00:30 GMT' }), now)).toBe(30);
    expect(providerRetryAfter({ cause: { headers: { 'retry-after': '4' } } }, now)).toBe(4);
    // A blank retry-after-ms does not hide a good retry-after.
    expect(providerRetryAfter(rateLimited({ 'retry-after-ms': ' ', 'retry-after': '6' }), now)).toBe(6);
  });

  it('says nothing for what holds no usable wait', () => {
    for (const error of [undefined, null, 'text', new Error('x'), rateLimited({}), rateLimited({ 'retry-after': 'soon' }), rateLimited({ 'retry-after-ms': '-5' }), rateLimited({ 'retry-after-ms': '0x10' }), rateLimited({ 'retry-after': '1e3' })]) {
      expect(providerRetryAfter(error)).toBeUndefined();
    }
  });
});

describe('a streamed chat completion opens with its first piece', () => {
  /** A chain whose first piece waits for `release`, or fails when `fail` is set. */
  function gated() {
    let release!: (value: 'go' | 'fail') => void;
    const gate = new Promise<'go' | 'fail'>((resolve) => (release = resolve));
    let aborted!: () => void;
    const abortSeen = new Promise<void>((resolve) => (aborted = resolve));
    const chain = defineChain({
      path: '/gated',
      runnable: generator(async function* (_inputs: AsyncIterable<string>, config) {
        config.signal?.addEventListener('abort', () => aborted());
        if ((await gate) === 'fail') throw new RunnelError('RUNNEL_ERR_PROVIDER_UNAVAILABLE', 'The model provider failed');
        yield 'late piece';
      }),
      messages: { toInput: () => ({ input: 'hi' }) },
    });
    return { chain: chain as ChainSpec<never, unknown>, release: (how: 'go' | 'fail') => release(how), abortSeen };
  }
  const ask = (base: string, signal?: AbortSignal) =>
    fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'gated', stream: true, messages: [{ role: 'user', content: 'hi' }] }), signal });

  it('opens after a ping interval without one, and a failure after that is an error frame', async () => {
    const { chain, release } = gated();
    const app = await buildApp({ chains: [chain], config: { pingMs: 50 } });
    try {
      const base = await app.listen({ host: '127.0.0.1', port: 0 });
      // The headers arrive while the chain still waits for its gate: the stream opened on its own.
      const res = await ask(base);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
      release('fail');
      const body = await res.text();
      expect(body).toContain('"code":"RUNNEL_ERR_PROVIDER_UNAVAILABLE"');
      expect(body).not.toContain('[DONE]');
    } finally {
      await app.close();
    }
  });

  it('answers a shutdown before the first piece as a 503 with retry-after and connection: close', async () => {
    const { chain } = gated();
    const app = await buildApp({ chains: [chain], config: { shutdownGraceMs: 50 } });
    const base = await app.listen({ host: '127.0.0.1', port: 0 });
    const answer = ask(base);
    while (app.runnel.streams.size === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const closing = app.shutdown();
    const res = await answer;
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(res.headers.get('connection')).toBe('close');
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('RUNNEL_ERR_SHUTTING_DOWN');
    await closing;
  });

  it('aborts the run when the client goes before the first piece, and writes nothing to the gone socket', async () => {
    const { chain, abortSeen } = gated();
    const app = await buildApp({ chains: [chain] });
    try {
      const base = await app.listen({ host: '127.0.0.1', port: 0 });
      const controller = new AbortController();
      const answer = ask(base, controller.signal).catch((error: unknown) => error);
      while (app.runnel.streams.size === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      controller.abort();
      expect(await answer).toBeInstanceOf(Error);
      await abortSeen;
      while (app.runnel.streams.size > 0) await new Promise((resolve) => setTimeout(resolve, 5));
    } finally {
      await app.close();
    }
  });
});

describe('a provider failure in the log', () => {
  it("says what failed (class, status, provider code, network error) at warn, in a request or a background run, and never the provider's message or the key", async () => {
    const server = await startProviderServer('openai');
    const closed = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => resolve(port));
      });
    });
    const { lines, stream } = jsonLogLines();
    const model = (baseURL: string, name: string) => new ChatOpenAI({ apiKey: KEY, baseURL, model: name, maxRetries: 0 });
    const app = await buildApp({
      chains: [
        defineChain({ path: '/down', runnable: model(server.url, 'error') }),
        defineChain({ path: '/nowhere', runnable: model(`http://127.0.0.1:${closed}/v1`, 'text') }),
        defineChain({ path: '/refused', runnable: model(server.url, 'unauthorized') }),
        // A model that answers prose where the chain wants JSON.
        defineChain({ path: '/unparsed', runnable: model(server.url, 'text').pipe(new JsonOutputParser()) }),
      ] as ChainSpec<never, unknown>[],
      logger: { level: 'info', stream },
    });
    try {
      const invoke = (path: string) => app.inject({ method: 'POST', url: `${path}/invoke`, headers: { 'content-type': 'application/json' }, payload: { input: 'hi' } });
      expect((await invoke('/down')).statusCode).toBe(502);
      expect((await invoke('/nowhere')).statusCode).toBe(502);
      const refused = await invoke('/refused');
      expect(refused.statusCode).toBe(502);
      // A new user's probe: the answer said only "refused the request (401)"; the provider's own code says why.
      expect(refused.json().message).toMatch(/ refused the request \(401, invalid_api_key\)$/);
      const failures = lines.filter((line) => line.msg === 'model provider failed');
      expect(failures).toEqual([
        expect.objectContaining({ level: 40, code: 'RUNNEL_ERR_PROVIDER_UNAVAILABLE', provider_error: 'InternalServerError', provider_status: 500 }),
        expect.objectContaining({ level: 40, code: 'RUNNEL_ERR_PROVIDER_UNAVAILABLE', provider_error: 'APIConnectionError', network_error: 'ECONNREFUSED' }),
        expect.objectContaining({ level: 40, code: 'RUNNEL_ERR_PROVIDER_REJECTED', provider_error: 'AuthenticationError', provider_status: 401, provider_code: 'invalid_api_key' }),
      ]);
      // The provider's message quoted the key: neither the log nor the answer repeats it.
      expect(JSON.stringify(lines)).not.toContain(KEY);
      expect(refused.body).not.toContain(KEY);
      // An operator's trial: a 502 for an answer the parser could not read left only "request completed" in the
      // log. A warning now, without the answer's text.
      expect((await invoke('/unparsed')).statusCode).toBe(502);
      expect(lines.filter((line) => line.msg === 'model output not parsed')).toEqual([expect.objectContaining({ level: 40, code: 'RUNNEL_ERR_OUTPUT_PARSE' })]);
      expect(JSON.stringify(lines)).not.toContain('cat sit');

      // Under a background run (no request to log it with), the same line, with the run's id.
      lines.length = 0;
      const submitted = await app.inject({ method: 'POST', url: '/refused/runs', headers: { 'content-type': 'application/json' }, payload: { input: 'hi' } });
      expect(submitted.statusCode).toBe(202);
      const runId = (submitted.json() as { run_id: string }).run_id;
      const ended = await app.inject({ method: 'GET', url: `/refused/runs/${runId}/wait?timeout_s=30` });
      expect(ended.json()).toMatchObject({ status: 'error', error: { code: 'RUNNEL_ERR_PROVIDER_REJECTED' } });
      expect(lines.filter((line) => line.msg === 'model provider failed')).toEqual([
        expect.objectContaining({ level: 40, runId, code: 'RUNNEL_ERR_PROVIDER_REJECTED', provider_error: 'AuthenticationError', provider_status: 401, provider_code: 'invalid_api_key' }),
      ]);
      expect(JSON.stringify(lines)).not.toContain(KEY);
    } finally {
      await app.close();
      await server.close();
    }
  });
});
