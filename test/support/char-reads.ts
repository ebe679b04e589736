/**
 * Counts the characters a piece of code reads one at a time (`String#charCodeAt`), so a test can say that
 * work grows with the text, not with the text times its chunks, without timing it. Past `limit` reads the
 * count throws, so code that scans the whole text once per chunk fails at once rather than after minutes.
 */
export async function withCharReads<T>(limit: number, work: () => Promise<T>): Promise<{ result: T; reads: number }> {
  const original = String.prototype.charCodeAt;
  let reads = 0;
  String.prototype.charCodeAt = function (this: string, index: number): number {
    if (++reads > limit) throw new Error(`more than ${limit} characters read one at a time`);
    return original.call(this, index);
  };
  try {
    return { result: await work(), reads };
  } finally {
    String.prototype.charCodeAt = original;
  }
}
