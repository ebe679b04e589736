import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp, defineChain, lambda, loadServerConfig } from '../../src/index.js';
import { allChains, echo } from '../support/server.js';
import { sampleValue } from '../support/prometheus.js';

const KEY = 'k_live_0123456789abcdef';
let app: FastifyInstance;
const seen: string[] = [];

beforeAll(async () => {
  const whoami = defineChain({
    path: '/whoami',
    runnable: lambda((_: unknown, config) => String(config.configurable?.user_id)),
    perRequestConfigModifier: (config, request) => ({ configurable: { ...config.configurable, user_id: request.identity } }),
  });
  app = await buildApp({
    chains: [...allChains, whoami] as never,
    // Dozens of refusals come from one address here; limiting them is auth-throttle.test.ts's subject.
    config: { apiKeys: [{ name: 'alice', key: KEY }, { name: 'bob', key: 'k_live_fedcba9876543210' }], metricsKeys: ['alice'], corsOrigins: ['https://app.example'], rateLimit: 5, authFailLimit: 1000 },
  });
  app.addHook('onResponse', async (request) => void seen.push(request.url));
});
afterAll(async () => app.close());

describe('API keys', () => {
  it('refuses every route but health and the API docs without a key, under every path variant and method', async () => {
    const variants = ['/echo/invoke', '/ECHO/invoke', '//echo/invoke', '/echo/invoke/', '/echo/invoke;x', '/echo%2Finvoke', '/echo/input_schema', '/metrics', '/nope', '/docs/../echo/invoke', '/openapi.json/../echo/invoke'];
    for (const url of variants) {
      for (const method of ['GET', 'POST', 'HEAD', 'OPTIONS'] as const) {
        const res = await app.inject({ method, url, payload: method === 'POST' ? { input: { name: 'a' } } : undefined });
        expect(res.statusCode, `${method} ${url}`).toBe(401);
      }
    }
    expect((await app.inject('/healthz')).statusCode).toBe(200);
    expect((await app.inject('/readyz')).statusCode).toBe(200);
  });

  it('serves the API docs without a key, so a browser can open them and authorise there', async () => {
    const page = await app.inject('/docs/');
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/text\/html/);
    const document = (await app.inject('/openapi.json')).json() as { security: unknown; components: { securitySchemes: Record<string, unknown> } };
    expect(Object.keys(document.components.securitySchemes).sort()).toEqual(['apiKeyHeader', 'bearerAuth']);
    expect(document.security).toEqual([{ bearerAuth: [] }, { apiKeyHeader: [] }]);
    expect((await app.inject('/docs/json')).statusCode).toBe(200);
    expect((await app.inject('/')).statusCode).toBe(200);
    // What the docs describe still needs a key.
    expect((await app.inject({ method: 'POST', url: '/echo/invoke', payload: { input: { name: 'a' } } })).statusCode).toBe(401);
  });

  it('accepts a bearer token or x-api-key, and refuses a wrong one', async () => {
    const ok = await app.inject({ method: 'POST', url: '/echo/invoke', headers: { authorization: `Bearer ${KEY}` }, payload: { input: { name: 'a' } } });
    expect(ok.statusCode).toBe(200);
    const header = await app.inject({ method: 'POST', url: '/echo/invoke', headers: { 'x-api-key': KEY }, payload: { input: { name: 'a' } } });
    expect(header.statusCode).toBe(200);
    const wrong = await app.inject({ method: 'POST', url: '/echo/invoke', headers: { authorization: `Bearer ${KEY}x` }, payload: { input: { name: 'a' } } });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json().code).toBe('RUNNEL_ERR_UNAUTHORIZED');
    expect(wrong.headers['www-authenticate']).toBe('Bearer');
    expect(wrong.body).not.toContain(KEY);
  });

  it('refuses two different keys in one request, and takes one key sent in both headers', async () => {
    const bob = 'k_live_fedcba9876543210';
    for (const headers of [
      { authorization: `Bearer ${bob}`, 'x-api-key': KEY },
      { authorization: `Bearer ${KEY}`, 'x-api-key': bob },
    ]) {
      const res = await app.inject({ method: 'POST', url: '/whoami/invoke', headers, payload: { input: null } });
      expect(res.statusCode).toBe(401);
      expect(res.json().code).toBe('RUNNEL_ERR_UNAUTHORIZED');
    }
    // bob's: alice's requests are counted against the rate limit the tests below reach.
    const same = await app.inject({ method: 'POST', url: '/whoami/invoke', headers: { authorization: `Bearer ${bob}`, 'x-api-key': bob }, payload: { input: null } });
    expect(same.json().output).toBe('bob');
  });

  it("hands the caller's identity to the per-request config modifier", async () => {
    const res = await app.inject({ method: 'POST', url: '/whoami/invoke', headers: { 'x-api-key': KEY }, payload: { input: null } });
    expect(res.json().output).toBe('alice');
  });

  it('documents the security schemes in OpenAPI', async () => {
    const doc = (await app.inject({ url: '/openapi.json', headers: { 'x-api-key': KEY } })).json();
    expect(Object.keys(doc.components.securitySchemes)).toEqual(['bearerAuth', 'apiKeyHeader']);
  });
});

