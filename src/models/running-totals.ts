/**
 * Token counts as providers stream them: running totals of the answer so far (Anthropic's always, OpenAI's
 * from compatible servers that report usage in every chunk), which each chunk turns into what it adds.
 */

/**
 * A token count as sent, or undefined when it is missing or not a count.
 *
 * @example
 * tokenCount(12); // 12
 * tokenCount(null); // undefined
 */
export const tokenCount = (value: unknown): number | undefined => (typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined);

/**
 * What the running total `total` of the count `key` adds to what the stream reported of it before (0 when it
 * is missing), remembered in `state` for the next chunk.
 *
 * @example
 * const state = {};
 * grownBy(10, state, 'cached'); // 10
 * grownBy(12, state, 'cached'); // 2
 */
export function grownBy<K extends string>(total: number | undefined, state: Partial<Record<K, number>>, key: K): number {
  if (total === undefined) return 0;
  const before = state[key] ?? 0;
  state[key] = Math.max(total, before) as Partial<Record<K, number>>[K];
  return Math.max(0, total - before);
}
