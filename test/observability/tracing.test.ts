/**
 * Issue 17, traces: the real OTLP exporters (protobuf and JSON) send every
 * run's spans to a receiver in the test, which decodes them itself. The
 * shipped `/rag` (offline, on Postgres with pgvector) and `/joke` (the real
 * `openai` SDK against the local provider server) run behind requests that
 * carry a caller's `traceparent`.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import LZString from 'lz-string';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createChains } from '../../chains/index.js';
import { chatChain } from '../../chains/chat.js';
import { jokeChain } from '../../chains/joke.js';
import { buildApp, ChatOpenAI, connectServices, defineChain, FakeToolCallingModel, lambda, loadTracingConfig, RunnelError, type ChainSpec, type Services } from '../../src/index.js';
import { json as contentText } from '../../src/observability/tracing.js';
import { rawExchange } from '../helpers.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';
import { startProviderServer, type ProviderServer } from '../support/provider-server.js';
import { jsonLogLines } from '../support/log-lines.js';

const DATABASE_URL = process.env.RUNNEL_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/runnel_test';

/** A caller's trace: a random trace id and span id, sampled. */
function callerTrace(sampled = true): { traceId: string; spanId: string; traceparent: string } {
  const traceId = randomUUID().replace(/-/g, '');
  const spanId = randomUUID().replace(/-/g, '').slice(0, 16);
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-${sampled ? '01' : '00'}` };
}

/** Entered: the chain has the request; it then waits for its cancellation. */
let entered: () => void = () => undefined;
const hanging = defineChain({
  path: '/hang',
  runnable: lambda(
    (_input: unknown, config) =>
      new Promise((_resolve, reject) => {
        config.signal?.addEventListener('abort', () => reject(new Error('aborted')));
        entered();
      }),
  ),
});

/** Yields one chunk, then waits for its cancellation. */
const hangingStream = defineChain({
  path: '/hang-stream',
  runnable: lambda(async function* (_input: unknown, config) {
    yield 'first';
    await new Promise((resolve) => config.signal?.addEventListener('abort', resolve));
  }),
});

const failing = defineChain({
  path: '/broken',
  runnable: lambda(
    // Its message quotes its input, as an error of user code or a tool may.
    (input: { n: number }) => {
      throw new RunnelError('RUNNEL_ERR_PROVIDER_UNAVAILABLE', `the provider went away answering ${JSON.stringify(input)}`);
    },
    { input: z.object({ n: z.number() }) },
  ),
});

/** Serves `chains` with tracing to `receiver` under `env`; log lines go to `lines`. */
async function serve(chains: ChainSpec<never, unknown>[], receiver: OtlpReceiver, env: Record<string, string>, services?: Services, config: { bodyTimeoutMs?: number } = {}): Promise<{ app: FastifyInstance; url: string; lines: Record<string, unknown>[] }> {
  const { lines, stream } = jsonLogLines();
  const tracing = loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: 'runnel-under-test', OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=test,team=a%20b', ...env });
  const app = await buildApp({ chains, services, config: { tracing, ...config }, logger: { level: 'info', stream } });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, lines };
}

/** Flushes the app's spans until the receiver holds what `predicate` wants (the request's span ends after its response). */
async function collect(app: FastifyInstance, receiver: OtlpReceiver, predicate: (spans: ReceivedSpan[]) => boolean): Promise<void> {
  while (!predicate(receiver.spans)) {
    await app.runnel.tracing?.flush();
    if (!predicate(receiver.spans)) await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const ofTrace = (receiver: OtlpReceiver, traceId: string): ReceivedSpan[] => receiver.spans.filter((span) => span.traceId === traceId);

describe('traces of /rag over OTLP/protobuf', () => {
  let receiver: OtlpReceiver;
  let served: Awaited<ReturnType<typeof serve>>;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    const services = await connectServices({ databaseUrl: DATABASE_URL });
    const { chains, docs } = createChains({ services, env: {} });
    await docs.seed();
    served = await serve([...chains, failing, hanging, hangingStream] as ChainSpec<never, unknown>[], receiver, {}, services);
  });
  afterAll(async () => {
    await served.app.close();
    await receiver.close();
  });

  it('traces no health probe or metrics scrape (they would bury the requests’ traces); the request after them is traced', async () => {
    const probes = callerTrace();
    for (const path of ['/healthz', '/readyz', '/metrics']) await (await fetch(`${served.url}${path}`, { headers: { traceparent: probes.traceparent } })).text();
    const caller = callerTrace();
    expect((await fetch(`${served.url}/rag/input_schema`, { headers: { traceparent: caller.traceparent } })).status).toBe(200);
    await collect(served.app, receiver, (spans) => spans.some((span) => span.traceId === caller.traceId));
    expect(ofTrace(receiver, probes.traceId)).toEqual([]);
    expect(receiver.spans.filter((span) => /\/(healthz|readyz|metrics)$/.test(span.name))).toEqual([]);
  });

  it('makes one trace under the caller’s, nested as the runs nest, with no content recorded', async () => {
    const caller = callerTrace();
    const res = await fetch(`${served.url}/rag/invoke`, { method: 'POST', headers: { 'content-type': 'application/json', traceparent: caller.traceparent }, body: JSON.stringify({ input: { question: 'How is chat history stored?' } }) });
    expect(res.status).toBe(200);
    await collect(served.app, receiver, (spans) => spans.some((span) => span.traceId === caller.traceId && span.name === 'POST /rag/invoke'));
    const spans = ofTrace(receiver, caller.traceId);
    expect(receiver.contentTypes[0]).toBe('application/x-protobuf');

    // The request's span continues the caller's; the chain's root run is under it, named after its path.
    const http = spans.find((span) => span.name === 'POST /rag/invoke') as ReceivedSpan;
    expect(http.parentSpanId).toBe(caller.spanId);
    expect(http.kind).toBe(2); // SERVER
    expect(http.attributes).toMatchObject({ 'http.request.method': 'POST', 'http.route': '/rag/invoke', 'http.response.status_code': 200 });
    const root = spans.find((span) => span.name === '/rag') as ReceivedSpan;
    expect(root.parentSpanId).toBe(http.spanId);
    expect(root.resource).toMatchObject({ 'service.name': 'runnel-under-test', 'deployment.environment': 'test', team: 'a b' });

    // Times decode as times: each span within the request's.
    expect(http.endMs).toBeGreaterThanOrEqual(http.startMs);
    for (const span of spans) expect(span.startMs).toBeGreaterThanOrEqual(http.startMs);

    // Every span hangs off another of the same trace, up to the request's.
    const ids = new Set(spans.map((span) => span.spanId));
    for (const span of spans) if (span !== http) expect(ids.has(span.parentSpanId)).toBe(true);

    const byType = (type: string) => spans.filter((span) => span.attributes['runnel.run_type'] === type);
    expect(byType('retriever')).toHaveLength(1);
    expect(byType('retriever')[0]?.attributes['runnel.retriever.documents']).toBe(4);
    expect(byType('prompt')).toHaveLength(1);
    expect(byType('parser')).toHaveLength(1);
    const [model] = byType('chat_model');
    expect(model?.name).toMatch(/^chat /);
    expect(model?.kind).toBe(3); // CLIENT
    expect(model?.attributes).toMatchObject({ 'gen_ai.operation.name': 'chat' });
    expect(typeof model?.attributes['gen_ai.request.model']).toBe('string');

    // User data stays out unless RUNNEL_TRACE_CONTENT=true.
    const keys = spans.flatMap((span) => Object.keys(span.attributes));
    for (const key of ['gen_ai.input.messages', 'gen_ai.output.messages', 'runnel.input', 'runnel.output']) expect(keys).not.toContain(key);
    expect(JSON.stringify(spans)).not.toContain('How is chat history stored?');
  });

  // A probe: a failed run's status message was its error's whole message, which may quote the run's input (a
  // calculator's expression), content off.
  it('sets an error status with the Runnel code on a failing run, and no word of its message with content off', async () => {
    const caller = callerTrace();
    const res = await fetch(`${served.url}/broken/invoke`, { method: 'POST', headers: { 'content-type': 'application/json', traceparent: caller.traceparent }, body: JSON.stringify({ input: { n: 424242 } }) });
    expect(res.status).toBe(502);
    await res.text();
    await collect(served.app, receiver, (spans) => spans.some((span) => span.traceId === caller.traceId && span.name === 'POST /broken/invoke'));
    const root = ofTrace(receiver, caller.traceId).find((span) => span.name === '/broken') as ReceivedSpan;
    expect(root.status.code).toBe(2); // ERROR
    expect(root.attributes).toMatchObject({ 'runnel.error.code': 'RUNNEL_ERR_PROVIDER_UNAVAILABLE', 'error.type': 'RUNNEL_ERR_PROVIDER_UNAVAILABLE' });
    expect(root.status.message).toBe('RUNNEL_ERR_PROVIDER_UNAVAILABLE');
    expect(JSON.stringify(ofTrace(receiver, caller.traceId))).not.toContain('424242');
    const http = ofTrace(receiver, caller.traceId).find((span) => span.name === 'POST /broken/invoke') as ReceivedSpan;
    expect(http.attributes['http.response.status_code']).toBe(502);
    expect(http.status.code).toBe(2);
  });

  // A probe: a request whose client went away before its answer had status 200 on its span, where the metrics
  // and the log say 499.
  it('gives a request its client abandoned status 499 on its span', async () => {
    const caller = callerTrace();
    const reached = new Promise<void>((resolve) => (entered = resolve));
    const gone = new AbortController();
    const request = fetch(`${served.url}/hang/invoke`, { method: 'POST', signal: gone.signal, headers: { 'content-type': 'application/json', traceparent: caller.traceparent }, body: JSON.stringify({ input: 1 }) }).catch(() => undefined);
    await reached;
    gone.abort();
    await request;
    await collect(served.app, receiver, (spans) => spans.some((span) => span.traceId === caller.traceId && span.name === 'POST /hang/invoke'));
    const http = ofTrace(receiver, caller.traceId).find((span) => span.name === 'POST /hang/invoke') as ReceivedSpan;
    expect(http.attributes['http.response.status_code']).toBe(499);
    // A stream abandoned after it began (its 200 sent): 499 too, as the metrics count it (a review).
    const streamed = callerTrace();
    const cut = new AbortController();
    const res = await fetch(`${served.url}/hang-stream/stream`, { method: 'POST', signal: cut.signal, headers: { 'content-type': 'application/json', traceparent: streamed.traceparent }, body: JSON.stringify({ input: 1 }) });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let text = '';
    while (!text.includes('"first"')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    cut.abort();
    await reader.cancel().catch(() => undefined);
    await collect(served.app, receiver, (spans) => spans.some((span) => span.traceId === streamed.traceId && span.name === 'POST /hang-stream/stream'));
    const stream = ofTrace(receiver, streamed.traceId).find((span) => span.name === 'POST /hang-stream/stream') as ReceivedSpan;
    expect(stream.attributes['http.response.status_code']).toBe(499);
  });

  it('puts the trace and span ids on the request’s log lines', async () => {
    const caller = callerTrace();
    await (await fetch(`${served.url}/joke/invoke`, { method: 'POST', headers: { 'content-type': 'application/json', traceparent: caller.traceparent }, body: JSON.stringify({ input: { topic: 'logs' } }) })).text();
    await collect(served.app, receiver, (spans) => spans.some((span) => span.traceId === caller.traceId && span.name === 'POST /joke/invoke'));
    const http = ofTrace(receiver, caller.traceId).find((span) => span.name === 'POST /joke/invoke') as ReceivedSpan;
    const mine = served.lines.filter((line) => line.trace_id === caller.traceId);
    expect(mine.length).toBeGreaterThan(0);
    for (const line of mine) expect(line.span_id).toBe(http.spanId);
  });

  it('carries the caller’s tracestate on every span of the request, its runs’ included', async () => {
    const caller = callerTrace();
    const tracestate = 'vendor=opaque-1,other=x';
    await (await fetch(`${served.url}/joke/invoke`, { method: 'POST', headers: { 'content-type': 'application/json', traceparent: caller.traceparent, tracestate }, body: JSON.stringify({ input: { topic: 'state' } }) })).text();
    await collect(served.app, receiver, (spans) => spans.some((span) => span.traceId === caller.traceId && span.name === 'POST /joke/invoke'));
    const spans = ofTrace(receiver, caller.traceId);
    // The request's span, the chain's, its prompt's, its model's and its parser's.
    expect(spans.length).toBeGreaterThanOrEqual(5);
    for (const span of spans) expect({ name: span.name, traceState: span.traceState }).toEqual({ name: span.name, traceState: tracestate });
  });

  it('records nothing for a caller that did not sample its trace (parent-based sampling)', async () => {
    const caller = callerTrace(false);
    const sampled = callerTrace();
    await (await fetch(`${served.url}/joke/invoke`, { method: 'POST', headers: { 'content-type': 'application/json', traceparent: caller.traceparent }, body: JSON.stringify({ input: { topic: 'unsampled' } }) })).text();
    await (await fetch(`${served.url}/joke/invoke`, { method: 'POST', headers: { 'content-type': 'application/json', traceparent: sampled.traceparent }, body: JSON.stringify({ input: { topic: 'sampled' } }) })).text();
    await collect(served.app, receiver, (spans) => spans.some((span) => span.traceId === sampled.traceId && span.name === 'POST /joke/invoke'));
    expect(ofTrace(receiver, caller.traceId)).toEqual([]);
  });
});

describe('traces of a model call through the real openai SDK, over OTLP/JSON, with content on', () => {
  let receiver: OtlpReceiver;
  let provider: ProviderServer;
  let served: Awaited<ReturnType<typeof serve>>;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    provider = await startProviderServer('openai');
    const services = await connectServices({});
    const joke = jokeChain({ services, env: { OPENAI_API_KEY: 'sk-test-0000', OPENAI_BASE_URL: provider.url } });
    // A model each request may pick, as a chain that offers several does.
    const picked = defineChain({
      path: '/picked',
      runnable: new ChatOpenAI({ apiKey: 'sk-test-0000', baseURL: provider.url, model: 'gpt-4o-mini', temperature: 0.1, maxRetries: 0 }).configurableFields({
        model: { id: 'model', schema: z.string() },
        temperature: { id: 'temperature', schema: z.number().min(0).max(2) },
      }),
    });
    served = await serve([joke, picked] as ChainSpec<never, unknown>[], receiver, { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', RUNNEL_TRACE_CONTENT: 'true' }, services);
  });
  afterAll(async () => {
    await served.app.close();
    await provider.close();
    await receiver.close();
  });

  it('follows the GenAI conventions, and the provider’s request carries the model span as its parent', async () => {
    const caller = callerTrace();
    const res = await fetch(`${served.url}/joke/stream`, { method: 'POST', headers: { 'content-type': 'application/json', traceparent: caller.traceparent, tracestate: 'vendor=7' }, body: JSON.stringify({ input: { topic: `cats ${randomUUID()}` } }) });
    expect(await res.text()).toContain('event: end');
    await collect(served.app, receiver, (spans) => spans.some((span) => span.traceId === caller.traceId && span.name === 'POST /joke/stream'));
    expect(receiver.contentTypes[0]).toMatch(/^application\/json/);
    const model = ofTrace(receiver, caller.traceId).find((span) => span.attributes['runnel.run_type'] === 'chat_model') as ReceivedSpan;
    expect(model.name).toBe('chat gpt-4o-mini');
    expect(model.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.system': 'openai',
      'gen_ai.request.model': 'gpt-4o-mini',
      'gen_ai.usage.input_tokens': 12,
      'gen_ai.usage.output_tokens': 5,
      'gen_ai.response.finish_reasons': ['stop'],
    });
    // Content is on here: the prompt and the completion are on the span.
    // One conversation (it was LangServe's batch of one: a list in a list), in the conventions' JSON schema:
    // roles and parts.
    expect(JSON.parse(String(model.attributes['gen_ai.input.messages']))).toEqual([
      { role: 'system', parts: [{ type: 'text', content: 'You are a comedian. Answer with one short, clean joke.' }] },
      { role: 'user', parts: [{ type: 'text', content: expect.stringMatching(/^Tell me a joke about cats /) }] },
    ]);
    expect(JSON.parse(String(model.attributes['gen_ai.output.messages']))).toEqual([
      { role: 'assistant', parts: [{ type: 'text', content: expect.stringContaining('Why did the cat sit?') }], finish_reason: 'stop' },
    ]);

    const sent = provider.requests.at(-1)?.headers;
    expect(sent?.traceparent).toBe(`00-${caller.traceId}-${model.spanId}-01`);
    // The caller's tracestate goes on with the trace, to the provider and on the model's span.
    expect(sent?.tracestate).toBe('vendor=7');
    expect(model.traceState).toBe('vendor=7');
  });

  // A chain author's probe: the model span and the events named the model the chain was built with.
  it('names the model and temperature a request chose (configurableFields), as the provider was asked', async () => {
    const caller = callerTrace();
    const res = await fetch(`${served.url}/picked/stream_events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: caller.traceparent },
      body: JSON.stringify({ input: 'Tell me a joke', config: { configurable: { model: 'gpt-4o', temperature: 0.9 } } }),
    });
    const frames = (await res.text()).split('\n').filter((line) => line.startsWith('data: {'));
    const started = frames.map((line) => JSON.parse(line.slice('data: '.length)) as { event: string; metadata: Record<string, unknown> }).find((event) => event.event === 'on_chat_model_start');
    expect(started?.metadata).toMatchObject({ ls_provider: 'openai', ls_model_name: 'gpt-4o', ls_temperature: 0.9 });
    expect(provider.requests.at(-1)?.body).toMatchObject({ model: 'gpt-4o', temperature: 0.9 });
    await collect(served.app, receiver, (spans) => spans.some((span) => span.traceId === caller.traceId && span.name === 'POST /picked/stream_events'));
    const model = ofTrace(receiver, caller.traceId).find((span) => span.attributes['runnel.run_type'] === 'chat_model') as ReceivedSpan;
    expect(model.name).toBe('chat gpt-4o');
    expect(model.attributes).toMatchObject({ 'gen_ai.request.model': 'gpt-4o', 'gen_ai.request.temperature': 0.9 });
  });

  it('names the prompt-cache and reasoning tokens of a model call as the GenAI conventions do', async () => {
    provider.script = () => ({ text: 'Why did the cat sit?', openAIUsage: { prompt_tokens_details: { cached_tokens: 8 }, completion_tokens_details: { reasoning_tokens: 3 } } });
    try {
      const caller = callerTrace();
      const res = await fetch(`${served.url}/picked/invoke`, { method: 'POST', headers: { 'content-type': 'application/json', traceparent: caller.traceparent }, body: JSON.stringify({ input: `cache ${randomUUID()}` }) });
      expect(res.status).toBe(200);
      await collect(served.app, receiver, (spans) => spans.some((span) => span.traceId === caller.traceId && span.name === 'POST /picked/invoke'));
      const model = ofTrace(receiver, caller.traceId).find((span) => span.attributes['runnel.run_type'] === 'chat_model') as ReceivedSpan;
      expect(model.attributes).toMatchObject({ 'gen_ai.usage.input_tokens': 10, 'gen_ai.usage.cache_read.input_tokens': 8, 'gen_ai.usage.output_tokens': 5, 'gen_ai.usage.reasoning.output_tokens': 3 });
      expect(model.attributes).not.toHaveProperty('gen_ai.usage.cache_creation.input_tokens');
    } finally {
      provider.script = undefined;
    }
  });

  it('continues the submitting request’s trace in a background run', async () => {
    const caller = callerTrace();
    const submitted = (await (await fetch(`${served.url}/joke/runs`, { method: 'POST', headers: { 'content-type': 'application/json', traceparent: caller.traceparent, tracestate: 'vendor=queued' }, body: JSON.stringify({ input: { topic: 'queued' } }) })).json()) as { run_id: string };
    const ended = (await (await fetch(`${served.url}/joke/runs/${submitted.run_id}/wait`)).json()) as { status: string };
    expect(ended.status).toBe('success');
    await collect(served.app, receiver, (spans) => spans.some((span) => span.traceId === caller.traceId && span.name === '/joke'));
    const spans = ofTrace(receiver, caller.traceId);
    const submit = spans.find((span) => span.name === 'POST /joke/runs') as ReceivedSpan;
    const root = spans.find((span) => span.name === '/joke') as ReceivedSpan;
    expect(root.parentSpanId).toBe(submit.spanId);
    expect(spans.some((span) => span.attributes['runnel.run_type'] === 'chat_model')).toBe(true);
    // The caller's tracestate rides in the stored run too: the worker's spans carry it.
    for (const span of spans) expect({ name: span.name, traceState: span.traceState }).toEqual({ name: span.name, traceState: 'vendor=queued' });
  });
});

