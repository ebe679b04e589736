/**
 * The OpenAI client's event streams end at their `data: [DONE]` line (a server that holds the connection open
 * after it is not waited on). Only a line that starts with it ends one: a review found a read that ended 64
 * characters before an answer's own text "data: [DONE]" taken for that line, and the rest of the answer lost.
 */
import { describe, expect, it } from 'vitest';
import { endAtDone } from '../../src/models/clients.js';

/** A body of `reads`, one read each, that says whether it was read to its end or cancelled. */
function body(reads: string[]): { stream: ReadableStream<Uint8Array>; state: { cancelled: boolean; left: number } } {
  const encoder = new TextEncoder();
  const state = { cancelled: false, left: reads.length };
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      const next = reads.shift();
      state.left = reads.length;
      if (next === undefined) controller.close();
      else controller.enqueue(encoder.encode(next));
    },
    cancel() {
      state.cancelled = true;
    },
    // Read on demand only, so `left` counts what nobody asked for.
  }, { highWaterMark: 0 });
  return { stream, state };
}

const chunk = (content: string): string => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content } }] })}\n\n`;

describe('endAtDone', () => {
  it('passes an answer quoting "data: [DONE]" whole, wherever a read ends', async () => {
    const quoted = chunk('An SSE stream ends with data: [DONE]\n and a blank line.');
    const whole = `${chunk('Hi. ')}${quoted}${chunk('Done.')}data: [DONE]\n\n`;
    const at = whole.indexOf('data: [DONE]\\n');
    // Each place a read can end near the quote: 64 characters after its start (the first version looked at a
    // read's last 64 characters as if they began a line), and the characters around its start.
    for (const cut of [at + 63, at + 64, at + 65, at - 1, at, at + 1, at + 5]) {
      // Three reads: what a read wrongly ends the stream at is enqueued itself, the next one is lost.
      const { stream } = body([whole.slice(0, cut), whole.slice(cut, cut + 10), whole.slice(cut + 10)]);
      expect(await new Response(endAtDone(stream)).text(), String(cut)).toBe(whole);
    }
    // A line separator inside the JSON text (JSON leaves U+2028 as it is) does not start a line either.
    const separated = `${chunk('a\u2028data: [DONE]\n')}data: [DONE]\n\n`;
    expect(await new Response(endAtDone(body([separated]).stream)).text()).toBe(separated);
  });

  it('ends at the [DONE] line, however reads split it, and stops reading the body', async () => {
    const answer = `${chunk('Hi.')}data: [DONE]\n\n`;
    for (const cut of [answer.indexOf('data: [DONE]'), answer.indexOf('[DONE]') + 2, answer.length - 2]) {
      const { stream, state } = body([answer.slice(0, cut), answer.slice(cut), ': held open\n\n', ': still\n\n']);
      const text = await new Response(endAtDone(stream)).text();
      expect(text, String(cut)).toBe(answer);
      expect(state.cancelled).toBe(true);
      expect(state.left).toBe(2);
    }
  });
});
