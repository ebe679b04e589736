/** A long run held under way: a chain for the tests of logs longer than a run's log keeps. */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { z } from 'zod';
import { defineChain, generator, lambda } from '../../src/index.js';
import { deferred } from '../helpers.js';

/**
 * `/essay`: `words` words (`w0 `, `w1 `, …), then, once `gate` opens, `end.`. `made` resolves when every word
 * is made. With `turns`, each word is made in a turn of its own (so its own entry of a Redis log); without,
 * all in one. Its messages adapter takes the last message as the topic (`/ui_stream`).
 *
 * @example
 * const { chain, made, gate } = gatedEssay(10_300, { turns: true });
 */
export function gatedEssay(words: number, options: { turns?: boolean } = {}) {
  const made = deferred();
  const gate = deferred();
  const chain = defineChain({
    path: '/essay',
    runnable: generator(async function* (inputs: AsyncIterable<{ topic: string }>) {
      for await (const _ of inputs);
      for (let i = 0; i < words; i++) {
        yield `w${i} `;
        if (options.turns === true) await nextTurn();
      }
      made.resolve();
      await gate.promise;
      yield 'end.';
    }).withTypes({ input: z.object({ topic: z.string() }), output: z.string() }),
    messages: { toInput: ({ turns }) => ({ input: { topic: turns.at(-1)?.text ?? '' } }) },
  });
  return { chain, made, gate };
}

/**
 * `/gated`: yields `before `, then waits for `open()` (called before or after it gets there), then yields
 * `after`. A run held under way for as long as a test needs.
 *
 * @example
 * const { chain, open } = gatedChain();
 */
export function gatedChain() {
  const gate = deferred();
  const chain = defineChain({
    path: '/gated',
    runnable: lambda(async function* () {
      yield 'before ';
      await gate.promise;
      yield 'after';
    }),
  });
  return { chain, open: () => gate.resolve() };
}
