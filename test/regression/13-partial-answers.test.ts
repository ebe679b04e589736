/**
 * Issue 13 §1: a client that goes away never leaves a partial answer behind.
 *
 * The shipped `/joke` (response cache) and `/chat` (history) chains run on the
 * real `openai` and `@anthropic-ai/sdk` clients against the local provider
 * server, with Redis for the cache and the history. For each SDK, each
 * endpoint and each point of the provider's stream — before the first token,
 * mid-stream, after the last token, before the stream's end — a client
 * disconnects while the provider holds its stream there. Then:
 *
 * - the provider's request was closed;
 * - the same request answers the whole text, fetched anew from the provider;
 * - the chat session holds only the turn that completed;
 * - the cache received only whole answers of runs nobody aborted.
 *
 * Both SDKs end an aborted stream as if it were done, so before the fix the
 * truncated answer was cached and saved.
 */
import { request as httpRequest } from 'node:http';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatChain } from '../../chains/chat.js';
import { jokeChain } from '../../chains/joke.js';
import { connectServices, type ChainSpec, type Services } from '../../src/index.js';
import { settleWithin } from '../helpers.js';
import { recordCacheWrites } from '../support/cache-spy.js';
import { startProviderServer, type ProviderServer } from '../support/provider-server.js';
import { startServer, type TestServer } from '../support/server.js';

const WHOLE = 'Why did the cat sit?';
const ENDPOINTS = ['invoke', 'batch', 'stream', 'stream_log', 'stream_events'] as const;
type Endpoint = (typeof ENDPOINTS)[number];

/** Where the provider's stream stops, in frames of its recorded reply (negative: all but that many). */
const POINTS = {
  openai: { 'before the first token': 0, 'mid-stream': 4, 'after the last token': -3, 'before the end': -1 },
  anthropic: { 'before the first token': 0, 'mid-stream': 4, 'after the last token': -3, 'before the end': -1 },
} as const;

interface Setup {
  provider: ProviderServer;
  server: TestServer;
  services: Services;
  /** Every answer handed to the cache, as text, with whether the run's request had been closed by then. */
  stored: string[];
}

async function setUp(sdk: 'openai' | 'anthropic'): Promise<Setup> {
  const provider = await startProviderServer(sdk);
  const services = await connectServices({ redisUrl: 'redis://127.0.0.1:6379', cacheNamespace: `runnel-test:partial:${randomUUID()}` });
  const stored = recordCacheWrites(services);
  const env = sdk === 'openai' ? { OPENAI_API_KEY: 'sk-test-0000', OPENAI_BASE_URL: provider.url } : { ANTHROPIC_API_KEY: 'sk-ant-test-0000', ANTHROPIC_BASE_URL: provider.url };
  const context = { services, env };
  const server = await startServer({}, [jokeChain(context), chatChain(context)] as ChainSpec<never, unknown>[]);
  return { provider, server, services, stored };
}

function body(chain: 'joke' | 'chat', endpoint: Endpoint, text: string, sessionId: string): Record<string, unknown> {
  const input = chain === 'joke' ? { topic: text } : { message: text };
  const config = chain === 'chat' ? { config: { configurable: { session_id: sessionId } } } : {};
  return endpoint === 'batch' ? { inputs: [input], ...config } : { input, ...config };
}

/** Sends the request, waits until the provider holds its stream at the point, and goes away. */
async function disconnectAt(setup: Setup, frames: number, url: string, payload: unknown): Promise<void> {
  const held = setup.provider.holdNext(frames);
  const abandoned = setup.provider.nextAbandon();
  const req = httpRequest(url, { method: 'POST', agent: false, headers: { 'content-type': 'application/json' } });
  req.on('error', () => {});
  req.on('response', (res) => res.resume());
  req.end(JSON.stringify(payload));
  await settleWithin(held, 10_000);
  req.destroy();
  // The model's own HTTP request is closed.
  await settleWithin(abandoned, 10_000);
}

async function invoke(url: string, payload: unknown): Promise<unknown> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(payload) });
  expect(res.status).toBe(200);
  return ((await res.json()) as { output: unknown }).output;
}