describe('traces of a model call through the real anthropic SDK', () => {
  let receiver: OtlpReceiver;
  let provider: ProviderServer;
  let served: Awaited<ReturnType<typeof serve>>;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    provider = await startProviderServer('anthropic');
    const services = await connectServices({});
    const joke = jokeChain({ services, env: { ANTHROPIC_API_KEY: 'sk-ant-test-0000', ANTHROPIC_BASE_URL: provider.url } });
    served = await serve([joke] as ChainSpec<never, unknown>[], receiver, {}, services);
  });
  afterAll(async () => {
    await served.app.close();
    await provider.close();
    await receiver.close();
  });

  it('sends the model span as the parent of the provider’s request, with the caller’s tracestate', async () => {
    const caller = callerTrace();
    const res = await fetch(`${served.url}/joke/invoke`, { method: 'POST', headers: { 'content-type': 'application/json', traceparent: caller.traceparent, tracestate: 'vendor=ant' }, body: JSON.stringify({ input: { topic: `dogs ${randomUUID()}` } }) });
    expect(res.status).toBe(200);
    await collect(served.app, receiver, (spans) => spans.some((span) => span.traceId === caller.traceId && span.name === 'POST /joke/invoke'));
    const model = ofTrace(receiver, caller.traceId).find((span) => span.attributes['runnel.run_type'] === 'chat_model') as ReceivedSpan;
    expect(model.attributes['gen_ai.provider.name']).toBe('anthropic');
    const sent = provider.requests.at(-1)?.headers;
    expect(sent?.traceparent).toBe(`00-${caller.traceId}-${model.spanId}-01`);
    expect(sent?.tracestate).toBe('vendor=ant');
  });
});