describe('CORS and rate limits', () => {
  it('answers a listed origin, and an unlisted one with no allow header', async () => {
    const preflight = await app.inject({ method: 'OPTIONS', url: '/echo/invoke', headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' } });
    expect(preflight.headers['access-control-allow-origin']).toBe('https://app.example');
    const evil = await app.inject({ method: 'OPTIONS', url: '/echo/invoke', headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' } });
    expect(evil.headers['access-control-allow-origin']).toBeUndefined();
    const get = await app.inject({ url: '/healthz', headers: { origin: 'https://evil.example' } });
    expect(get.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('limits requests per key, with retry-after', async () => {
    const call = (key: string) => app.inject({ method: 'POST', url: '/echo/invoke', headers: { 'x-api-key': key }, payload: { input: { name: 'a' } } });
    const other = 'k_live_fedcba9876543210';
    let limited;
    for (let i = 0; i < 6; i++) limited = await call(other);
    expect(limited?.statusCode).toBe(429);
    expect(limited?.json().code).toBe('RUNNEL_ERR_RATE_LIMITED');
    expect(limited?.headers['retry-after']).toBeDefined();
    // Over its limit, nothing of a request is read or parsed (a limits probe: a body that did not parse was
    // still answered 422, so the limit did not hold for the work of reading bodies).
    const garbage = await app.inject({ method: 'POST', url: '/echo/invoke', headers: { 'x-api-key': other, 'content-type': 'application/json' }, payload: '{bad' });
    expect([garbage.statusCode, garbage.json().code]).toEqual([429, 'RUNNEL_ERR_RATE_LIMITED']);
    // The other key has its own budget.
    expect((await call(KEY)).statusCode).toBe(200);
    expect((await app.inject('/healthz')).statusCode).toBe(200);
  });
});

describe('health and metrics', () => {
  it('counts requests by chain, endpoint and status', async () => {
    const metrics = (await app.inject({ url: '/metrics', headers: { 'x-api-key': KEY } })).body;
    expect(metrics).toMatch(/runnel_requests_total\{chain="\/echo",endpoint="invoke",status="200"\} \d+/);
    expect(sampleValue(metrics, 'runnel_request_duration_seconds_bucket', { chain: '/echo', endpoint: 'invoke', le: '0.005' })).toBeTypeOf('number');
    expect(metrics).toContain('runnel_open_streams 0');
  });

  it('lets only the keys named in RUNNEL_METRICS_KEYS read /metrics, which add up every caller\'s traffic', async () => {
    const [alice, bob] = [{ name: 'alice', key: KEY }, { name: 'bob', key: 'k_live_fedcba9876543210' }];
    const named = await buildApp({ chains: [echo] as never, config: { apiKeys: [alice, bob], metricsKeys: ['alice'] } });
    // Keys on and none named: no key reads them. `*`: every key does.
    const closed = await buildApp({ chains: [echo] as never, config: { apiKeys: [alice] } });
    const open = await buildApp({ chains: [echo] as never, config: { apiKeys: [alice], metricsKeys: ['*'] } });
    try {
      const refused = await named.inject({ url: '/metrics', headers: { 'x-api-key': bob.key } });
      expect(refused.statusCode).toBe(403);
      expect(refused.json()).toMatchObject({ code: 'RUNNEL_ERR_FORBIDDEN', message: expect.stringContaining('RUNNEL_METRICS_KEYS') });
      expect(refused.body).not.toContain('runnel_requests_total');
      expect((await named.inject({ url: '/metrics', headers: { 'x-api-key': alice.key } })).statusCode).toBe(200);
      expect((await closed.inject({ url: '/metrics', headers: { 'x-api-key': alice.key } })).statusCode).toBe(403);
      expect((await open.inject({ url: '/metrics', headers: { 'x-api-key': alice.key } })).statusCode).toBe(200);
    } finally {
      await Promise.all([named.close(), closed.close(), open.close()]);
    }
    // A name that is no key's would lock the scraper out: the start fails, naming it and the keys there are.
    expect(() => loadServerConfig({ RUNNEL_API_KEYS: `alice:${KEY}`, RUNNEL_METRICS_KEYS: 'prometheus' })).toThrow(
      'RUNNEL_METRICS_KEYS: "prometheus": not the name of a key in RUNNEL_API_KEYS ("alice")',
    );
    // A probe: the key itself written for its name was printed at the start, into the logs.
    const echoed = (env: Record<string, string>): string => {
      try {
        loadServerConfig(env);
      } catch (error) {
        return (error as Error).message;
      }
      throw new Error('loaded');
    };
    const asKey = echoed({ RUNNEL_API_KEYS: `alice:${KEY}`, RUNNEL_METRICS_KEYS: KEY });
    expect(asKey).toContain('entry 1 is the key named "alice" itself, not its name');
    const otherSecret = 'ZZ-not-a-key-here-0123456789';
    const long = echoed({ RUNNEL_API_KEYS: `alice:${KEY}`, RUNNEL_METRICS_KEYS: `alice,${otherSecret}` });
    expect(long).toContain('entry 2 (not quoted: it may be a key)');
    for (const message of [asKey, long, echoed({ RUNNEL_METRICS_KEYS: otherSecret })]) {
      expect(message).not.toContain(KEY);
      expect(message).not.toContain(otherSecret);
    }
    expect(() => loadServerConfig({ RUNNEL_METRICS_KEYS: 'prometheus' })).toThrow(/RUNNEL_API_KEYS is not set/);
    expect(loadServerConfig({ RUNNEL_API_KEYS: `alice:${KEY}`, RUNNEL_METRICS_KEYS: 'alice' }).metricsKeys).toEqual(['alice']);
    await expect(buildApp({ chains: [echo] as never, config: { apiKeys: [alice], metricsKeys: ['prom'] } })).rejects.toThrow(/"prom": not the name of a key/);
  });

  it('exports registry helpers that refuse bad registrations at start', async () => {
    expect(() => defineChain({ path: 'joke', runnable: echo.runnable })).toThrow(/must look like/);
    expect(() => defineChain({ path: '/x', runnable: echo.runnable, enabledEndpoints: ['invoke', 'stream_evnets' as never] })).toThrow(/unknown endpoint "stream_evnets"/);
    expect(() => defineChain({ path: '/x', runnable: echo.runnable, configKeys: ['callbacks' as never] })).toThrow(/cannot be set by clients/);
    expect(() => defineChain({ path: '/docs', runnable: echo.runnable })).toThrow(/built-in/);
    // Named, with the others a path may not start with (a trial found `/c` refused without a word of why).
    expect(() => defineChain({ path: '/c/x', runnable: echo.runnable })).toThrow(/built-in route \(\/c\): a chain's first segment is none of docs, openapi.json, healthz, readyz, metrics, c, v1/);
    // A trial: /v1 was taken (the OpenAI routes live there), and a plain function failed later in buildApp
    // with "runnable.inputJsonSchema is not a function", no code and no path.
    expect(() => defineChain({ path: '/v1/chat', runnable: echo.runnable })).toThrow(/built-in/);
    expect(() => defineChain({ path: '/plain', runnable: ((x: unknown) => x) as never })).toThrow('/plain: runnable is a plain function; wrap it: lambda(fn)');
    expect(() => defineChain({ path: '/none', runnable: undefined as never })).toThrow('/none: runnable must be a Runnable (lambda(fn), sequence(...), prompt.pipe(model)), got undefined');
    // The chat endpoints need a messages adapter: left out by default without one, refused when asked for.
    expect(defineChain({ path: '/x', runnable: echo.runnable }).enabledEndpoints).not.toContain('ui_stream');
    expect(defineChain({ path: '/x', runnable: echo.runnable }).enabledEndpoints).not.toContain('chat_completions');
    expect(defineChain({ path: '/x', runnable: echo.runnable, messages: { toInput: () => ({ input: { name: 'x' } }) } }).enabledEndpoints).toEqual(expect.arrayContaining(['ui_stream', 'chat_completions']));
    expect(() => defineChain({ path: '/x', runnable: echo.runnable, enabledEndpoints: ['invoke', 'ui_stream'] })).toThrow(/ui_stream needs a messages adapter/);
    await expect(buildApp({ chains: [echo, echo] as never })).rejects.toThrow(/Two chains are registered at \/echo/);
  });
});
