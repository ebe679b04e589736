/**
 * How deep JSON from a client may nest, checked before it is parsed: a request's body, a config hash, a
 * tool call's arguments (JSON inside a JSON string, parsed later).
 */

/**
 * How deep a request's JSON may nest (Ruby's JSON parser has the same default). Deeper, the body is refused
 * before it is parsed: a value thousands of levels deep overflows the stack of whatever walks it later (the
 * cache key, a run record's serialisation) and would fail its run with an internal error.
 */
export const MAX_JSON_DEPTH = 100;

/**
 * True when the JSON text `text` nests arrays and objects deeper than `max`. A scan of the text, strings
 * skipped; text too short to reach the depth is not scanned.
 *
 * @example
 * nestedDeeperThan('{"a":[[1]]}', 2); // true
 */
export function nestedDeeperThan(text: string, max: number = MAX_JSON_DEPTH): boolean {
  if (text.length <= 2 * max) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (inString) {
      if (code === 0x5c) i++; // a backslash: the next character is escaped
      else if (code === 0x22) inString = false;
    } else if (code === 0x22) {
      inString = true;
    } else if (code === 0x7b || code === 0x5b) {
      if (++depth > max) return true;
    } else if (code === 0x7d || code === 0x5d) {
      depth--;
    }
  }
  return false;
}