for (const sdk of ['openai', 'anthropic'] as const) {
  describe(`a client that goes away, through the real ${sdk} SDK`, () => {
    let setup: Setup;
    let completed = 0;
    beforeAll(async () => {
      setup = await setUp(sdk);
    });
    afterAll(async () => {
      await setup.server.close();
      await setup.services.close();
      await setup.provider.close();
    });

    for (const endpoint of ENDPOINTS) {
      for (const [point, frames] of Object.entries(POINTS[sdk])) {
        it(`${endpoint}, ${point}: nothing partial is cached or saved`, async () => {
          const { server, provider, stored } = setup;
          const topic = `${endpoint} ${point} ${randomUUID()}`;
          await disconnectAt(setup, frames, `${server.url}/joke/${endpoint}`, body('joke', endpoint, topic, ''));
          const requests = provider.requests.length;
          // The same request again: a whole answer, asked of the provider anew.
          expect(await invoke(`${server.url}/joke/invoke`, { input: { topic } })).toBe(WHOLE);
          expect(provider.requests.length).toBe(requests + 1);
          completed += 1;

          const sessionId = `s-${randomUUID()}`;
          await disconnectAt(setup, frames, `${server.url}/chat/${endpoint}`, body('chat', endpoint, 'cut short', sessionId));
          // The session waits for the abandoned run, so this turn sees whatever it left behind.
          const again = `again ${randomUUID()}`;
          expect(await invoke(`${server.url}/chat/invoke`, body('chat', 'invoke', again, sessionId))).toBe(WHOLE);
          completed += 1;
          const history = (await (await fetch(`${server.url}/chat/history/${sessionId}`)).json()) as { messages: { type: string; content: string }[] };
          expect(history.messages.map((m) => [m.type, m.content])).toEqual([
            ['human', again],
            ['ai', WHOLE],
          ]);
          // Only the answers of the runs that completed reached the cache, and each whole.
          expect(stored).toEqual(Array.from({ length: completed }, () => WHOLE));
        });
      }
    }

    it('a stream the provider breaks off is an error, and is neither cached nor saved', async () => {
      const { server, provider, stored } = setup;
      const before = stored.length;
      const topic = `cut ${randomUUID()}`;
      provider.cutNext(-3);
      const res = await fetch(`${server.url}/joke/invoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { topic } }) });
      expect(res.status).toBe(502);
      expect(((await res.json()) as { code: string }).code).toBe('RUNNEL_ERR_PROVIDER_UNAVAILABLE');
      const sessionId = `s-${randomUUID()}`;
      provider.cutNext(-3);
      const streamed = await fetch(`${server.url}/chat/stream`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body('chat', 'stream', 'hello', sessionId)) });
      const frames = await streamed.text();
      expect(frames).toContain('event: error');
      expect(frames).toContain('RUNNEL_ERR_PROVIDER_UNAVAILABLE');
      expect(frames).not.toContain('event: end');
      const history = (await (await fetch(`${server.url}/chat/history/${sessionId}`)).json()) as { messages: unknown[] };
      expect(history.messages).toEqual([]);
      expect(stored.length).toBe(before);
      // And the next call gets the whole answer from the provider.
      expect(await invoke(`${server.url}/joke/invoke`, { input: { topic } })).toBe(WHOLE);
    });
  });
}

for (const sdk of ['openai', 'anthropic'] as const) {
  describe(`the response cache between callers, through the real ${sdk} SDK`, () => {
    const keys = { ada: 'ada-key-0123456789abcdef', bob: 'bob-key-0123456789abcdef' };
    let provider: ProviderServer;
    let server: TestServer;
    let services: Services;
    beforeAll(async () => {
      provider = await startProviderServer(sdk);
      services = await connectServices({ redisUrl: 'redis://127.0.0.1:6379', cacheNamespace: `runnel-test:scope:${randomUUID()}` });
      const env = sdk === 'openai' ? { OPENAI_API_KEY: 'sk-test-0000', OPENAI_BASE_URL: provider.url } : { ANTHROPIC_API_KEY: 'sk-ant-test-0000', ANTHROPIC_BASE_URL: provider.url };
      const mine = jokeChain({ services, env });
      const shared = { ...jokeChain({ services, env }), path: '/joke-shared', cacheScope: 'shared' as const };
      server = await startServer({ apiKeys: Object.entries(keys).map(([name, key]) => ({ name, key })) }, [mine, shared] as ChainSpec<never, unknown>[]);
    });
    afterAll(async () => {
      await server.close();
      await services.close();
      await provider.close();
    });

    const ask = async (path: string, who: keyof typeof keys, topic: string): Promise<number> => {
      const before = provider.requests.length;
      const res = await fetch(`${server.url}${path}/invoke`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${keys[who]}` },
        body: JSON.stringify({ input: { topic } }),
      });
      expect(((await res.json()) as { output: string }).output).toBe(WHOLE);
      return provider.requests.length - before;
    };

    it("keeps each caller's own entries by default (a hit would tell bob what ada asked); cacheScope: 'shared' shares them", async () => {
      const topic = `scope ${randomUUID()}`;
      expect(await ask('/joke', 'ada', topic)).toBe(1);
      expect(await ask('/joke', 'ada', topic)).toBe(0);
      expect(await ask('/joke', 'bob', topic)).toBe(1);
      expect(await ask('/joke-shared', 'ada', topic)).toBe(1);
      expect(await ask('/joke-shared', 'bob', topic)).toBe(0);
    });
  });
}
