/**
 * Issue 16: the edges of `/v1/*` — every error in OpenAI's shape with the
 * status OpenAI would use (authentication and rate limits from the app's own
 * hooks included), which chains are models, how outputs that are not text
 * become an answer, and the routes in the OpenAPI document.
 */
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { AIMessage, buildApp, defineChain, generator, lambda, RunnelError, type ChainSpec, type ServerConfig } from '../../src/index.js';

const lastText = ({ turns }: { turns: { text: string }[] }) => ({ input: { text: turns.at(-1)?.text ?? '' } });

/** Fails as the message says: `redis`, `provider`, `bug`; otherwise echoes. */
const echo = defineChain({
  path: '/echo',
  runnable: lambda(({ text }: { text: string }) => {
    if (text === 'redis') throw new RunnelError('RUNNEL_ERR_REDIS_UNAVAILABLE', 'Redis did not answer');
    if (text === 'provider') throw new RunnelError('RUNNEL_ERR_PROVIDER_UNAVAILABLE', 'The model provider failed');
    if (text === 'bug') throw new Error('secret internals: OPENAI_API_KEY=sk-canary');
    return `echo: ${text}`;
  }),
  messages: { toInput: lastText },
});
const object = defineChain({
  path: '/object',
  runnable: generator(async function* (inputs: AsyncIterable<{ text: string }>) {
    for await (const _ of inputs);
    yield { answer: 'forty' };
    yield { answer: '-two', sources: ['a.md'] };
  }),
  messages: { toInput: lastText },
});
const message = defineChain({ path: '/message', runnable: lambda(({ text }: { text: string }) => new AIMessage({ content: `said ${text}`, tool_calls: [{ name: 'x', args: {} }] })), messages: { toInput: lastText } });
const hidden = defineChain({ path: '/hidden', runnable: lambda(() => 'no'), messages: { toInput: lastText }, enabledEndpoints: ['invoke'] });
const plain = defineChain({ path: '/plain', runnable: lambda(() => 'no') });
const chains = [echo, object, message, hidden, plain] as ChainSpec<never, unknown>[];

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});
async function start(config: Partial<ServerConfig> = {}): Promise<FastifyInstance> {
  app = await buildApp({ chains, config });
  return app;
}
const ask = (text: string, extra: Record<string, unknown> = {}) => ({ model: 'echo', messages: [{ role: 'user', content: text }], ...extra });
async function complete(a: FastifyInstance, payload: unknown, headers: Record<string, string> = {}) {
  const res = await a.inject({ method: 'POST', url: '/v1/chat/completions', payload: payload as Record<string, unknown>, headers });
  return { status: res.statusCode, headers: res.headers, json: res.json() as Record<string, any> };
}

