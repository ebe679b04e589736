/**
 * End to end through the server: a chain on ChatOpenAI (the real SDK, against
 * the local provider server), a client that goes away mid-stream, and the
 * model's own HTTP request closed; token usage in /metrics.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChatOpenAI, ChatPromptTemplate, defineChain, lambda, RunnelError, StringOutputParser } from '../../src/index.js';
import { settleWithin } from '../helpers.js';
import { startProviderServer, type ProviderServer } from '../support/provider-server.js';
import { startServer, type TestServer } from '../support/server.js';

let provider: ProviderServer;
let server: TestServer;
/** The provider's requests before a batch: its failing item fails once the other's model request is under way. */
let requestsBefore = 0;

beforeAll(async () => {
  provider = await startProviderServer('openai');
  const model = (name: string) => new ChatOpenAI({ apiKey: 'sk-test-0000', baseURL: provider.url, model: name, maxRetries: 0 });
  const prompt = ChatPromptTemplate.fromMessages([['human', '{q}']]);
  server = await startServer({}, [
    defineChain({ path: '/slow-model', runnable: prompt.pipe(model('slow')).pipe(new StringOutputParser()) }),
    defineChain({ path: '/model', runnable: prompt.pipe(model('text')).pipe(new StringOutputParser()) }),
    defineChain({
      path: '/picky',
      runnable: lambda(async (input: { q: string }) => {
        if (input.q !== 'fail') return prompt.pipe(model('slow')).pipe(new StringOutputParser());
        // Bounded: a request that never comes fails the test (its message), not hangs it.
        for (let i = 0; i < 6000 && provider.requests.length === requestsBefore; i++) await new Promise((r) => setTimeout(r, 5));
        if (provider.requests.length === requestsBefore) throw new RunnelError('RUNNEL_ERR_INTERNAL', 'the other item never reached the model');
        throw new RunnelError('RUNNEL_ERR_OUTPUT_PARSE', 'not the expected shape');
      }),
    }),
  ] as never);
});
afterAll(async () => {
  await server.close();
  await provider.close();
});

describe('through the server to the model', () => {
  it('closes the model request when the client disconnects mid-stream, and frees the slot', async () => {
    const abandoned = provider.nextAbandon();
    await new Promise<void>((resolve) => {
      const req = httpRequest(`${server.url}/slow-model/stream`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
        res.on('data', (chunk: Buffer) => {
          if (chunk.toString().includes('event: data')) {
            req.destroy();
            resolve();
          }
        });
      });
      req.end(JSON.stringify({ input: { q: 'tell me' } }));
    });
    await settleWithin(abandoned, 2000);
    await settleWithin(
      (async () => {
        while (server.app.runnel.streams.size > 0) await new Promise((r) => setTimeout(r, 10));
      })(),
      2000,
    );
  });

  // A probe: /batch answered 502 for its failed item while the other item's model call ran on to its end
  // (tokens spent, the answer cached, a chat's history written after the 502 — twice after a retry).
  it('ends the other items of a batch when one fails, their model requests closed', async () => {
    requestsBefore = provider.requests.length;
    const abandoned = provider.nextAbandon();
    const res = await fetch(`${server.url}/picky/batch`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ inputs: [{ q: 'tell me' }, { q: 'fail' }] }) });
    expect(res.status).toBe(502);
    expect(((await res.json()) as { code: string; message: string })).toMatchObject({ code: 'RUNNEL_ERR_OUTPUT_PARSE', message: 'inputs[1]: not the expected shape' });
    await settleWithin(abandoned, 2000);
  });

  it('counts model tokens in and out in /metrics, for /invoke and for /stream', async () => {
    const res = await fetch(`${server.url}/model/invoke`, { method: 'POST', body: JSON.stringify({ input: { q: 'hi' } }) });
    expect(((await res.json()) as { output: string }).output).toBe('Why did the cat sit?');
    let metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toContain('runnel_model_tokens_total{chain="/model",direction="in"} 12');
    expect(metrics).toContain('runnel_model_tokens_total{chain="/model",direction="out"} 5');
    const streamed = await fetch(`${server.url}/model/stream`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { q: 'hi' } }) });
    expect(await streamed.text()).toContain('event: end');
    metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toContain('runnel_model_tokens_total{chain="/model",direction="in"} 24');
    expect(metrics).toContain('runnel_model_tokens_total{chain="/model",direction="out"} 10');
  });
});
