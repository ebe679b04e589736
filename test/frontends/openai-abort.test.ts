/**
 * Issue 16: an OpenAI client that aborts — mid-stream, or while waiting for a
 * whole answer — closes the chain's own request to the model provider, and
 * leaves nothing behind: no partial answer in the response cache (the same
 * request is answered anew, whole) and nothing of the turn in `/chat`'s
 * history. The `openai` SDK is the client; openai@6 ends an aborted stream
 * as if it were done, so the test cannot rely on the SDK raising.
 */
import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { history, startOpenAIApp, type OpenAIApp } from '../support/openai-app.js';

let app: OpenAIApp;
beforeAll(async () => {
  app = await startOpenAIApp();
});
afterAll(async () => {
  await app.close();
});

/** Where the provider holds its reply: the role chunk and two words sent, the rest not yet. */
const MID_STREAM = 3;

/** Streams through the SDK and aborts at the first text; resolves once the provider saw its request closed. */
async function abortMidStream(body: OpenAI.ChatCompletionCreateParamsStreaming): Promise<string> {
  const held = app.provider.holdNext(MID_STREAM);
  const abandoned = app.provider.nextAbandon();
  const controller = new AbortController();
  let text = '';
  for await (const chunk of await app.client.chat.completions.create(body, { signal: controller.signal })) {
    text += chunk.choices[0]?.delta.content ?? '';
    if (text !== '') {
      await held;
      controller.abort();
    }
  }
  await abandoned;
  return text;
}

/** Waits for a whole answer through the SDK and aborts while the provider holds it; resolves once the provider saw its request closed. */
async function abortWhileWaiting(body: OpenAI.ChatCompletionCreateParamsNonStreaming): Promise<unknown> {
  const held = app.provider.holdNext(MID_STREAM);
  const abandoned = app.provider.nextAbandon();
  const controller = new AbortController();
  const answer = app.client.chat.completions.create(body, { signal: controller.signal }).catch((error: unknown) => error);
  await held;
  controller.abort();
  await abandoned;
  return answer;
}

describe('a client that aborts /v1/chat/completions', () => {
  it('mid-stream on /joke: the model request is closed, and the same request is answered whole, anew', async () => {
    const topic = `abort ${randomUUID()}`;
    const whole = `You said: Tell me a joke about ${topic} (1 user messages)`;
    const before = app.provider.abandoned;
    const partial = await abortMidStream({ model: 'joke', stream: true, messages: [{ role: 'user', content: topic }] });
    expect(partial).not.toBe('');
    expect(whole.startsWith(partial) && partial !== whole).toBe(true);
    expect(app.provider.abandoned).toBe(before + 1);
    const requests = app.provider.requests.length;
    const again = await app.client.chat.completions.create({ model: 'joke', messages: [{ role: 'user', content: topic }] });
    expect(again.choices[0]?.message.content).toBe(whole);
    expect(app.provider.requests.length).toBe(requests + 1);
    expect(app.stored).not.toContain(partial);
    expect(app.stored.filter((text) => text.includes(topic))).toEqual([whole]);
  });

  it('while waiting for a whole answer on /joke: the same guarantee', async () => {
    const topic = `wait ${randomUUID()}`;
    const failed = await abortWhileWaiting({ model: 'joke', messages: [{ role: 'user', content: topic }] });
    expect(failed).toBeInstanceOf(OpenAI.APIUserAbortError);
    const requests = app.provider.requests.length;
    const again = await app.client.chat.completions.create({ model: 'joke', messages: [{ role: 'user', content: topic }] });
    expect(again.choices[0]?.message.content).toBe(`You said: Tell me a joke about ${topic} (1 user messages)`);
    expect(app.provider.requests.length).toBe(requests + 1);
    expect(app.stored.filter((text) => text.includes(topic))).toEqual([again.choices[0]?.message.content]);
  });

  it('mid-stream on /chat: nothing of the aborted turn is saved to the session', async () => {
    const sessionId = `s-${randomUUID()}`;
    await abortMidStream({ model: 'chat', stream: true, metadata: { session_id: sessionId }, messages: [{ role: 'user', content: 'cut short' }] });
    // The session waits for the aborted run, so this turn sees whatever it left behind: nothing.
    const next = await app.client.chat.completions.create({ model: 'chat', metadata: { session_id: sessionId }, messages: [{ role: 'user', content: 'again' }] });
    expect(next.choices[0]?.message.content).toBe('You said: again (1 user messages)');
    expect(await history(app, sessionId)).toEqual([
      ['human', 'again'],
      ['ai', 'You said: again (1 user messages)'],
    ]);
  });

  it('while waiting on /chat: nothing of the aborted turn is saved either', async () => {
    const sessionId = `s-${randomUUID()}`;
    await abortWhileWaiting({ model: 'chat', metadata: { session_id: sessionId }, messages: [{ role: 'user', content: 'cut short' }] });
    const next = await app.client.chat.completions.create({ model: 'chat', metadata: { session_id: sessionId }, messages: [{ role: 'user', content: 'again' }] });
    expect(next.choices[0]?.message.content).toBe('You said: again (1 user messages)');
    expect(await history(app, sessionId)).toEqual([
      ['human', 'again'],
      ['ai', 'You said: again (1 user messages)'],
    ]);
  });
});