describe('errors on /v1 in OpenAI\'s shape', () => {
  it('401 invalid_api_key from the authentication hook, on every /v1 route', async () => {
    const a = await start({ apiKeys: [{ name: 'ada', key: 'ada-key-0123456789abcdef' }] });
    for (const [method, url] of [['GET', '/v1/models'], ['POST', '/v1/chat/completions'], ['GET', '/v1/nowhere']] as const) {
      const res = await a.inject({ method, url, payload: method === 'POST' ? ask('hi') : undefined, headers: { authorization: 'Bearer wrong' } });
      expect(res.statusCode).toBe(401);
      expect(res.headers['www-authenticate']).toBe('Bearer');
      expect(res.json()).toEqual({ error: { message: expect.stringContaining('API key'), type: 'invalid_request_error', param: null, code: 'invalid_api_key' } });
    }
  });

  it('429 rate_limit_exceeded with retry-after from the rate limiter', async () => {
    const a = await start({ rateLimit: 1 });
    expect((await complete(a, ask('one'))).status).toBe(200);
    const limited = await complete(a, ask('two'));
    expect(limited.status).toBe(429);
    expect(limited.headers['retry-after']).toBeDefined();
    expect(limited.json.error).toMatchObject({ type: 'requests', code: 'rate_limit_exceeded' });
  });

  it('400 for a bad body, param naming the field; 404 for an unknown model or route; 405 for a wrong method', async () => {
    const a = await start();
    const cases: [unknown, string | null, string][] = [
      [{ model: 'echo' }, 'messages', 'missing_required_parameter'],
      [{ model: 'echo', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x/cat.png' } }] }] }, 'messages[0].content[0].type', 'invalid_value'],
      [{ model: 'echo', messages: [{ role: 'function', content: 'x', name: 'f' }] }, 'messages[0].role', 'invalid_type'],
      [{ model: 'echo', messages: [{ role: 'user', content: [{ type: 'refusal', refusal: 'no' }] }] }, 'messages[0].content[0].type', 'invalid_value'],
      [ask('hi', { n: 2 }), 'n', 'invalid_value'],
      [ask('hi', { metadata: { session_id: 'a b' } }), 'metadata.session_id', 'invalid_value'],
      [{ model: 'echo', messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: 'not json' } }] }] }, 'messages[1].tool_calls[0].function.arguments', 'invalid_value'],
      // Probes: a message that is not an object was told its role was wrong; a tool name OpenAI refuses, and
      // two tools of one name, were taken.
      [{ model: 'echo', messages: ['hi'] }, 'messages[0]', 'invalid_type'],
      // A probe: a field missing from a message was told its type was wrong, as OpenAI does not say.
      [{ model: 'echo', messages: [{ role: 'user' }] }, 'messages[0].content', 'missing_required_parameter'],
      [{ model: 'echo', messages: [{ role: 'system' }] }, 'messages[0].content', 'missing_required_parameter'],
      [{ model: 'echo', messages: [{ content: 'x' }] }, 'messages[0].role', 'missing_required_parameter'],
      [ask('hi', { tools: [{ function: { name: 'lookup' } }] }), 'tools[0].type', 'missing_required_parameter'],
      [{ model: 'echo', messages: [{ role: 'user', content: null }] }, 'messages[0].content', 'invalid_type'],
      [ask('hi', { tools: [{ type: 'function', function: { name: 'get weather' } }] }), 'tools[0].function.name', 'invalid_value'],
      [ask('hi', { tools: [{ type: 'function', function: { name: 'lookup' } }, { type: 'function', function: { name: 'lookup' } }] }), 'tools[1].function.name', 'invalid_value'],
    ];
    for (const [payload, param, code] of cases) {
      const res = await complete(a, payload);
      expect(res.status, JSON.stringify(payload)).toBe(400);
      expect(res.json.error).toMatchObject({ type: 'invalid_request_error', param, code });
    }
    // Parameters Runnel ignores are still held to OpenAI's ranges (they were taken silently), each said plainly.
    const ranges: [Record<string, unknown>, string][] = [
      [{ temperature: 9 }, "Invalid 'temperature': expected a number from 0 to 2"],
      [{ top_p: -1 }, "Invalid 'top_p': expected a number from 0 to 1"],
      [{ max_tokens: -5 }, "Invalid 'max_tokens': expected an integer of at least 1"],
      [{ max_completion_tokens: 1.5 }, "Invalid 'max_completion_tokens': expected an integer of at least 1"],
      [{ presence_penalty: 3 }, "Invalid 'presence_penalty': expected a number from -2 to 2"],
      [{ frequency_penalty: '1' }, "Invalid 'frequency_penalty': expected a number from -2 to 2"],
      [{ stop: 5 }, "Invalid 'stop': expected a string or an array of at most 4 strings"],
      [{ stop: ['a', 'b', 'c', 'd', 'e'] }, "Invalid 'stop': expected a string or an array of at most 4 strings"],
    ];
    for (const [extra, message] of ranges) {
      const res = await complete(a, ask('hi', extra));
      expect(res.status, JSON.stringify(extra)).toBe(400);
      expect(res.json.error, JSON.stringify(extra)).toMatchObject({ type: 'invalid_request_error', param: Object.keys(extra)[0], message });
    }
    expect((await complete(a, ask('hi', { temperature: 0.7, top_p: 1, max_tokens: 100, presence_penalty: -2, stop: ['a', 'b'] }))).status).toBe(200);
    // A probe: an assistant's refusal part, which OpenAI's answers carry and its SDK's types allow, was refused,
    // so a conversation that had one could not be sent on.
    const refused = [{ role: 'user', content: 'x' }, { role: 'assistant', content: [{ type: 'refusal', refusal: 'I cannot help with that.' }] }, { role: 'user', content: 'y' }];
    expect((await complete(a, { model: 'echo', messages: refused })).status).toBe(200);
    const notJson = await a.inject({ method: 'POST', url: '/v1/chat/completions', payload: '{not json', headers: { 'content-type': 'application/json' } });
    expect(notJson.statusCode).toBe(400);
    // A probe: the hint was LangServe's (`{"input": {...}}`), which /v1 does not take.
    expect(notJson.json().error).toMatchObject({ type: 'invalid_request_error', code: 'RUNNEL_ERR_BODY_INVALID', message: 'Invalid JSON body: send a JSON object, such as {"model": "...", "messages": [{"role": "user", "content": "..."}]}' });
    for (const model of ['hidden', 'plain', 'nope']) expect((await complete(a, { ...ask('x'), model })).json.error).toMatchObject({ code: 'model_not_found', param: 'model' });
    const route = await a.inject({ method: 'POST', url: '/v1/completions', payload: {} });
    expect(route.statusCode).toBe(404);
    expect(route.json().error).toMatchObject({ type: 'invalid_request_error', message: 'Invalid URL (POST /v1/completions)' });
    const method = await a.inject({ method: 'GET', url: '/v1/chat/completions' });
    expect(method.statusCode).toBe(405);
    expect(method.headers.allow).toBe('POST');
    expect(method.json().error.type).toBe('invalid_request_error');
    // Any other method too, in OpenAI's shape (a limits probe: TRACE, OPTIONS and the like read 404, as if the route were not there).
    for (const [verb, url, allow] of [['TRACE', '/v1/chat/completions', 'POST'], ['OPTIONS', '/v1/chat/completions', 'POST'], ['PROPFIND', '/v1/models', 'GET, HEAD'], ['TRACE', '/v1/models/x', 'GET, HEAD']] as const) {
      const other = await a.inject({ method: verb as 'GET', url });
      expect([other.statusCode, other.headers.allow, other.json().error.code], `${verb} ${url}`).toEqual([405, allow, 'RUNNEL_ERR_METHOD_NOT_ALLOWED']);
    }
  });

  it('5xx server_error: Redis, the provider, a bug (generic message), the server draining (with retry-after)', async () => {
    const a = await start();
    const redis = await complete(a, ask('redis'));
    expect(redis.status).toBe(503);
    expect(redis.headers['retry-after']).toBe('1');
    expect(redis.json.error).toEqual({ message: 'Redis did not answer', type: 'server_error', param: null, code: 'RUNNEL_ERR_REDIS_UNAVAILABLE' });
    expect((await complete(a, ask('provider'))).json.error).toMatchObject({ type: 'server_error', code: 'RUNNEL_ERR_PROVIDER_UNAVAILABLE' });
    const bug = await complete(a, ask('bug'));
    expect(bug.status).toBe(500);
    expect(bug.json.error).toEqual({ message: 'Internal Server Error', type: 'server_error', param: null, code: 'RUNNEL_ERR_INTERNAL' });
    a.runnel.shuttingDown = true;
    const draining = await complete(a, ask('late'));
    expect(draining.status).toBe(503);
    expect(draining.json.error).toMatchObject({ type: 'server_error', code: 'RUNNEL_ERR_SHUTTING_DOWN' });
  });
});