// A probe: the log replaces a path's conversation ids (a session's, an AI SDK chat's, a config hash) with
// [redacted] — on a server without keys a session id is all anyone needs to read that conversation — but the
// request's span sent the raw path as `url.path` to the collector, content recording off or not.
describe('a request naming a conversation in its path', () => {
  it('has the ids its log line leaves out left out of its span too', async () => {
    const receiver = await startOtlpReceiver();
    const services = await connectServices({});
    const served = await serve([chatChain({ services, env: {}, offlineDelayMs: 0 })] as ChainSpec<never, unknown>[], receiver, {}, services);
    try {
      const session = `secret-session-${randomUUID()}`;
      const chat = `secret-chat-${randomUUID()}`;
      const hash = LZString.compressToEncodedURIComponent(JSON.stringify({ configurable: { session_id: session } }));
      const traces = { history: callerTrace(), resume: callerTrace(), hashed: callerTrace() };
      const history = await fetch(`${served.url}/chat/history/${session}`, { headers: { traceparent: traces.history.traceparent } });
      expect(history.status).toBe(200);
      expect(await history.json()).toEqual({ session_id: session, messages: [] });
      const resume = await fetch(`${served.url}/chat/ui_stream/${chat}/stream`, { headers: { traceparent: traces.resume.traceparent } });
      expect(resume.status).toBe(204);
      expect(await resume.text()).toBe('');
      const hashed = await fetch(`${served.url}/chat/c/${hash}/invoke`, { method: 'POST', headers: { 'content-type': 'application/json', traceparent: traces.hashed.traceparent }, body: JSON.stringify({ input: { message: 'hello' } }) });
      expect(hashed.status).toBe(200);
      expect(((await hashed.json()) as { output: string }).output).toContain('hello');
      await collect(served.app, receiver, (spans) => Object.values(traces).every((trace) => spans.some((span) => span.traceId === trace.traceId && span.kind === 2)));
      const http = (trace: { traceId: string }) => ofTrace(receiver, trace.traceId).find((span) => span.kind === 2) as ReceivedSpan;
      expect(http(traces.history).attributes).toMatchObject({ 'http.route': '/chat/history/:session_id', 'url.path': '/chat/history/[redacted]' });
      expect(http(traces.resume).attributes).toMatchObject({ 'url.path': '/chat/ui_stream/[redacted]/stream' });
      expect(http(traces.hashed).attributes).toMatchObject({ 'url.path': '/chat/c/[redacted]/invoke' });
      const sent = JSON.stringify(receiver.spans);
      for (const secret of [session, chat, hash]) expect(sent).not.toContain(secret);
    } finally {
      await served.app.close();
      await services.close();
      await receiver.close();
    }
  });
});

