/**
 * A step retried or fallen back from keeps no chat turn a history inside it saved before it failed: a retry
 * (`withRetry`) whose attempt failed after the history saved its turn saved it twice, and a fallback's answer
 * stood beside the failed runnable's turn. The attempt that succeeds keeps its turn, once; a request that fails
 * after it still takes it back (`Saves` passes it up).
 */
import { expect, it } from 'vitest';
import { lambda, MemoryHistoryStore, withMessageHistory } from '../../src/index.js';
import { Saves } from '../../src/core/index.js';

function setUp() {
  const histories = new MemoryHistoryStore();
  const chat = withMessageHistory<string, string>(lambda((messages: unknown[]) => `answer ${messages.length}`) as never, {
    getHistory: (sessionId, { identity }) => histories.history(`${identity}:${sessionId}`),
  });
  const turn = (sessionId: string) => histories.read(`anonymous:${sessionId}`).map((m) => m.text);
  return { chat, turn };
}

/** Fails its first `times` calls. */
function flaky(times: number) {
  let calls = 0;
  return lambda((text: string) => {
    if (calls++ < times) throw new Error('flaky');
    return text;
  });
}

for (const how of ['invoke', 'stream'] as const) {
  const run = async (runnable: { invoke: (...a: never[]) => Promise<unknown>; stream: (...a: never[]) => Promise<AsyncIterable<unknown>> | AsyncIterable<unknown> }, config: Record<string, unknown>) => {
    if (how === 'invoke') return runnable.invoke('hello' as never, config as never);
    const chunks: unknown[] = [];
    for await (const chunk of await runnable.stream('hello' as never, config as never)) chunks.push(chunk);
    return chunks.join('');
  };

  it(`${how}: a retried step saves its turn once`, async () => {
    const { chat, turn } = setUp();
    const out = await run(chat.pipe(flaky(1)).withRetry({ stopAfterAttempt: 2, initialDelayMs: 0 }) as never, { configurable: { session_id: 'r' } });
    expect(out).toBe('answer 1');
    expect(turn('r')).toEqual(['hello', 'answer 1']);
  });

  it(`${how}: a fallback's answer keeps no turn of the runnable that failed`, async () => {
    const { chat, turn } = setUp();
    const out = await run(chat.pipe(flaky(1)).withFallbacks([lambda(() => 'fallback') as never]) as never, { configurable: { session_id: 'f' } });
    expect(out).toBe('fallback');
    expect(turn('f')).toEqual([]);
  });

  it(`${how}: the succeeded attempt's turn goes up to the request, which takes it back when it fails`, async () => {
    const { chat, turn } = setUp();
    const saves = new Saves();
    const chain = chat.withRetry({ stopAfterAttempt: 2, initialDelayMs: 0 }).pipe(flaky(1));
    await expect(run(chain as never, { configurable: { session_id: 'u' }, onSave: saves.onSave })).rejects.toThrow('flaky');
    expect(turn('u')).toEqual(['hello', 'answer 1']);
    await saves.takeBack();
    expect(turn('u')).toEqual([]);
  });
}
