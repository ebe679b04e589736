import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import LZString from 'lz-string';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { buildApp, defineChain, FakeListChatModel, lambda, messagesSchema, RunnelError } from '../../src/index.js';
import { allChains, observed, startServer } from '../support/server.js';

let app: FastifyInstance;
beforeAll(async () => {
  app = await buildApp({ chains: allChains, config: { bodyLimit: 4096 } });
});
afterAll(async () => app.close());
beforeEach(() => {
  observed.configs = [];
});

const invoke = (payload: unknown, options: { url?: string; headers?: Record<string, string> } = {}) =>
  app.inject({
    method: 'POST',
    url: options.url ?? '/echo/invoke',
    headers: { 'content-type': 'application/json', ...options.headers },
    payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
  });

describe('POST /invoke', () => {
  it('answers {output, metadata: {run_id, feedback_tokens}}', async () => {
    const res = await invoke({ input: { name: 'Ada' }, kwargs: { ignored: true }, extra: 'ignored' });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.output).toBe('hello Ada');
    expect(body.metadata.feedback_tokens).toEqual([]);
    expect(body.metadata.run_id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it.each([
    ['not JSON', '{"input": ', 'RUNNEL_ERR_BODY_INVALID', []],
    ['not an object', '[1, 2]', 'RUNNEL_ERR_BODY_INVALID', []],
    ['without input', { config: {} }, 'RUNNEL_ERR_BODY_INVALID', ['input']],
    ['with invalid input', { input: { name: 42 } }, 'RUNNEL_ERR_INPUT_INVALID', ['name']],
    ['with a nested invalid input', { input: { name: 'a', times: 9 } }, 'RUNNEL_ERR_INPUT_INVALID', ['times']],
    ['with config null', { input: { name: 'a' }, config: null }, 'RUNNEL_ERR_CONFIG_INVALID', ['config']],
    ['with invalid config types', { input: { name: 'a' }, config: { tags: [1] } }, 'RUNNEL_ERR_CONFIG_INVALID', ['config', 'tags', 0]],
    ['with an invalid run_id', { input: { name: 'a' }, config: { run_id: 'nope' } }, 'RUNNEL_ERR_CONFIG_INVALID', ['config', 'run_id']],
    // Located as the client spelled it (a probe: `runId` was reported as `run_id`).
    ['with an invalid runId', { input: { name: 'a' }, config: { runId: 'nope' } }, 'RUNNEL_ERR_CONFIG_INVALID', ['config', 'runId']],
  ])('answers 422 for a body %s, with the loc of the problem', async (_name, payload, code, loc) => {
    const res = await invoke(payload);
    expect(res.statusCode).toBe(422);
    const body = res.json();
    expect(body.code).toBe(code);
    expect(typeof body.message).toBe('string');
    if (loc.length > 0) expect(body.detail[0].loc).toEqual(loc);
  });

  it('takes client config only from the allowlist, in both spellings, never callbacks or run names', async () => {
    const res = await invoke({
      input: { name: 'a' },
      config: { tags: ['t1'], metadata: { user: 'u', __internal: 'x' }, runName: 'evil', run_name: 'evil', callbacks: ['x'], recursionLimit: 3, signal: 'x', configurable: { unknown: 1 } },
    });
    expect(res.statusCode).toBe(200);
    const config = observed.configs[0] as Record<string, unknown>;
    expect(config.tags).toEqual(['t1']);
    expect(config.metadata).toEqual({ user: 'u', __identity: 'anonymous', __cache_partition: 'anonymous' });
    expect(config.recursionLimit).toBe(25);
    expect(config.configurable).toEqual({});
  });

  // Every /stream_events event repeats them: 1 MB of metadata was sent again with each.
  it('refuses tags and metadata past their bounds, located where the client put them', async () => {
    // This file's server takes bodies of 4 KB; the default, 1 MB.
    const roomy = await buildApp({ chains: allChains });
    const invoke = (payload: unknown, url = '/echo/invoke') => roomy.inject({ method: 'POST', url, payload: payload as Record<string, unknown> });
    const refused = async (config: unknown, loc: (string | number)[]) => {
      const res = await invoke({ input: { name: 'a' }, config });
      expect(res.statusCode, JSON.stringify(loc)).toBe(422);
      expect(res.json()).toMatchObject({ code: 'RUNNEL_ERR_CONFIG_INVALID', detail: [expect.objectContaining({ loc })] });
    };
    await refused({ metadata: { note: 'x'.repeat(8200) } }, ['config', 'metadata']);
    await refused({ tags: Array.from({ length: 65 }, (_, i) => `t${i}`) }, ['config', 'tags']);
    await refused({ tags: ['x'.repeat(257)] }, ['config', 'tags', 0]);
    const hash = LZString.compressToEncodedURIComponent(JSON.stringify({ metadata: { note: 'x'.repeat(8200) } }));
    const fromHash = await invoke({ input: { name: 'a' } }, `/echo/c/${hash}/invoke`);
    expect([fromHash.statusCode, fromHash.json().detail?.[0]?.loc]).toEqual([422, ['config_hash', 'metadata']]);
    // Each within the bounds, merged past them: refused where the body put its part.
    const half = LZString.compressToEncodedURIComponent(JSON.stringify({ metadata: { a: 'x'.repeat(6000) } }));
    const merged = await invoke({ input: { name: 'a' }, config: { metadata: { b: 'x'.repeat(6000) } } }, `/echo/c/${half}/invoke`);
    expect([merged.statusCode, merged.json().detail?.[0]?.loc]).toEqual([422, ['config', 'metadata']]);
    // At the bounds, taken.
    const taken = await invoke({ input: { name: 'a' }, config: { tags: Array.from({ length: 64 }, () => 'x'.repeat(256)), metadata: { note: 'x'.repeat(8000) } } });
    expect(taken.statusCode).toBe(200);
    await roomy.close();
  });

  // The published config schema leaves `configurable` open (a client that checks against it sends what the
  // server takes); the server still drops what the chain does not have.
  it('drops a configurable field the chain does not have, and keeps the ones it does', async () => {
    const seen: unknown[] = [];
    const tuned = defineChain({
      path: '/tuned',
      runnable: new FakeListChatModel({ responses: ['ok'] })
        .configurableFields({ temperature: { id: 'temperature', name: 'Temperature', schema: z.number() } })
        .pipe(
          lambda((message: unknown, config) => {
            seen.push(config.configurable);
            return message;
          }),
        ),
    });
    const own = await buildApp({ chains: [tuned] as never });
    try {
      const res = await own.inject({ method: 'POST', url: '/tuned/invoke', payload: { input: 'hi', config: { configurable: { temperature: 0.5, zzz: 1 } } } });
      expect(res.statusCode).toBe(200);
      expect(seen).toEqual([{ temperature: 0.5 }]);
      expect((await own.inject('/tuned/config_schema')).json().properties.configurable.additionalProperties).toBeUndefined();
    } finally {
      await own.close();
    }
  });

  it('refuses configurable where the chain does not allow it', async () => {
    const res = await invoke({ input: { count: 1 }, config: { configurable: { x: 1 } } }, { url: '/slow/invoke' });
    expect(res.statusCode).toBe(422);
    expect(res.json().message).toMatch(/configurable.*disallowed/);
  });

  it('honours a client run_id where allowed', async () => {
    const runId = '9b2f4c1e-3a5d-4e6f-8a7b-1c2d3e4f5a6b';
    const res = await invoke({ input: { name: 'a' }, config: { run_id: runId } });
    expect(res.json().metadata.run_id).toBe(runId);
  });

  it('merges the /c/{hash}/ config under the body config', async () => {
    const hash = LZString.compressToEncodedURIComponent(JSON.stringify({ tags: ['from-hash'], metadata: { a: 'hash', b: 'hash' } }));
    const res = await invoke({ input: { name: 'a' }, config: { tags: ['body'], metadata: { a: 'body' } } }, { url: `/echo/c/${hash}/invoke` });
    expect(res.statusCode).toBe(200);
    const config = observed.configs[0] as Record<string, unknown>;
    expect(config.tags).toEqual(['body', 'from-hash']);
    expect(config.metadata).toEqual({ a: 'body', b: 'hash', __identity: 'anonymous', __cache_partition: 'anonymous' });
    const bad = await invoke({ input: { name: 'a' } }, { url: '/echo/c/not-a-hash/invoke' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().code).toBe('RUNNEL_ERR_CONFIG_HASH_INVALID');
    // A value the chain refuses is located in the URL's config, as a body's is under "config" (a trial found no prefix).
    const hot = LZString.compressToEncodedURIComponent(JSON.stringify({ configurable: { temperature: 'hot' } }));
    const refused = await app.inject({ method: 'POST', url: `/joke/c/${hot}/invoke`, payload: { input: { topic: 'x' } } });
    expect([refused.statusCode, refused.json().detail[0].loc]).toEqual([422, ['config_hash', 'configurable', 'temperature']]);
    const empty = await invoke({ input: { name: 'a' } }, { url: '/echo/c//invoke' });
    expect([empty.statusCode, empty.json().code, empty.json().message]).toEqual([400, 'RUNNEL_ERR_CONFIG_HASH_INVALID', 'Invalid config hash: it is empty; send the config in the body, or leave /c/{hash} out']);
    const broken = await invoke({ input: { name: 'a' } }, { url: '/echo/c/%%%/invoke' });
    expect(broken.statusCode).toBe(400);
    expect(broken.json().code).toBe('RUNNEL_ERR_BAD_REQUEST');
  });

  it('parses JSON whatever the content type, and strips __proto__', async () => {
    for (const type of ['text/plain', 'APPLICATION/JSON', 'application/x-www-form-urlencoded']) {
      const res = await app.inject({ method: 'POST', url: '/echo/invoke', headers: { 'content-type': type }, payload: '{"input": {"name": "x"}}' });
      expect(res.statusCode, type).toBe(200);
    }
    const polluted = await invoke('{"input": {"name": "x", "__proto__": {"polluted": true}}, "constructor": {"prototype": {"bad": 1}}}');
    expect(polluted.statusCode).toBe(200);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('answers 413 past the body limit', async () => {
    const res = await invoke({ input: { name: 'x'.repeat(5000) } });
    expect(res.statusCode).toBe(413);
    expect(res.json().code).toBe('RUNNEL_ERR_BODY_TOO_LARGE');
  });

  it('answers a failing chain with 500 and a generic message that leaks nothing', async () => {
    const res = await invoke({ input: { when: 'before' } }, { url: '/failing/invoke' });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ code: 'RUNNEL_ERR_INTERNAL', message: 'Internal Server Error', detail: 'Internal Server Error' });
    expect(res.body).not.toContain('sk-canary');
    // The id of the request's log lines, to quote when asking about it: the client's own when it sent one.
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    const named = await invoke({ input: { when: 'before' } }, { url: '/failing/invoke', headers: { 'x-request-id': 'client-req-42' } });
    expect(named.headers['x-request-id']).toBe('client-req-42');
  });

  it('answers a provider rate limit with 429 and its code', async () => {
    const res = await invoke({ input: { when: 'typed' } }, { url: '/failing/invoke' });
    expect(res.statusCode).toBe(429);
    expect(res.json().code).toBe('RUNNEL_ERR_PROVIDER_RATE_LIMITED');
  });

  it('answers unknown chains and endpoints with 404 JSON, and a method a route does not take with 405 and allow', async () => {
    const missing = await invoke({ input: {} }, { url: '/nope/invoke' });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toEqual({ code: 'RUNNEL_ERR_NOT_FOUND', message: 'Not Found: GET / lists the chains and their routes', detail: 'Not Found: GET / lists the chains and their routes' });
    // A route with a trailing slash says which route is meant (`/echo/runs/` read as a run with an empty id: a 405).
    for (const [method, url, route] of [
      ['POST', '/echo/invoke/', 'POST /echo/invoke'],
      ['POST', '/echo/runs/', 'POST /echo/runs'],
      ['GET', '/echo/input_schema//', 'GET /echo/input_schema'],
    ] as const) {
      const slashed = await app.inject({ method, url, payload: method === 'POST' ? { input: {} } : undefined });
      expect([slashed.statusCode, slashed.json().code, slashed.json().message], url).toEqual([404, 'RUNNEL_ERR_NOT_FOUND', `Not Found: ${route} (without the trailing slash) is the route`]);
    }
    expect((await invoke({ input: {} }, { url: '/echo/feedback' })).json().code).toBe('RUNNEL_ERR_NOT_FOUND');
    for (const [method, url, allow] of [
      ['GET', '/echo/invoke', 'POST'],
      ['HEAD', '/echo/invoke', 'POST'],
      ['DELETE', '/echo/batch', 'POST'],
      ['GET', '/echo/stream', 'POST'],
      ['PUT', '/echo/stream_events', 'POST'],
      ['POST', '/echo/input_schema', 'GET, HEAD'],
      ['GET', '/echo/c/N4XyA/invoke', 'POST'],
    ] as const) {
      const res = await app.inject({ method, url });
      expect(res.statusCode, `${method} ${url}`).toBe(405);
      expect(res.headers.allow, `${method} ${url}`).toBe(allow);
      if (method !== 'HEAD') expect(res.json()).toEqual({ code: 'RUNNEL_ERR_METHOD_NOT_ALLOWED', message: 'Method Not Allowed', detail: 'Method Not Allowed' });
    }
  });

  it('answers 405 with allow for every route, not only the LangServe ones: runs, health, the OpenAPI document, OPTIONS', async () => {
    for (const [method, url, allow] of [
      ['DELETE', '/echo/runs', 'GET, HEAD, POST'],
      ['PUT', '/echo/runs/some-id', 'GET, HEAD'],
      ['GET', '/echo/runs/some-id/cancel', 'POST'],
      ['POST', '/healthz', 'GET, HEAD'],
      ['POST', '/openapi.json', 'GET, HEAD'],
      ['DELETE', '/', 'GET, HEAD'],
      ['OPTIONS', '/echo/invoke', 'POST'],
      ['POST', '/echo/playground/', 'GET, HEAD'],
      ['PUT', '/echo/playground/assets/index.js', 'GET, HEAD'],
    ] as const) {
      const res = await app.inject({ method, url });
      expect(res.statusCode, `${method} ${url}`).toBe(405);
      expect(res.headers.allow, `${method} ${url}`).toBe(allow);
      expect(res.json().code, `${method} ${url}`).toBe('RUNNEL_ERR_METHOD_NOT_ALLOWED');
    }
    // Matched as the router matches: percent-encoding decoded.
    const encoded = await app.inject({ method: 'DELETE', url: '/echo/%72uns' });
    expect(encoded.statusCode).toBe(405);
    expect(encoded.headers.allow).toBe('GET, HEAD, POST');
    // A path no route takes stays a 404, whatever the method; so does a route of the very method that found
    // nothing (a static file that is not there).
    for (const [method, url] of [['GET', '/nowhere'], ['DELETE', '/echo/nothing'], ['POST', '/echo/runs/id/unknown'], ['GET', '/docs/static/nope.js']] as const) {
      const res = await app.inject({ method, url });
      expect(res.statusCode, `${method} ${url}`).toBe(404);
      expect(res.json().code).toBe('RUNNEL_ERR_NOT_FOUND');
    }
  });

  it('refuses a config hash that does not decode on the GET routes under it too (the schemas)', async () => {
    // A trial: an empty hash (`/c//`) was taken as no config.
    for (const url of ['/echo/c/!!!!/input_schema', '/echo/c/not-a-hash/config_schema', '/echo/c//input_schema']) {
      const res = await app.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(400);
      expect(res.json().code, url).toBe('RUNNEL_ERR_CONFIG_HASH_INVALID');
    }
    const hash = LZString.compressToEncodedURIComponent(JSON.stringify({ tags: ['t'] }));
    expect((await app.inject({ method: 'GET', url: `/echo/c/${hash}/input_schema` })).statusCode).toBe(200);
  });

  it('refuses a config hash that decodes to a huge config, decoding no further than the bound', async () => {
    // lz-string's output can grow with the square of its input: this hash of about 5,000 characters is
    // 4,000,000, which lz-string's own decoder would build whole. It is kept made: compressing 4,000,000
    // characters took 9 s of a loaded machine, near the test's time limit.
    const bomb = readFileSync(new URL('../fixtures/config-hash-bomb.txt', import.meta.url), 'utf8').trim();
    expect(LZString.decompressFromEncodedURIComponent(bomb)).toBe('a'.repeat(4_000_000));
    const huge = LZString.compressToEncodedURIComponent(JSON.stringify({ metadata: { x: 'x'.repeat(70_000) } }));
    for (const [method, url, says] of [
      ['GET', `/echo/c/${bomb}/input_schema`, 'its config is longer than 65536 characters'],
      ['POST', `/echo/c/${bomb}/invoke`, 'its config is longer than 65536 characters'],
      ['POST', `/echo/c/${huge}/invoke`, 'its config is longer than 65536 characters'],
    ] as const) {
      const res = await app.inject({ method, url, ...(method === 'POST' ? { headers: { 'content-type': 'application/json' }, payload: '{"input": {"name": "a"}}' } : {}) });
      expect(res.statusCode, url.slice(0, 40)).toBe(400);
      expect(res.json().code).toBe('RUNNEL_ERR_CONFIG_HASH_INVALID');
      expect(res.json().message).toContain(says);
    }
  });
});

describe('POST /batch', () => {
  const batch = (payload: unknown) => app.inject({ method: 'POST', url: '/echo/batch', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(payload) });

  it('answers outputs in order with a run id each', async () => {
    const res = await batch({ inputs: [{ name: 'a' }, { name: 'b', times: 2 }], config: [{ tags: ['x'] }, { tags: ['y'] }] });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.output).toEqual(['hello a', 'hello bhello b']);
    expect(body.metadata.run_ids).toHaveLength(2);
    expect(body.metadata.responses).toEqual(body.metadata.run_ids.map((run_id: string) => ({ run_id, feedback_tokens: [] })));
    expect((await batch({ inputs: [] })).json()).toEqual({ output: [], metadata: { run_ids: [], responses: [] } });
  });

  it('answers 422 for a bad item, non-list inputs, config null, a config count mismatch, too many inputs', async () => {
    const item = await batch({ inputs: [{ name: 'a' }, { name: 1 }] });
    expect(item.statusCode).toBe(422);
    expect(item.json().detail[0].loc).toEqual(['inputs', 1, 'name']);
    // Every bad item is listed, in order.
    const items = await batch({ inputs: [{ name: 'a' }, { name: 3 }, {}] });
    expect(items.statusCode).toBe(422);
    expect(items.json().detail.map((d: { loc: unknown[] }) => d.loc)).toEqual([['inputs', 1, 'name'], ['inputs', 2, 'name']]);
    expect((await batch({ inputs: 'x' })).statusCode).toBe(422);
    expect((await batch({ inputs: [{ name: 'a' }], config: null })).statusCode).toBe(422);
    const mismatch = await batch({ inputs: [{ name: 'a' }, { name: 'b' }], config: [{}] });
    expect(mismatch.json().message).toBe('Number of configs (1) must match number of inputs (2)');
    const many = await batch({ inputs: Array.from({ length: 101 }, () => ({ name: 'a' })) });
    expect(many.json().code).toBe('RUNNEL_ERR_BATCH_TOO_LARGE');
  });
});

describe('POST /batch with an item that fails', () => {
  // A trial: one item's provider failure failed the batch (as LangServe's does) with nothing saying which item.
  it("keeps the item's code and status and names the item; an internal error stays hidden", async () => {
    const picky = defineChain({
      path: '/picky',
      runnable: lambda(
        (input: { n: number }) => {
          if (input.n === 2) throw new RunnelError('RUNNEL_ERR_PROVIDER_REJECTED', 'The model provider rejected the request (400)');
          if (input.n === 3) throw new Error('secret internals');
          return input.n;
        },
        { input: z.object({ n: z.number() }) },
      ),
    });
    const own = await buildApp({ chains: [picky] });
    try {
      const batch = (ns: number[]) => own.inject({ method: 'POST', url: '/picky/batch', payload: { inputs: ns.map((n) => ({ n })) } });
      const rejected = await batch([0, 1, 2]);
      expect(rejected.statusCode).toBe(502);
      expect(rejected.json()).toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_REJECTED', message: 'inputs[2]: The model provider rejected the request (400)' });
      const internal = await batch([3, 0]);
      expect([internal.statusCode, internal.json().message]).toEqual([500, 'Internal Server Error']);
      expect((await batch([0, 1])).json().output).toEqual([0, 1]);
    } finally {
      await own.close();
    }
  });
});

describe('a message that fits no kind of message', () => {
  // A trial: a bad role gave eleven errors, one per kind of message the value was not, the useful one among them.
  it('is refused with the error of the kind it came closest to, and the values allowed', async () => {
    const chat = defineChain({ path: '/history', runnable: lambda((input: { chat_history: unknown[] }) => input.chat_history.length, { input: z.object({ chat_history: messagesSchema }) }) });
    const own = await buildApp({ chains: [chat] });
    try {
      const detail = async (message: unknown) =>
        (await own.inject({ method: 'POST', url: '/history/invoke', payload: { input: { chat_history: [message] } } })).json().detail as { loc: unknown[]; msg: string }[];
      expect(await detail({ role: 'robot', content: 'hi' })).toEqual([
        { type: 'enum', loc: ['chat_history', 0, 'role'], msg: 'must be one of "user", "human", "assistant", "ai", "system", "developer", "tool"' },
      ]);
      expect(await detail({ role: 'user', content: 5 })).toEqual([{ type: 'type', loc: ['chat_history', 0, 'content'], msg: 'must be string' }]);
      const [byType, ...more] = await detail({ type: 'robot', content: 'hi' });
      expect(more).toEqual([]);
      expect(byType?.loc).toEqual(['chat_history', 0, 'type']);
      for (const kind of ['human', 'ai', 'system', 'tool']) expect(byType?.msg).toContain(`"${kind}"`);
      expect(await detail(['robot', 'hi'])).toEqual([{ type: 'enum', loc: ['chat_history', 0, 0], msg: 'must be one of "human", "user", "ai", "assistant", "system", "developer"' }]);
      expect((await own.inject({ method: 'POST', url: '/history/invoke', payload: { input: { chat_history: [{ role: 'user', content: 'hi' }] } } })).json().output).toBe(1);
    } finally {
      await own.close();
    }
  });
});

describe('a compressed body', () => {
  // A trial: a gzip body (content-encoding: gzip) was read as text and refused as "Invalid JSON".
  it('is refused with 415 naming its encoding; identity is read', async () => {
    const payload = gzipSync(JSON.stringify({ input: { name: 'zip' } }));
    const zipped = await app.inject({ method: 'POST', url: '/echo/invoke', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, payload });
    expect([zipped.statusCode, zipped.json().code, zipped.json().message]).toEqual([415, 'RUNNEL_ERR_UNSUPPORTED_MEDIA_TYPE', 'A body with content-encoding "gzip" is not read: send it uncompressed']);
    const plain = await app.inject({ method: 'POST', url: '/echo/invoke', headers: { 'content-type': 'application/json', 'content-encoding': 'identity' }, payload: '{"input": {"name": "plain"}}' });
    expect(plain.json().output).toBe('hello plain');
  });

  // A probe: content-encoding is a list (RFC 9110), as transfer-encoding is read here, but only one exact
  // `identity` was read: an empty header, or `identity` sent twice (joined `identity, identity`), was a 415
  // about an uncompressed body.
  it('reads a body whose content-encoding lists no coding but identity, on a real socket', async () => {
    const server = await startServer();
    try {
      const { port } = new URL(server.url);
      const send = (encodings: string[]) =>
        new Promise<{ status: number; body: string }>((resolve, reject) => {
          const body = '{"input": {"name": "plain"}}';
          const lines = ['POST /echo/invoke HTTP/1.1', `host: 127.0.0.1:${port}`, 'content-type: application/json', ...encodings.map((e) => `content-encoding: ${e}`.trimEnd()), `content-length: ${body.length}`, 'connection: close'];
          const socket = connect(Number(port), '127.0.0.1', () => socket.end(`${lines.join('\r\n')}\r\n\r\n${body}`));
          let text = '';
          socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
          socket.on('error', reject);
          socket.on('close', () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]), body: text.slice(text.indexOf('\r\n\r\n') + 4) }));
        });
      for (const encodings of [[''], ['identity', 'identity'], ['identity, IDENTITY']]) {
        const answer = await send(encodings);
        expect([answer.status, JSON.parse(answer.body).output], JSON.stringify(encodings)).toEqual([200, 'hello plain']);
      }
      // A real coding anywhere in the list is still refused.
      expect((await send(['identity', 'gzip'])).status).toBe(415);
    } finally {
      await server.close();
    }
  });
});