// A probe: an endpoint the collector refused, or that could not be reached, lost every span without a word —
// nothing in the log, nothing in /metrics.
describe('a request whose body times out', () => {
  // Answered 408 on its socket, past its response: its span said 499 (a client gone) and no line of the log
  // said how it ended.
  it('has status 408 on its span and a line in the log', async () => {
    const receiver = await startOtlpReceiver();
    const served = await serve([failing] as ChainSpec<never, unknown>[], receiver, {}, undefined, { bodyTimeoutMs: 300 });
    try {
      const caller = callerTrace();
      // A body announced whole and never sent: its timeout answers it.
      const received = await rawExchange(new URL(served.url).port, `POST /broken/invoke HTTP/1.1\r\nhost: 127.0.0.1\r\ntraceparent: ${caller.traceparent}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{`);
      expect(received).toMatch(/^HTTP\/1\.1 408 /);
      await collect(served.app, receiver, (spans) => spans.some((span) => span.traceId === caller.traceId));
      const http = ofTrace(receiver, caller.traceId).find((span) => span.name === 'POST /broken/invoke') as ReceivedSpan;
      expect(http.attributes['http.response.status_code']).toBe(408);
      expect(served.lines).toContainEqual(expect.objectContaining({ msg: 'request timed out', req: { method: 'POST', url: '/broken/invoke' }, res: { statusCode: 408 } }));
    } finally {
      await served.app.close();
      await receiver.close();
    }
  });
});

