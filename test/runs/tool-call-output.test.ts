/**
 * A background run of a model that answers with a long tool call, through the real `openai` SDK against the
 * local provider server: its record keeps the whole call, and the run adds up its output once, not a chunk at a
 * time (a concat per chunk re-read the call's arguments so far at every token: seconds of the event loop for a
 * call that writes a long text).
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { AIMessageChunk, buildApp, ChatOpenAI, defineChain, type ChainSpec } from '../../src/index.js';
import { startProviderServer, type ProviderServer } from '../support/provider-server.js';

const PIECES = 500;

let provider: ProviderServer;
let app: FastifyInstance;
let url: string;

beforeAll(async () => {
  provider = await startProviderServer('openai');
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
    `data: ${JSON.stringify({ id: 'chatcmpl-long', object: 'chat.completion.chunk', created: 1764500000, model: 'scripted', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  const frames = [
    chunk({ role: 'assistant', content: '' }),
    chunk({ tool_calls: [{ index: 0, id: 'call_long', type: 'function', function: { name: 'write', arguments: '{"text":"' } }] }),
    ...Array.from({ length: PIECES }, () => chunk({ tool_calls: [{ index: 0, function: { arguments: 'abcd' } }] })),
    chunk({ tool_calls: [{ index: 0, function: { arguments: '"}' } }] }),
    chunk({}, 'tool_calls'),
    'data: [DONE]\n\n',
  ];
  provider.script = () => ({ frames });
  const model = new ChatOpenAI({ apiKey: 'sk-test', baseURL: provider.url, model: 'scripted', maxRetries: 0 });
  const writer = defineChain({
    path: '/writer',
    description: 'Calls write with a long text',
    runnable: model.bindTools([{ name: 'write', description: 'Writes', schema: z.object({ text: z.string() }) }]),
  });
  app = await buildApp({ chains: [writer] as ChainSpec<never, unknown>[], config: {} });
  await app.listen({ port: 0, host: '127.0.0.1' });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await app.close();
  await provider.close();
});

it('keeps a long tool call whole in the run’s record, added up once', async () => {
  const merges = vi.spyOn(AIMessageChunk, 'merge');
  try {
    const res = await fetch(`${url}/writer/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: 'Write it' }) });
    expect(res.status).toBe(202);
    const { run_id: runId } = (await res.json()) as { run_id: string };
    const waited = await fetch(`${url}/writer/runs/${runId}/wait?timeout_s=60`);
    const record = (await waited.json()) as { status: string; output: { tool_calls: unknown[] } };
    expect(record.status).toBe('success');
    expect(record.output.tool_calls).toMatchObject([{ id: 'call_long', name: 'write', args: { text: 'abcd'.repeat(PIECES) } }]);
    expect(merges.mock.calls.length).toBeLessThan(20);
  } finally {
    merges.mockRestore();
  }
});