describe('which chains are models, and their answers', () => {
  it('lists only chains with a messages adapter and chat_completions enabled', async () => {
    const a = await start();
    const res = await a.inject({ method: 'GET', url: '/v1/models' });
    expect(res.json().data.map((m: { id: string }) => m.id)).toEqual(['echo', 'object', 'message']);
    expect((await a.inject({ method: 'GET', url: '/v1/models/hidden' })).statusCode).toBe(404);
  });

  it("answers an object output as its JSON, streamed in one delta once whole; a message's text, its tool calls kept from a chain that takes no tools", async () => {
    const a = await start();
    const whole = await complete(a, { ...ask('x'), model: 'object' });
    expect(whole.json.choices[0].message.content).toBe('{"answer":"forty-two","sources":["a.md"]}');
    const streamed = await a.inject({ method: 'POST', url: '/v1/chat/completions', payload: { ...ask('x'), model: 'object', stream: true } });
    const deltas = streamed.body
      .split('\n\n')
      .filter((f) => f.startsWith('data: {'))
      .map((f) => JSON.parse(f.slice(6)).choices[0]?.delta.content)
      .filter((c) => c !== undefined && c !== '');
    expect(deltas).toEqual(['{"answer":"forty-two","sources":["a.md"]}']);
    const said = await complete(a, { ...ask('hi'), model: 'message' });
    expect(said.json.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: 'said hi' } });
    expect(said.json.choices[0].message.tool_calls).toBeUndefined();
    expect(said.json.usage).toEqual({ prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 });
  });

  it('counts requests in /metrics under the chain, endpoint chat_completions', async () => {
    const a = await start();
    await complete(a, ask('one'));
    await a.inject({ method: 'POST', url: '/v1/chat/completions', payload: ask('two', { stream: true }) });
    await complete(a, ask('redis'));
    const metrics = (await a.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toContain('runnel_requests_total{chain="/echo",endpoint="chat_completions",status="200"} 2');
    expect(metrics).toContain('runnel_requests_total{chain="/echo",endpoint="chat_completions",status="503"} 1');
  });

  it('counts a bad body that names a model under its chain, as a bad body on /invoke counts under its chain', async () => {
    // A probe: `n: 2` or `temperature: 3` sent to a model was counted nowhere, the chain's error rate blind to it.
    const a = await start();
    expect((await complete(a, ask('x', { n: 2 }))).status).toBe(400);
    expect((await complete(a, ask('x', { temperature: 3, stream: true }))).status).toBe(400);
    expect((await complete(a, { model: 'nobody', messages: 'x' })).status).toBe(400);
    const metrics = (await a.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toContain('runnel_requests_total{chain="/echo",endpoint="chat_completions",status="400"} 2');
    expect(metrics).not.toContain('nobody');
  });
});

