/**
 * `text` cut to at most `limit` UTF-16 units with `…` after it, or as it is when it fits. The cut never falls
 * between the two halves of a surrogate pair (an emoji): a lone half is invalid UTF-8 and JSON a provider refuses.
 *
 * @example
 * cutText('hello world', 5); // 'hello…'
 */
export function cutText(text: string, limit: number): string {
  if (text.length <= limit) return text;
  const end = /[\uD800-\uDBFF]/.test(text[limit - 1] ?? '') ? limit - 1 : limit;
  return `${text.slice(0, end)}…`;
}