describe("a body's charset", () => {
  // A probe: a Latin-1 body (`charset=iso-8859-1`, or no charset and bytes that are not UTF-8) was read as
  // UTF-8 with each other byte turned into U+FFFD, and answered 200 about a name the client never sent.
  it('is UTF-8: another declared charset is refused 415, bytes that are not UTF-8 are 422, UTF-8 is read', async () => {
    const server = await startServer();
    try {
      const send = (type: string, body: Buffer) => fetch(`${server.url}/echo/invoke`, { method: 'POST', headers: { 'content-type': type }, body });
      const latin1 = Buffer.from('{"input": {"name": "Zoë"}}', 'latin1');
      const declared = await send('application/json; charset=ISO-8859-1', latin1);
      expect([declared.status, ((await declared.json()) as { message: string }).message]).toEqual([415, 'A body in charset "iso-8859-1" is not read: send it as UTF-8, JSON\'s encoding']);
      const undeclared = await send('application/json', latin1);
      expect([undeclared.status, ((await undeclared.json()) as { code: string }).code]).toEqual([422, 'RUNNEL_ERR_BODY_INVALID']);
      // A charset inside another parameter's quoted value is none; quotes and an empty value are read as meant (a review).
      for (const type of ['application/json', 'application/json; charset=utf-8', 'application/json;charset="UTF-8"', "application/json; charset='utf-8'", 'application/json; charset=', 'application/json; x="; charset=latin1"', 'application/json; charset=us-ascii']) {
        const read = await send(type, Buffer.from(type.endsWith('ascii') ? '{"input": {"name": "Zoe"}}' : '{"input": {"name": "Zoë"}}', 'utf8'));
        expect(((await read.json()) as { output: string }).output, type).toBe(type.endsWith('ascii') ? 'hello Zoe' : 'hello Zoë');
      }
    } finally {
      await server.close();
    }
  });
});

