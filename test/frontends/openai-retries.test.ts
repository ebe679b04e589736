/**
 * The `openai` SDK retries 408, 409, 429 and 5xx answers (twice, by default)
 * unless the answer says `x-should-retry: false`. A failure Runnel knows is
 * not worth another try — a bug, the agent out of iterations, a request the
 * provider refused — is answered with that header, so the SDK runs the chain
 * once, not three times (a probe: an agent that ran out of iterations spent
 * its model calls three times over). A failure worth retrying still is.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineChain, lambda, RunnelError, type ChainSpec } from '../../src/index.js';
import { startServer, type TestServer } from '../support/server.js';

/** How many times each way of failing ran. */
const runs = new Map<string, number>();

/** Fails as the last message says. */
const failing = defineChain({
  path: '/failing',
  runnable: lambda(({ text }: { text: string }) => {
    runs.set(text, (runs.get(text) ?? 0) + 1);
    if (text === 'bug') throw new Error('a bug');
    if (text === 'iterations') throw new RunnelError('RUNNEL_ERR_AGENT_MAX_ITERATIONS', 'The agent stopped after 5 iterations');
    if (text === 'rejected') throw new RunnelError('RUNNEL_ERR_PROVIDER_REJECTED', 'The provider refused the request (400)');
    throw new RunnelError('RUNNEL_ERR_PROVIDER_UNAVAILABLE', 'The model provider failed');
  }),
  messages: { toInput: ({ turns }) => ({ input: { text: turns.at(-1)?.text ?? '' } }) },
});

let server: TestServer;
let client: OpenAI;
beforeAll(async () => {
  server = await startServer({}, [failing] as ChainSpec<never, unknown>[]);
  // The SDK's default retries.
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'keys are off' });
});
afterAll(async () => {
  await server.close();
});

const ask = (text: string) => ({ model: 'failing', messages: [{ role: 'user' as const, content: text }] });

describe('retries of /v1/chat/completions by the openai SDK', () => {
  it.each(['bug', 'iterations', 'rejected'])('runs a chain that fails with no use retrying (%s) once, streamed or not', async (text) => {
    runs.clear();
    await expect(client.chat.completions.create(ask(text))).rejects.toBeInstanceOf(OpenAI.InternalServerError);
    expect(runs.get(text)).toBe(1);
    await expect(client.chat.completions.create({ ...ask(text), stream: true })).rejects.toBeInstanceOf(OpenAI.InternalServerError);
    expect(runs.get(text)).toBe(2);
  });

  it('leaves a failure worth retrying to the SDK: no x-should-retry on it', async () => {
    const res = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ask('unavailable')) });
    expect(res.status).toBe(502);
    expect(res.headers.get('x-should-retry')).toBeNull();
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('RUNNEL_ERR_PROVIDER_UNAVAILABLE');
  });
});
