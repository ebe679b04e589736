/**
 * A probe: when `/agent`'s model called a tool that does not exist, or wrote
 * arguments that do not parse beside a call that does, the agent answered the
 * call with an error for the model to read — but no tool ran, so the AI SDK's
 * UI stream had no tool part of it: the page showed an empty step, then the
 * model's reply to an error the page never showed. Such a call now shows as
 * a failed tool part, as a tool's own failure does. The client is the AI
 * SDK's `DefaultChatTransport`, the model the real openai SDK against the
 * local provider server.
 */
import { randomUUID } from 'node:crypto';
import { DefaultChatTransport, readUIMessageStream, type UIMessage } from 'ai';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { KEY, startOpenAIApp, type OpenAIApp } from '../support/openai-app.js';

let app: OpenAIApp;
beforeAll(async () => {
  app = await startOpenAIApp();
  // A tool result comes back: the model says what it read. Else the call the question asks for.
  app.provider.script = (body) => {
    const messages = body.messages as { role: string; content: unknown }[];
    const last = messages.at(-1);
    if (last?.role === 'tool') return { text: `I read: ${String(last.content)}` };
    if (String(last?.content).includes('weather')) return { toolCalls: [{ name: 'weather', args: { city: 'Paris' } }] };
    return { toolCalls: [{ name: 'calculator', args: { expression: '1 + 1' } }, { name: 'calculator', args: '{"expression": "2 +' }] };
  };
});
afterAll(async () => {
  await app.close();
});

async function answer(text: string, body?: Record<string, unknown>): Promise<UIMessage | undefined> {
  const transport = new DefaultChatTransport<UIMessage>({ api: `${app.server.url}/agent/ui_stream`, headers: { authorization: `Bearer ${KEY}` }, body });
  const stream = await transport.sendMessages({ chatId: randomUUID(), messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text }] }], trigger: 'submit-message', messageId: undefined, abortSignal: undefined });
  let last: UIMessage | undefined;
  for await (const message of readUIMessageStream({ stream, terminateOnError: true })) last = message;
  return last;
}

const toolParts = (message: UIMessage | undefined) => (message?.parts ?? []).filter((part) => part.type.startsWith('tool-'));

it('shows a call of a tool that does not exist as a failed tool part, live and durable', async () => {
  for (const body of [undefined, { on_disconnect: 'continue' }]) {
    const message = await answer(`What is the weather? ${randomUUID()}`, body);
    expect(toolParts(message), JSON.stringify(body)).toEqual([
      expect.objectContaining({ type: 'tool-weather', state: 'output-error', input: { city: 'Paris' }, errorText: 'Error: there is no tool named weather. Use one of: calculator, search_docs.' }),
    ]);
    expect(message?.parts.at(-1)).toMatchObject({ type: 'text', text: 'I read: Error: there is no tool named weather. Use one of: calculator, search_docs.' });
  }
});

it('shows a call whose arguments do not parse, beside one that ran, as a failed tool part after it', async () => {
  const message = await answer(`Add them up ${randomUUID()}`);
  const parts = toolParts(message);
  expect(parts).toHaveLength(2);
  expect(parts[0]).toMatchObject({ type: 'tool-calculator', state: 'output-available', input: { expression: '1 + 1' }, output: '2' });
  expect(parts[1]).toMatchObject({ type: 'tool-calculator', state: 'output-error', input: {} });
  expect((parts[1] as { errorText: string }).errorText).toMatch(/^Error: the arguments of this call of calculator could not be read/);
});

it('answers the same on /v1/chat/completions, whose client sees only the answer', async () => {
  const completion = await app.client.chat.completions.create({ model: 'agent', messages: [{ role: 'user', content: `What is the weather? ${randomUUID()}` }] });
  expect(completion.choices[0]?.message.content).toBe('I read: Error: there is no tool named weather. Use one of: calculator, search_docs.');
});