describe('/openapi.json', () => {
  it('describes the /v1 routes, tagged OpenAI-compatible, with their bodies and answers', async () => {
    const a = await start();
    const doc = (await a.inject({ method: 'GET', url: '/openapi.json' })).json();
    const post = doc.paths['/v1/chat/completions'].post;
    expect(post.tags).toEqual(['OpenAI-compatible']);
    expect(post.requestBody.content['application/json'].schema.$ref).toBe('#/components/schemas/OpenAIChatCompletionRequest');
    expect(Object.keys(post.responses['200'].content).sort()).toEqual(['application/json', 'text/event-stream']);
    expect(post.responses['4XX'] ?? post.responses['4xx']).toBeDefined();
    expect(doc.paths['/v1/models'].get.tags).toEqual(['OpenAI-compatible']);
    for (const name of ['OpenAIChatCompletionRequest', 'OpenAIChatCompletion', 'OpenAIChatCompletionChunk', 'OpenAIModelList', 'OpenAIError']) expect(doc.components.schemas[name], name).toBeDefined();
    expect(doc.components.schemas.OpenAIChatCompletionRequest.required).toEqual(['model', 'messages']);
  });
});

// A newcomer's probe: /v1/chat/completions with model 'summarise', a chain just registered without a messages
// adapter, said "The model 'summarise' does not exist" — the chain is there (GET / lists it); what it lacks was
// not said.
describe('a chain that is not a model says why', () => {
  it('over a socket: no adapter, or chat_completions left out, each named; an unknown name does not exist', async () => {
    const a = await start();
    await a.listen({ port: 0, host: '127.0.0.1' });
    const { port } = a.server.address() as { port: number };
    const asked = async (model: string) => {
      const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'x' }] }),
      });
      expect(res.status).toBe(404);
      return ((await res.json()) as { error: { message: string; code: string } }).error;
    };
    expect(await asked('plain')).toMatchObject({
      code: 'model_not_found',
      message: "The model 'plain' is the chain /plain, which has no messages adapter (defineChain's messages), so it is not served as a model: GET /v1/models lists the chains served as models",
    });
    expect((await asked('hidden')).message).toBe("The model 'hidden' is the chain /hidden, whose enabledEndpoints leave out chat_completions: GET /v1/models lists the chains served as models");
    expect((await asked('nope')).message).toBe("The model 'nope' does not exist: GET /v1/models lists the chains served as models");
    const one = await fetch(`http://127.0.0.1:${port}/v1/models/plain`);
    expect(one.status).toBe(404);
    expect(((await one.json()) as { error: { message: string } }).error.message).toContain('has no messages adapter');
  });
});
