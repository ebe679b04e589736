/**
 * Handlers a chain's `perRequestConfigModifier` sets — `onUsage` to bill tokens per caller, `onModelCall`,
 * `onSave` — are called on every route that answers a request, beside the server's own (its `/metrics` meter,
 * the take-back of a failed answer's saves), not replaced by them. Through the real `openai` SDK against the
 * local provider server, the history in real Redis, with Node's `fetch`.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatChain } from '../../chains/chat.js';
import { connectServices, type ChainSpec, type Services, type TakeBack } from '../../src/index.js';
import { startProviderServer, type ProviderServer } from '../support/provider-server.js';
import { sampleValue } from '../support/prometheus.js';
import { post, startServer, text, type TestServer } from '../support/server.js';

/** What the chain's own handlers heard for the requests of one `x-bill-to` header. */
interface Heard {
  tokensIn: number;
  calls: number;
  saves: TakeBack[];
}

const heard = new Map<string, Heard>();
const hear = (tag: string): Heard => {
  let entry = heard.get(tag);
  if (entry === undefined) heard.set(tag, (entry = { tokensIn: 0, calls: 0, saves: [] }));
  return entry;
};

let provider: ProviderServer;
let services: Services;
let server: TestServer;

beforeAll(async () => {
  provider = await startProviderServer('openai');
  services = await connectServices({ redisUrl: 'redis://127.0.0.1:6379', namespace: `runnel-test-modifier-${randomUUID()}` });
  const chat = chatChain({ services, env: { OPENAI_API_KEY: 'sk-test-0000', OPENAI_BASE_URL: provider.url } });
  const billed: ChainSpec<never, unknown> = {
    ...(chat as unknown as ChainSpec<never, unknown>),
    perRequestConfigModifier: (_config, request) => {
      // A modifier that knows a stored run cannot carry its handlers leaves them out there.
      if (request.stored === true && request.headers['x-knows-stored'] === '1') return {};
      const entry = hear(String(request.headers['x-bill-to']));
      return {
        onUsage: (usage) => void (entry.tokensIn += usage.input_tokens),
        onModelCall: () => void entry.calls++,
        onSave: (takeBack) => {
          if (request.headers['x-throw'] === '1') throw new Error('a collector bug');
          entry.saves.push(takeBack);
        },
      };
    },
  };
  server = await startServer({}, [billed]);
});
afterAll(async () => {
  await server.close();
  await services.close();
  await provider.close();
});

const tokensInMetrics = async (): Promise<number> => sampleValue(await (await fetch(`${server.url}/metrics`)).text(), 'runnel_model_tokens_total', { chain: '/chat', direction: 'in' }) ?? 0;
const asked = (tag: string) => ({ 'x-bill-to': tag });
const input = () => ({ input: { message: `hello ${randomUUID()}` }, config: { configurable: { session_id: `s-${randomUUID()}` } } });

describe("a chain's perRequestConfigModifier handlers", () => {
  it('hear the usage, the model calls and the saves of /invoke, beside /metrics', async () => {
    const tag = randomUUID();
    const before = await tokensInMetrics();
    const res = await post(`${server.url}/chat/invoke`, input(), asked(tag));
    expect(res.status).toBe(200);
    // The recorded answer reports 12 tokens in.
    expect(hear(tag)).toMatchObject({ tokensIn: 12, calls: 1 });
    expect(hear(tag).saves).toHaveLength(1);
    expect(await tokensInMetrics()).toBe(before + 12);
  });

  it('hear those of /stream once it has answered', async () => {
    const tag = randomUUID();
    const before = await tokensInMetrics();
    const body = await text(await post(`${server.url}/chat/stream`, input(), asked(tag)));
    expect(body).toContain('event: end');
    expect(hear(tag)).toMatchObject({ tokensIn: 12, calls: 1 });
    expect(hear(tag).saves).toHaveLength(1);
    expect(await tokensInMetrics()).toBe(before + 12);
  });

  it('hear each item of a /batch', async () => {
    const tag = randomUUID();
    const one = input();
    const two = input();
    const res = await post(`${server.url}/chat/batch`, { inputs: [one.input, two.input], config: [one.config, two.config] }, asked(tag));
    expect(res.status).toBe(200);
    expect(hear(tag)).toMatchObject({ tokensIn: 24, calls: 2 });
    expect(hear(tag).saves).toHaveLength(2);
  });

  it('hear /v1/chat/completions, streamed or not, and its usage stays right', async () => {
    for (const stream of [false, true]) {
      const tag = randomUUID();
      const before = await tokensInMetrics();
      const body = { model: 'chat', messages: [{ role: 'user', content: `hi ${randomUUID()}` }], metadata: { session_id: `s-${randomUUID()}` }, stream, ...(stream ? { stream_options: { include_usage: true } } : {}) };
      const res = await post(`${server.url}/v1/chat/completions`, body, asked(tag));
      const answer = await text(res);
      expect(res.status, answer).toBe(200);
      expect(answer).toContain('"prompt_tokens":12');
      expect(hear(tag), `stream: ${stream}`).toMatchObject({ tokensIn: 12, calls: 1 });
      expect(await tokensInMetrics()).toBe(before + 12);
    }
  });

  // A review: a collector that threw turned a finished /stream into an end and then an error frame, and a /batch
  // that succeeded into a 500.
  it("do not fail an answer when the chain's onSave throws", async () => {
    const headers = { ...asked(randomUUID()), 'x-throw': '1' };
    const streamed = await text(await post(`${server.url}/chat/stream`, input(), headers));
    expect(streamed).toContain('event: end');
    expect(streamed).not.toContain('event: error');
    const one = input();
    expect((await post(`${server.url}/chat/batch`, { inputs: [one.input], config: [one.config] }, headers)).status).toBe(200);
    expect((await post(`${server.url}/chat/invoke`, input(), headers)).status).toBe(200);
  });

  // A review: a background run or a durable stream runs from its stored config, which keeps no functions, so a
  // caller could have its tokens go unbilled by asking for one.
  it('refuse a background run or a durable stream they cannot go with, which a modifier can tell apart', async () => {
    for (const [url, body] of [
      [`${server.url}/chat/runs`, input()],
      [`${server.url}/chat/stream`, { ...input(), on_disconnect: 'continue' }],
    ] as const) {
      const refused = await post(url, body, asked(randomUUID()));
      expect(refused.status, url).toBe(500);
      expect(((await refused.json()) as { code: string }).code).toBe('RUNNEL_ERR_INTERNAL');
    }
    const submitted = await post(`${server.url}/chat/runs`, input(), { ...asked(randomUUID()), 'x-knows-stored': '1' });
    expect(submitted.status).toBe(202);
    const { run_id: runId } = (await submitted.json()) as { run_id: string };
    expect(((await (await fetch(`${server.url}/chat/runs/${runId}/wait?timeout_s=60`)).json()) as { status: string }).status).toBe('success');
  });
});
