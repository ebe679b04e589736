/**
 * How streamed chunks add up. One function, `concat`, used wherever a run
 * collects a stream into a value: a lambda gathering its input, a stream's
 * final output, a cached stream replayed. Message chunks plug in by having a
 * `concat(other)` method of their own.
 */

/** A value that knows how to add a later chunk to itself (message chunks do). */
export interface Mergeable<T = unknown> {
  concat(other: T): T;
}

const REPLACES = Symbol.for('runnel.replaces');

/**
 * Marks an object chunk as a snapshot: it replaces everything streamed before
 * it instead of adding to it (a JSON parser's ever more complete object).
 * The mark is invisible in JSON.
 */
export function asSnapshot<T extends object>(value: T): T {
  Object.defineProperty(value, REPLACES, { value: true, enumerable: false });
  return value;
}

function isSnapshot(value: unknown): boolean {
  return value !== null && typeof value === 'object' && (value as { [REPLACES]?: boolean })[REPLACES] === true;
}

/** An object of fields: its prototype is Object's, or none (not an array, a class instance, a Date). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function hasConcat(value: unknown): value is Mergeable {
  return (
    value !== null &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    typeof (value as { concat?: unknown }).concat === 'function'
  );
}

/**
 * Adds chunk `b` to the accumulated value `a`: strings concatenate, arrays
 * concatenate, plain objects merge key-wise (recursively for values that are
 * themselves mergeable), objects with a `concat` method merge themselves.
 * A snapshot (see {@link asSnapshot}) replaces what came before. Anything
 * else cannot be added, and the later value wins.
 *
 * @example
 * concat({ a: 'Hel', n: 1 }, { a: 'lo', b: [1] }) // { a: 'Hello', n: 1, b: [1] }
 */
export function concat<T>(a: T, b: T): T {
  if (a === undefined || a === null) return b;
  if (b === undefined || b === null) return a;
  if (isSnapshot(b)) return b;
  if (typeof a === 'string' && typeof b === 'string') return (a + b) as T;
  if (Array.isArray(a) && Array.isArray(b)) return [...a, ...b] as T;
  if (hasConcat(a)) return a.concat(b) as T;
  if (isPlainObject(a) && isPlainObject(b)) {
    const merged: Record<string, unknown> = { ...a };
    for (const key of Object.keys(b)) {
      merged[key] = key in a ? concat(a[key], b[key]) : b[key];
    }
    return merged as T;
  }
  return b;
}

/** A chunk class that adds up many of its chunks in one pass (`AIMessageChunk.merge`): what `concat` does pairwise. */
interface MergesMany<T> {
  merge(chunks: readonly T[]): T;
}

/**
 * Chunks added up as {@link concat} adds them pairwise; `undefined` for none. Chunks all of one class that adds up
 * many at once (a static `merge`) are added up by it, in one pass: pairwise, a message chunk re-reads its tool
 * calls' arguments so far at every chunk — an answer's worth of parsing per token.
 */
export function concatAll<T>(chunks: readonly T[]): T | undefined {
  if (chunks.length === 0) return undefined;
  const first = chunks[0];
  const type = hasConcat(first) ? (first.constructor as Partial<MergesMany<T>>) : undefined;
  if (typeof type?.merge === 'function' && chunks.every((chunk) => hasConcat(chunk) && chunk.constructor === type)) return type.merge(chunks);
  let acc: T | undefined;
  for (const [i, chunk] of chunks.entries()) acc = i === 0 ? chunk : concat(acc as T, chunk);
  return acc;
}

/** Adds up a whole stream with {@link concat}; `undefined` when the stream is empty. */
export async function collect<T>(stream: AsyncIterable<T>): Promise<T | undefined> {
  let acc: T | undefined;
  let first = true;
  for await (const chunk of stream) {
    acc = first ? chunk : concat(acc as T, chunk);
    first = false;
  }
  return acc;
}
