/**
 * A tolerant JSON parser for text that is still arriving: `{"a": [1, 2` is
 * `{a: [1, 2]}`. Complete values are kept, an unfinished string is kept as far
 * as it goes, an unfinished key, number-less colon or literal is dropped.
 * Used by the JSON output parser and by tool-call argument streaming.
 */

interface Cursor {
  text: string;
  pos: number;
}

const INCOMPLETE = Symbol('incomplete');
type Parsed = unknown | typeof INCOMPLETE;

function skipWhitespace(c: Cursor): void {
  while (c.pos < c.text.length && /\s/.test(c.text[c.pos] as string)) c.pos++;
}

function parseString(c: Cursor): { value: string; complete: boolean } {
  // c.text[c.pos] is the opening quote.
  let end = c.pos + 1;
  let escaped = false;
  while (end < c.text.length) {
    const ch = c.text[end];
    if (escaped) escaped = false;
    else if (ch === '\\') escaped = true;
    else if (ch === '"') {
      const raw = c.text.slice(c.pos, end + 1);
      c.pos = end + 1;
      return { value: JSON.parse(raw) as string, complete: true };
    }
    end++;
  }
  // Unfinished: drop a dangling escape (and a partial \u sequence), then close it.
  let body = c.text.slice(c.pos + 1);
  body = body.replace(/\\u[0-9a-fA-F]{0,3}$/, '').replace(/\\$/, '');
  c.pos = c.text.length;
  try {
    return { value: JSON.parse(`"${body.replace(/\n/g, '\\n').replace(/\r/g, '\\r').replace(/\t/g, '\\t')}"`) as string, complete: false };
  } catch {
    return { value: '', complete: false };
  }
}

function parseValue(c: Cursor): Parsed {
  skipWhitespace(c);
  if (c.pos >= c.text.length) return INCOMPLETE;
  const ch = c.text[c.pos];
  if (ch === '{') return parseObject(c);
  if (ch === '[') return parseArray(c);
  if (ch === '"') return parseString(c).value;
  const match = /^(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)/.exec(c.text.slice(c.pos));
  if (match !== null) {
    const token = match[0];
    const rest = c.text.slice(c.pos + token.length);
    // A number at the very end may still grow ("12" → "123"), but its current value is a fair reading.
    c.pos += token.length;
    if (rest.length === 0 && /^(t|tr|tru|f|fa|fal|fals|n|nu|nul)$/.test(token)) return INCOMPLETE;
    return JSON.parse(token) as unknown;
  }
  if (/^(t|tr|tru|f|fa|fal|fals|n|nu|nul|-)$/.test(c.text.slice(c.pos))) {
    c.pos = c.text.length;
    return INCOMPLETE;
  }
  throw new SyntaxError(`Unexpected character ${JSON.stringify(ch)} at ${c.pos}`);
}

function parseObject(c: Cursor): Record<string, unknown> {
  c.pos++; // {
  const out: Record<string, unknown> = {};
  for (;;) {
    skipWhitespace(c);
    if (c.pos >= c.text.length) return out;
    if (c.text[c.pos] === '}') {
      c.pos++;
      return out;
    }
    if (c.text[c.pos] === ',') {
      c.pos++;
      continue;
    }
    if (c.text[c.pos] !== '"') throw new SyntaxError(`Expected a key at ${c.pos}`);
    const key = parseString(c);
    if (!key.complete) return out;
    skipWhitespace(c);
    if (c.pos >= c.text.length) return out;
    if (c.text[c.pos] !== ':') throw new SyntaxError(`Expected ':' at ${c.pos}`);
    c.pos++;
    const value = parseValue(c);
    if (value === INCOMPLETE) return out;
    Object.defineProperty(out, key.value, { value, enumerable: true, writable: true, configurable: true });
  }
}

function parseArray(c: Cursor): unknown[] {
  c.pos++; // [
  const out: unknown[] = [];
  for (;;) {
    skipWhitespace(c);
    if (c.pos >= c.text.length) return out;
    if (c.text[c.pos] === ']') {
      c.pos++;
      return out;
    }
    if (c.text[c.pos] === ',') {
      c.pos++;
      continue;
    }
    const value = parseValue(c);
    if (value === INCOMPLETE) return out;
    out.push(value);
  }
}

/**
 * Parses JSON that may be cut off. Returns `undefined` when nothing usable
 * has arrived yet or the text is not JSON at all.
 *
 * @example
 * parsePartialJson('{"name": "Ad') // { name: 'Ad' }
 */
export function parsePartialJson(text: string): unknown {
  const trimmed = text.trim();
  if (trimmed.length === 0) return undefined;
  try {
    return JSON.parse(trimmed) as unknown;
  } catch {
    // fall through to the tolerant parser
  }
  try {
    const value = parseValue({ text: trimmed, pos: 0 });
    return value === INCOMPLETE ? undefined : value;
  } catch {
    return undefined;
  }
}
