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

/** The class of a chunk whose class adds up many of its chunks at once (a static `merge`), or undefined. */
function mergesMany<T>(chunk: T): MergesMany<T> | undefined {
  if (!hasConcat(chunk)) return undefined;
  const type = chunk.constructor as Partial<MergesMany<T>> | undefined;
  return typeof type?.merge === 'function' ? (type as MergesMany<T>) : undefined;
}

/**
 * A stream's chunks added up as they come, exactly as {@link concat} adds them pairwise, and holding no more than
 * it does: a chunk that cannot be added (a snapshot, a number) lets go of what came before. Only a run of chunks
 * of one class that adds up many at once (a static `merge`, as `AIMessageChunk` has) is kept, and added up in one
 * pass when read: pairwise, a message chunk re-reads its tool calls' arguments so far at every chunk — an
 * answer's worth of parsing per token.
 *
 * @example
 * const sum = new ChunkSum<AIMessageChunk>();
 * for await (const chunk of model.stream('Hi')) sum.push(chunk);
 * sum.value(); // the whole answer
 */
export class ChunkSum<T> {
  private acc: T | undefined;
  private has = false;
  /** A run of chunks of `type`, after `acc` (which then counts as none). */
  private pending: T[] = [];
  private type: MergesMany<T> | undefined;

  /** Adds a chunk. */
  push(chunk: T): void {
    if (this.pending.length > 0) {
      // A snapshot replaces what came before it (see concat): it ends the run.
      if (hasConcat(chunk) && (chunk.constructor as unknown) === this.type && !isSnapshot(chunk)) {
        this.pending.push(chunk);
        return;
      }
      this.acc = this.flush();
    }
    this.acc = this.has ? concat(this.acc as T, chunk) : chunk;
    this.has = true;
    this.type = mergesMany(this.acc);
    if (this.type !== undefined) {
      this.pending = [this.acc];
      this.acc = undefined;
    }
  }

  /** The chunks so far added up; `undefined` for none. */
  value(): T | undefined {
    if (this.pending.length > 0) this.acc = this.flush();
    return this.acc;
  }

  private flush(): T {
    const merged = (this.type as MergesMany<T>).merge(this.pending);
    this.pending = [];
    this.type = undefined;
    return merged;
  }
}

/** Adds up a whole stream with {@link concat} (as {@link ChunkSum} does: message chunks in one pass); `undefined` when the stream is empty. */
export async function collect<T>(stream: AsyncIterable<T>): Promise<T | undefined> {
  const sum = new ChunkSum<T>();
  for await (const chunk of stream) sum.push(chunk);
  return sum.value();
}
