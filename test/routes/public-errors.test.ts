/**
 * What a client reads of an error in a run's events: the error frame of a
 * stream says "Internal Server Error" for an error that is not Runnel's,
 * and so must the `on_*_error` events of `/stream_events` and the `error`
 * entries of `/stream_log` — on a live stream and in a background run's log
 * — while a Runnel error keeps its code and message everywhere; the AI
 * SDK's UI message stream too, read by the SDK's own transport and reader.
 * In process, `streamEvents` keeps the real message for the developer.
 */
import { randomUUID } from 'node:crypto';
import { DefaultChatTransport, readUIMessageStream, type UIMessage } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineChain, lambda, RunnelError, sequence, tool, type ChainSpec } from '../../src/index.js';
import { frames } from '../support/sse-frames.js';
import { post, startServer, text, type TestServer } from '../support/server.js';

const SECRET = 'postgres://app:hunter2@db.internal:5432/prod';
const leaky = sequence(
  lambda((input: { why: string }) => input, { input: z.object({ why: z.string() }) }),
  lambda((input: { why: string }) => {
    if (input.why === 'ours') throw new RunnelError('RUNNEL_ERR_OUTPUT_PARSE', 'Could not parse the answer');
    if (input.why === 'internal') throw new RunnelError('RUNNEL_ERR_INTERNAL', `lost ${SECRET}`);
    throw new Error(`could not connect to ${SECRET}`);
  }),
);

/** A tool that fails with a message no client may read, on a chain the AI SDK's `useChat` reads as events. */
const lookup = tool(
  async ({ q }: { q: string }): Promise<string> => {
    throw new Error(`could not connect to ${SECRET} for ${q}`);
  },
  { name: 'lookup', description: 'Looks a word up', schema: z.object({ q: z.string() }) },
);
const leakyTool = defineChain({
  path: '/leaky_tool',
  runnable: sequence(
    lambda((input: { q: string }) => ({ q: input.q, id: 'call-1' }), { input: z.object({ q: z.string() }) }),
    lambda((call: { q: string; id: string }) => lookup.invoke({ q: call.q })),
  ),
  messages: { stream: 'events', toInput: ({ turns }) => ({ input: { q: turns.at(-1)?.text ?? '' } }) },
});

let server: TestServer;
beforeAll(async () => {
  server = await startServer({}, [defineChain({ path: '/leaky', runnable: leaky }), leakyTool] as ChainSpec<never, unknown>[]);
});
afterAll(async () => server.close());

describe("a run's errors in its events, as a client reads them", () => {
  it('an error that is not Runnel’s: masked in /stream_events and /stream_log, live and durable; the error frame says the same', async () => {
    for (const [path, body] of [
      ['/leaky/stream_events', { input: { why: 'theirs' } }],
      ['/leaky/stream_log', { input: { why: 'theirs' } }],
      ['/leaky/stream_events', { input: { why: 'theirs' }, on_disconnect: 'continue' }],
    ] as const) {
      const answer = await text(await post(`${server.url}${path}`, body));
      expect(answer, path).not.toContain('hunter2');
      const all = frames(answer);
      expect(all.at(-1), path).toMatchObject({ event: 'error', data: { code: 'RUNNEL_ERR_INTERNAL', message: 'Internal Server Error' } });
      const said = JSON.stringify(all.filter((frame) => frame.event === 'data').map((frame) => frame.data));
      expect(said, path).toContain('RUNNEL_ERR_INTERNAL: Internal Server Error');
    }
  });

  it('a RUNNEL_ERR_INTERNAL thrown on purpose: its message stays in the log, the answer says Internal Server Error', async () => {
    const answer = await post(`${server.url}/leaky/invoke`, { input: { why: 'internal' } });
    expect(answer.status).toBe(500);
    expect(await answer.json()).toMatchObject({ code: 'RUNNEL_ERR_INTERNAL', message: 'Internal Server Error' });
  });

  it("a Runnel error keeps its code and message in the events; in process, streamEvents keeps every message", async () => {
    const answer = frames(await text(await post(`${server.url}/leaky/stream_events`, { input: { why: 'ours' } })));
    const errors = answer.filter((frame) => frame.event === 'data' && String((frame.data as { event?: string }).event).endsWith('_error'));
    expect(errors.length).toBeGreaterThan(0);
    for (const frame of errors) expect((frame.data as { data: { error: string } }).data.error).toBe('RUNNEL_ERR_OUTPUT_PARSE: Could not parse the answer');
    const events = [];
    try {
      for await (const event of leaky.streamEvents({ why: 'theirs' })) events.push(event);
    } catch {
      // the run's own error, after its events
    }
    expect(JSON.stringify(events)).toContain('hunter2');
  });
});

describe("a run's errors in the AI SDK's UI message stream, as useChat reads them", () => {
  it('a tool that fails with an error not Runnel’s: its tool part and the stream’s error say Internal Server Error, never its message (live and durable)', async () => {
    for (const extra of [{}, { on_disconnect: 'continue' }]) {
      const raw = await text(await post(`${server.url}/leaky_tool/ui_stream`, { id: 'c', messages: [{ id: 'm', role: 'user', parts: [{ type: 'text', text: 'otter' }] }], ...extra }));
      expect(raw).not.toContain('hunter2');

      // The AI SDK's own transport and reader, which check every part against the SDK's schema.
      const transport = new DefaultChatTransport<UIMessage>({ api: `${server.url}/leaky_tool/ui_stream`, body: extra });
      const stream = await transport.sendMessages({ chatId: randomUUID(), messages: [{ id: randomUUID(), role: 'user', parts: [{ type: 'text', text: 'otter' }] }], trigger: 'submit-message', messageId: undefined, abortSignal: undefined });
      const errors: unknown[] = [];
      let last: UIMessage | undefined;
      for await (const message of readUIMessageStream({ stream, onError: (error) => errors.push(error) })) last = message;
      const part = last?.parts.find((p) => p.type === 'tool-lookup') as { state: string; errorText: string; input: unknown } | undefined;
      expect(part, JSON.stringify(extra)).toMatchObject({ state: 'output-error', errorText: 'RUNNEL_ERR_INTERNAL: Internal Server Error', input: { q: 'otter' } });
      expect(errors.map((error) => (error as Error).message)).toEqual(['RUNNEL_ERR_INTERNAL: Internal Server Error']);
    }
  });
});