describe('a collector that refuses the spans', () => {
  it('is said in a warning (a minute at most apart) and counted in runnel_trace_spans_dropped_total', async () => {
    const receiver = await startOtlpReceiver({ answers: [400, 400] });
    const served = await serve([failing] as ChainSpec<never, unknown>[], receiver, {});
    try {
      await (await fetch(`${served.url}/failing/invoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"input": {}}' })).text();
      while (receiver.requests.length === 0) {
        await served.app.runnel.tracing?.flush();
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      await served.app.runnel.tracing?.flush();
      const warnings = served.lines.filter((line) => String(line.msg).startsWith('tracing: spans dropped: '));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({ level: 40, msg: expect.stringContaining('spans dropped: the collector answered 400;') });
      expect(JSON.stringify(warnings)).not.toContain(receiver.url);
      const metrics = await (await fetch(`${served.url}/metrics`)).text();
      expect(Number(/^runnel_trace_spans_dropped_total (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThan(0);
    } finally {
      await served.app.close();
      await receiver.close();
    }
  });
});

describe('a tool-calling conversation’s model spans, with content on', () => {
  it('write tool calls and tool answers as the GenAI conventions’ parts', async () => {
    const receiver = await startOtlpReceiver();
    const model = new FakeToolCallingModel({ responses: [{ content: '', tool_calls: [{ name: 'add', args: { a: 1, b: 2 }, id: 'call_1' }] }, 'The sum is 3.'] });
    const talk = defineChain({ path: '/talk', runnable: model });
    const served = await serve([talk] as ChainSpec<never, unknown>[], receiver, { RUNNEL_TRACE_CONTENT: 'true' });
    try {
      const send = async (input: unknown[]) => {
        const caller = callerTrace();
        const res = await fetch(`${served.url}/talk/invoke`, { method: 'POST', headers: { 'content-type': 'application/json', traceparent: caller.traceparent }, body: JSON.stringify({ input }) });
        expect(res.status).toBe(200);
        await res.text();
        await collect(served.app, receiver, (spans) => spans.some((span) => span.traceId === caller.traceId && span.attributes['runnel.run_type'] === 'chat_model'));
        const span = ofTrace(receiver, caller.traceId).find((one) => one.attributes['runnel.run_type'] === 'chat_model') as ReceivedSpan;
        return { input: JSON.parse(String(span.attributes['gen_ai.input.messages'])) as unknown, output: JSON.parse(String(span.attributes['gen_ai.output.messages'])) as unknown };
      };
      const asked = { type: 'human', content: 'What is 1 + 2?' };
      const first = await send([asked]);
      expect(first.input).toEqual([{ role: 'user', parts: [{ type: 'text', content: 'What is 1 + 2?' }] }]);
      // No text, one tool call; the provider's `tool_calls` is the conventions' `tool_call`.
      expect(first.output).toEqual([{ role: 'assistant', parts: [{ type: 'tool_call', id: 'call_1', name: 'add', arguments: { a: 1, b: 2 } }], finish_reason: 'tool_call' }]);
      const second = await send([asked, { type: 'ai', content: '', tool_calls: [{ name: 'add', args: { a: 1, b: 2 }, id: 'call_1' }] }, { type: 'tool', content: '3', tool_call_id: 'call_1' }]);
      expect(second.input).toEqual([
        { role: 'user', parts: [{ type: 'text', content: 'What is 1 + 2?' }] },
        { role: 'assistant', parts: [{ type: 'tool_call', id: 'call_1', name: 'add', arguments: { a: 1, b: 2 } }] },
        { role: 'tool', parts: [{ type: 'tool_call_response', id: 'call_1', response: '3' }] },
      ]);
      expect(second.output).toEqual([{ role: 'assistant', parts: [{ type: 'text', content: 'The sum is 3.' }], finish_reason: 'stop' }]);
    } finally {
      await served.app.close();
      await receiver.close();
    }
  });
});

describe('a failed run’s span, with content on', () => {
  it('keeps the error’s message, without the credentials of a URL it quotes (as the log does)', async () => {
    const receiver = await startOtlpReceiver();
    const failing = defineChain({
      path: '/connect',
      runnable: lambda((_: string) => {
        throw new Error('could not connect to postgres://runnel:s3cret-pw-77@db:5432/app');
      }),
    });
    const served = await serve([failing] as ChainSpec<never, unknown>[], receiver, { RUNNEL_TRACE_CONTENT: 'true' });
    try {
      const caller = callerTrace();
      const res = await fetch(`${served.url}/connect/invoke`, { method: 'POST', headers: { 'content-type': 'application/json', traceparent: caller.traceparent }, body: JSON.stringify({ input: 'x' }) });
      expect(res.status).toBe(500);
      await res.text();
      await collect(served.app, receiver, (spans) => spans.some((span) => span.traceId === caller.traceId && span.attributes['runnel.run_type'] !== undefined));
      const run = ofTrace(receiver, caller.traceId).find((span) => span.attributes['runnel.run_type'] !== undefined) as ReceivedSpan;
      expect(run.status.message).toContain('postgres://[redacted]@db:5432/app');
      expect(JSON.stringify(ofTrace(receiver, caller.traceId))).not.toContain('s3cret-pw-77');
    } finally {
      await served.app.close();
      await receiver.close();
    }
  });
});

describe('content attributes', () => {
  // A probe: the cut split an emoji's surrogate pair, and a lone half is not valid UTF-8 in protobuf.
  it('are cut at 8,192 characters, never between the halves of a surrogate pair', () => {
    const text = `${'a'.repeat(8_191)}😀tail`;
    const cut = contentText(text);
    expect(cut).toBe(`${'a'.repeat(8_191)}…`);
    expect(Buffer.from(cut, 'utf8').toString('utf8')).toBe(cut);
    expect(contentText('short')).toBe('short');
  });
});

describe('tracing settings', () => {
  it('is off without an endpoint, and reads the standard variables', () => {
    expect(loadTracingConfig({})).toBeUndefined();
    expect(loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' })).toBeUndefined();
    expect(loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' })).toBeUndefined();
    expect(loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'otlp' })?.url).toBe('http://c:4318/v1/traces');
    expect(loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'otlp, OTLP' })?.url).toBe('http://c:4318/v1/traces');
    expect(() => loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'otlp,console' })).toThrow(/OTEL_TRACES_EXPORTER: 'console' is not supported/);
    // Another exporter was taken for OTLP without a word.
    for (const exporter of ['jaeger', 'zipkin', 'console']) expect(() => loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: exporter }), exporter).toThrow(/OTEL_TRACES_EXPORTER: '.*' is not supported/);
    expect(loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' })).toMatchObject({ url: 'http://c:4318/v1/traces', protocol: 'http/protobuf', serviceName: 'runnel', sampler: 'parentbased_always_on', content: false });
    expect(loadTracingConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/custom', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://ignored' })?.url).toBe('http://c:4318/custom');
    expect(loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' })).toMatchObject({ sampler: 'traceidratio', ratio: 0.25 });
    expect(loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20x' })?.headers).toEqual({ authorization: 'Bearer x' });
    expect(loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c' })).toMatchObject({ compression: 'none', timeoutMs: 10_000, maxQueueSize: 2048, maxExportBatchSize: 512, scheduleDelayMs: 5000 });
    expect(
      loadTracingConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c',
        OTEL_EXPORTER_OTLP_COMPRESSION: 'gzip',
        OTEL_EXPORTER_OTLP_TIMEOUT: '1000',
        OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '2500',
        OTEL_BSP_MAX_QUEUE_SIZE: '100',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '512',
        OTEL_BSP_SCHEDULE_DELAY: '250',
      }),
    ).toMatchObject({ compression: 'gzip', timeoutMs: 2500, maxQueueSize: 100, maxExportBatchSize: 100, scheduleDelayMs: 250 });
  });

  it('refuses what it cannot do, naming the variable and never a header value', () => {
    expect(() => loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(/OTEL_EXPORTER_OTLP_PROTOCOL/);
    expect(() => loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'c:4318' })).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT/);
    // A probe: a port past 65535 and a URL without a host were taken, and every export failed unheard.
    for (const endpoint of ['http://127.0.0.1:99999', 'http://:4318', 'http://c:0']) expect(() => loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint }), endpoint).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT: must be an http/);
    expect(() => loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_TRACES_SAMPLER: 'sometimes' })).toThrow(/OTEL_TRACES_SAMPLER/);
    expect(() => loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_TRACES_SAMPLER_ARG: '2' })).toThrow(/OTEL_TRACES_SAMPLER_ARG/);
    expect(() => loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_EXPORTER_OTLP_TRACES_COMPRESSION: 'brotli' })).toThrow(/OTEL_EXPORTER_OTLP_TRACES_COMPRESSION: gzip or none/);
    const broken = () => loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20se%0Acret' });
    expect(broken).toThrow(/OTEL_EXPORTER_OTLP_HEADERS: a header name or value holds a character HTTP does not allow/);
    expect(broken).not.toThrow(/se.?cret/);
    expect(() => loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_BSP_MAX_QUEUE_SIZE: '0', OTEL_EXPORTER_OTLP_TIMEOUT: 'soon' })).toThrow(
      /OTEL_EXPORTER_OTLP_TIMEOUT: a whole number from 1 to 3600000\n- OTEL_BSP_MAX_QUEUE_SIZE: a whole number from 1 to 1000000/,
    );
    // An operator's trial: a delay past the hour was refused as "a whole number from 0", which named no bound;
    // and RUNNEL_TRACE_CONTENT=yes was taken while tracing was off, refused once it was on.
    expect(() => loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_BSP_SCHEDULE_DELAY: '9999999999' })).toThrow(/OTEL_BSP_SCHEDULE_DELAY: a whole number from 0 to 3600000/);
    expect(() => loadTracingConfig({ RUNNEL_TRACE_CONTENT: 'yes' })).toThrow(/RUNNEL_TRACE_CONTENT: true or false/);
    expect(loadTracingConfig({ RUNNEL_TRACE_CONTENT: 'true' })).toBeUndefined();
    expect(() => loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_EXPORTER_OTLP_HEADERS: 'secret-token' })).toThrow(/OTEL_EXPORTER_OTLP_HEADERS: each entry/);
    expect(() => loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_EXPORTER_OTLP_HEADERS: 'secret-token' })).not.toThrow(/secret-token/);
  });
});
