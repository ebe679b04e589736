/**
 * Resuming a long durable answer on `/ui_stream`. A run's log keeps its last
 * 10,000 entries, and the AI SDK's reconnect replays the message from its
 * `start`: a log whose beginning was trimmed away rebuilt the message without
 * it, and finished it as whole (a probe: the resumed answer began at its
 * 101st word). It is now an `error` part that says so, which `useChat`
 * shows; the run goes on, and its record keeps the whole output.
 */
import { DefaultChatTransport, readUIMessageStream, type UIMessage, type UIMessageChunk } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChainSpec } from '../../src/index.js';
import { gatedEssay } from '../support/gated-essay.js';
import { startServer, type TestServer } from '../support/server.js';

const WORDS = 10_100;
/** Every word but the last made (the log trimmed); the gate holds the run under way until the test opens it. */
const { chain: essay, made, gate } = gatedEssay(WORDS);

let server: TestServer;
beforeAll(async () => {
  server = await startServer({}, [essay] as ChainSpec<never, unknown>[]);
});
afterAll(async () => {
  await server.close();
});

describe('resuming a durable answer longer than its log keeps', () => {
  it('is an error part saying it cannot be resumed, not the answer without its beginning; the live client gets it whole', async () => {
    const transport = new DefaultChatTransport<UIMessage>({ api: `${server.url}/essay/ui_stream`, body: { on_disconnect: 'continue' } });
    const live = await transport.sendMessages({
      chatId: 'long-chat',
      trigger: 'submit-message',
      messageId: undefined,
      abortSignal: undefined,
      messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'write' }] }],
    });
    const liveText = collect(live);
    await made.promise;

    const resumed = await transport.reconnectToStream({ chatId: 'long-chat' });
    expect(resumed).not.toBeNull();
    const resumedChunks = readAll(resumed as ReadableStream<UIMessageChunk>);
    gate.resolve();

    const chunks = await resumedChunks;
    expect(chunks.map((c) => c.type)).toEqual(['error']);
    expect((chunks[0] as { errorText: string }).errorText).toMatch(/^RUNNEL_ERR_RUN_LOG_TRIMMED: The stream of run \S+ cannot be replayed from its start: those frames are no longer kept/);
    // The client that asked reads the whole answer, as it was made.
    const text = await liveText;
    expect(text.startsWith('w0 w1 ')).toBe(true);
    expect(text.endsWith(`w${WORDS - 1} end.`)).toBe(true);
  });
});

async function readAll(stream: ReadableStream<UIMessageChunk>): Promise<UIMessageChunk[]> {
  const out: UIMessageChunk[] = [];
  for await (const chunk of stream) out.push(chunk);
  return out;
}

async function collect(stream: ReadableStream<UIMessageChunk>): Promise<string> {
  let last: UIMessage | undefined;
  for await (const message of readUIMessageStream({ stream, terminateOnError: true })) last = message;
  return (last?.parts ?? []).map((part) => (part.type === 'text' ? part.text : '')).join('');
}
