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
 * How deep a stored record (a run's record, a chat message, a cached answer) may nest when it is read back:
 * deeper, it is not valid. The server's records nest little deeper than the requests they came from (100); a
 * library's may nest deeper than Redis's own JSON decoder goes (1,000), so the bound is above that, and below
 * where the walks a record meets overflow the stack (measured on Node 24 at the top of the stack: the cache
 * key's canonical JSON at 2,173 levels, JSON.stringify at 4,458). A record 100,000 levels deep (planted, or
 * another program's) overflowed the reply's serialisation or the cache key: an internal error, and for a
 * listing every run in it.
 */
export const MAX_STORED_JSON_DEPTH = 1500;

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
