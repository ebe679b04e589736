/**
 * Metadata filters, the same language for every vector store:
 * `{key: value}` (equality), `{key: {$eq|$ne|$gt|$gte|$lt|$lte: v}}`,
 * `{key: {$in|$nin: [...]}}`, `{$and: [...]}`, `{$or: [...]}`. Keys are
 * validated (letters, digits, `_`, `-`, `.` for nesting), so a store that
 * compiles filters to SQL never builds SQL from a user's string.
 */
import { RunnelError } from '../core/index.js';

/** A metadata filter. */
export type Filter = { [key: string]: unknown };

const OPERATORS = new Set(['$eq', '$ne', '$gt', '$gte', '$lt', '$lte', '$in', '$nin']);
const KEY = /^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*$/;

/** A filter problem, located. */
function invalid(message: string, loc: (string | number)[]): RunnelError {
  return new RunnelError('RUNNEL_ERR_INPUT_INVALID', `Invalid filter: ${message}`, { detail: [{ type: 'filter', loc: ['filter', ...loc], msg: message }] });
}

const isScalar = (value: unknown): boolean => value === null || ['string', 'number', 'boolean'].includes(typeof value);

/** Half a surrogate pair: a high one not followed by a low one, or a low one not after a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The deepest a filter's `$and` and `$or` may nest. */
export const MAX_FILTER_DEPTH = 16;
/** The most keys and operators one filter may hold (a `$in` list's values not counted). */
export const MAX_FILTER_CONDITIONS = 1_000;

/**
 * Refuses an operand metadata cannot hold or be compared with (Postgres's JSON takes neither): a number that
 * is not finite (JSON writes it `null`), a string with NUL or half a surrogate pair.
 */
function checkStorable(value: unknown, what: string, loc: (string | number)[]): void {
  if (typeof value === 'number' && !Number.isFinite(value)) throw invalid(`${what}: numbers must be finite`, loc);
  if (typeof value === 'string' && (value.includes('\u0000') || LONE_SURROGATE.test(value))) throw invalid(`${what}: strings may not hold NUL or half a surrogate pair`, loc);
}

/**
 * Checks a filter's shape: known operators, valid keys, scalar operands that metadata can hold, an operator
 * object with at least one operator, at most {@link MAX_FILTER_DEPTH} levels of `$and`/`$or` and
 * {@link MAX_FILTER_CONDITIONS} conditions. Throws `RUNNEL_ERR_INPUT_INVALID`.
 */
export function validateFilter(filter: unknown, loc: (string | number)[] = []): asserts filter is Filter {
  let conditions = 0;
  const count = (): void => {
    if (++conditions > MAX_FILTER_CONDITIONS) throw invalid(`a filter holds at most ${MAX_FILTER_CONDITIONS} conditions`, loc);
  };
  const check = (filter: unknown, loc: (string | number)[], depth: number): void => {
    if (filter === null || typeof filter !== 'object' || Array.isArray(filter)) throw invalid('a filter is an object', loc);
    if (depth > MAX_FILTER_DEPTH) throw invalid(`$and and $or nest at most ${MAX_FILTER_DEPTH} deep`, loc);
    for (const key in filter) {
      if (!Object.hasOwn(filter, key)) continue;
      count();
      const condition = (filter as Record<string, unknown>)[key];
      if (key === '$and' || key === '$or') {
        if (!Array.isArray(condition) || condition.length === 0) throw invalid(`${key} takes a non-empty list of filters`, [...loc, key]);
        condition.forEach((sub, i) => check(sub, [...loc, key, i], depth + 1));
        continue;
      }
      if (!KEY.test(key)) throw invalid(`'${key}' is not a valid metadata key`, [...loc, key]);
      if (isScalar(condition)) {
        checkStorable(condition, `the value of '${key}'`, [...loc, key]);
        continue;
      }
      if (condition === null || typeof condition !== 'object' || Array.isArray(condition)) throw invalid(`the condition on '${key}' must be a value or an operator object`, [...loc, key]);
      const ops = Object.entries(condition);
      if (ops.length === 0) throw invalid(`the condition on '${key}' names no operator`, [...loc, key]);
      for (const [op, operand] of ops) {
        count();
        if (!OPERATORS.has(op)) throw invalid(`unknown operator '${op}'`, [...loc, key, op]);
        if (op === '$in' || op === '$nin') {
          if (!Array.isArray(operand) || !operand.every(isScalar)) throw invalid(`${op} takes a list of values`, [...loc, key, op]);
          for (const value of operand) checkStorable(value, `${op}'s values`, [...loc, key, op]);
        } else if (!isScalar(operand)) throw invalid(`${op} takes a string, number, boolean or null`, [...loc, key, op]);
        else checkStorable(operand, `${op}'s value`, [...loc, key, op]);
      }
    }
  };
  check(filter, loc, 0);
}

/** The value at a dotted path of `metadata`. */
export function valueAt(metadata: Record<string, unknown>, key: string): unknown {
  let value: unknown = metadata;
  for (const part of key.split('.')) {
    if (value === null || typeof value !== 'object' || !Object.hasOwn(value, part)) return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

/** Negative, zero or positive as `a` sorts before, with or after `b` by Unicode code point. */
function codePointOrder(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // Surrogates (astral code points) after every other unit: U+E000–U+FFFF moved below them.
    const fix = (unit: number): number => (unit >= 0xe000 ? unit - 0x800 : unit >= 0xd800 ? unit + 0x2000 : unit);
    return fix(x) - fix(y);
  }
  return a.length - b.length;
}

function compare(value: unknown, op: string, operand: unknown): boolean {
  switch (op) {
    case '$eq':
      return value === operand;
    case '$ne':
      return value !== operand;
    case '$in':
      return (operand as unknown[]).includes(value);
    case '$nin':
      return !(operand as unknown[]).includes(value);
    default: {
      if (typeof value !== typeof operand || (typeof value !== 'number' && typeof value !== 'string')) return false;
      // Strings by code point, as Postgres compares them (COLLATE "C"); JavaScript's `<` compares UTF-16 units,
      // which puts an emoji (a surrogate pair) before U+E000–U+FFFF.
      const order = typeof value === 'number' ? value - (operand as number) : codePointOrder(value as string, operand as string);
      return op === '$gt' ? order > 0 : op === '$gte' ? order >= 0 : op === '$lt' ? order < 0 : order <= 0;
    }
  }
}

/** True when `metadata` satisfies `filter` (a validated filter). */
export function matchesFilter(metadata: Record<string, unknown>, filter: Filter): boolean {
  return Object.entries(filter).every(([key, condition]) => {
    if (key === '$and') return (condition as Filter[]).every((sub) => matchesFilter(metadata, sub));
    if (key === '$or') return (condition as Filter[]).some((sub) => matchesFilter(metadata, sub));
    const value = valueAt(metadata, key);
    if (isScalar(condition)) return value === condition;
    return Object.entries(condition as Record<string, unknown>).every(([op, operand]) => compare(value, op, operand));
  });
}