describe('a body with a transfer coding before the chunks', () => {
  // A probe: `Transfer-Encoding: gzip, chunked` came to the parser with the chunks taken off and the gzip
  // left, and was refused as "Invalid JSON".
  it('is refused with 415 naming its coding, from a real connection; chunked alone is read', async () => {
    const server = await startServer();
    try {
      const send = (coding: string, body: Buffer) =>
        new Promise<string>((resolve, reject) => {
          const socket = connect(Number(new URL(server.url).port), '127.0.0.1', () => {
            const head = `POST /echo/invoke HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ntransfer-encoding: ${coding}\r\nconnection: close\r\n\r\n`;
            socket.end(Buffer.concat([Buffer.from(`${head}${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]));
          });
          let got = '';
          socket.on('data', (chunk: Buffer) => (got += chunk.toString()));
          socket.on('close', () => resolve(got));
          socket.on('error', reject);
        });
      const zipped = await send('gzip, chunked', gzipSync(JSON.stringify({ input: { name: 'zip' } })));
      expect(zipped).toMatch(/^HTTP\/1\.1 415 /);
      expect(zipped).toContain('A body with transfer-encoding \\"gzip, chunked\\" is not read');
      const plain = await send('chunked', Buffer.from(JSON.stringify({ input: { name: 'plain' } })));
      expect(plain).toMatch(/^HTTP\/1\.1 200 /);
      expect(plain).toContain('hello plain');
    } finally {
      await server.close();
    }
  });
});

describe('the playground address', () => {
  // LangServe answers `/playground` with 307 to `/playground/` (PROTOCOL.md); a trial found 308.
  it('redirects to the trailing slash with 307, keeping the query', async () => {
    const res = await app.inject({ url: '/joke/playground?theme=dark' });
    expect([res.statusCode, res.headers.location]).toEqual([307, '/joke/playground/?theme=dark']);
  });
});

describe('schemas and index', () => {
  it('serves the derived input, output and config schemas', async () => {
    expect((await app.inject('/echo/input_schema')).json()).toMatchObject({ title: 'EchoInput', type: 'object', required: ['name'] });
    expect((await app.inject('/echo/output_schema')).json()).toMatchObject({ title: 'EchoOutput', type: 'string' });
    expect((await app.inject('/joke/config_schema')).json()).toEqual({
      title: 'JokeConfig',
      type: 'object',
      properties: {
        configurable: {
          title: 'Configurable',
          type: 'object',
          properties: { temperature: { title: 'Temperature', description: 'Sampling temperature', type: 'number', minimum: 0, maximum: 2 } },
        },
      },
    });
    expect((await app.inject('/joke/output_schema')).json()).toMatchObject({ type: 'string' });
  });

  it('lists the chains as JSON, or as HTML for a browser', async () => {
    const json = await app.inject('/');
    expect(json.json().chains.map((c: { path: string }) => c.path)).toEqual(['/echo', '/slow', '/failing', '/joke', '/chat-model', '/documents']);
    // Only the endpoints a chain serves: /echo has no messages adapter, so no /ui_stream and no chat completions.
    const echo = json.json().chains.find((c: { path: string }) => c.path === '/echo');
    expect(echo.endpoints).toContain('invoke');
    expect(echo.endpoints).not.toContain('ui_stream');
    expect((await app.inject({ method: 'POST', url: '/echo/ui_stream' })).statusCode).toBe(404);
    const html = await app.inject({ url: '/', headers: { accept: 'text/html,application/xhtml+xml' } });
    expect(html.headers['content-type']).toMatch(/text\/html/);
    expect(html.body).toContain('<code>/joke</code>');
  });
});

// A newcomer's probe: POST /summarise/ui_stream, on a chain just written without a messages adapter, answered
// "Not Found: GET / lists the chains and their routes", as for a mistyped path; the chain was there.
describe('an endpoint a chain does not serve', () => {
  it('over a socket: names the chain, the endpoint and why; other paths keep the plain 404', async () => {
    const served = await buildApp({
      chains: [
        defineChain({ path: '/summarise', runnable: lambda(({ text }: { text: string }) => text) }),
        defineChain({ path: '/tools/echo', runnable: lambda((x: string) => x), enabledEndpoints: ['invoke'] }),
      ],
    });
    try {
      await served.listen({ port: 0, host: '127.0.0.1' });
      const { port } = served.server.address() as { port: number };
      const post = async (path: string) => {
        const res = await fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"messages": []}' });
        return [res.status, ((await res.json()) as { message: string }).message];
      };
      expect(await post('/summarise/ui_stream')).toEqual([404, 'Not Found: /summarise does not serve ui_stream: it has no messages adapter (`messages` in defineChain)']);
      expect(await post('/tools/echo/stream')).toEqual([404, 'Not Found: /tools/echo does not serve stream: its enabledEndpoints leave it out']);
      expect(await post('/tools/echo/ui_stream')).toEqual([404, 'Not Found: /tools/echo does not serve ui_stream: it has no messages adapter (`messages` in defineChain)']);
      expect(await post('/summarise/invok')).toEqual([404, 'Not Found: GET / lists the chains and their routes']);
      expect(await post('/nope/ui_stream')).toEqual([404, 'Not Found: GET / lists the chains and their routes']);
      expect(await post('/tools/chat_completions')).toEqual([404, 'Not Found: GET / lists the chains and their routes']);
    } finally {
      await served.close();
    }
  });
});
