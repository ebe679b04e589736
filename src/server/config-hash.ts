/**
 * Decoding a config hash — lz-string's `compressToEncodedURIComponent`, as
 * LangServe's playground and clients make it — with a bound on what it may
 * decode to. lz-string's own decoder has none, and its output can grow with
 * the square of its input: a hash of 16 KB (a URL's worth) decodes to tens of
 * millions of characters, half a second of CPU for one request. This one
 * stops as soon as the text passes `maxLength`, so a hash costs time in
 * proportion to its own length.
 *
 * The format: the hash's characters carry 6 bits each (the URI-safe
 * alphabet below), read lowest bit first. A 2-bit code opens the stream (0:
 * an 8-bit character follows, 1: a 16-bit one, 2: the empty text); then
 * codes of a width that grows as the dictionary does name a dictionary entry
 * (0 and 1 add a literal character first, 2 ends the text), and every entry
 * read adds the previous entry plus the first character of this one.
 */

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+-$';
/** A character's 6-bit value; 0 for a character outside the alphabet (as lz-string reads one). */
const VALUES = new Map([...ALPHABET].map((char, index) => [char, index]));

/** Thrown when the text would be longer than allowed: nothing past the bound is decoded. */
export class DecodedTooLong extends Error {
  constructor(readonly maxLength: number) {
    super(`decodes to more than ${maxLength} characters`);
  }
}

/**
 * The text a config hash holds: `''` for a hash of the empty text, `null` for a hash that is not one (as
 * lz-string's `decompressFromEncodedURIComponent` answers). Throws {@link DecodedTooLong} past `maxLength`.
 *
 * @example
 * decodeHashText(LZString.compressToEncodedURIComponent('{"tags":["a"]}'), 65_536); // '{"tags":["a"]}'
 */
export function decodeHashText(hash: string, maxLength: number): string | null {
  if (hash === '') return null;
  // A `+` that a form encoding turned into a space.
  const input = hash.replaceAll(' ', '+');
  let value = VALUES.get(input.charAt(0)) ?? 0;
  let position = 32;
  let index = 1;
  /** The next `count` bits, lowest first; zeros past the end of the input. */
  const read = (count: number): number => {
    let bits = 0;
    for (let power = 1, n = 0; n < count; n++, power *= 2) {
      if ((value & position) !== 0) bits += power;
      position >>= 1;
      if (position === 0) {
        position = 32;
        value = VALUES.get(input.charAt(index++)) ?? 0;
      }
    }
    return bits;
  };

  const dictionary: string[] = ['', '', ''];
  let first: string;
  switch (read(2)) {
    case 0:
      first = String.fromCharCode(read(8));
      break;
    case 1:
      first = String.fromCharCode(read(16));
      break;
    case 2:
      return '';
    default:
      return null;
  }
  dictionary.push(first);
  let previous = first;
  const parts = [first];
  let length = first.length;
  let enlargeIn = 4;
  let width = 3;
  for (;;) {
    if (index > input.length) return '';
    let code = read(width);
    if (code === 0 || code === 1) {
      dictionary.push(String.fromCharCode(read(code === 0 ? 8 : 16)));
      code = dictionary.length - 1;
      if (--enlargeIn === 0) enlargeIn = 2 ** width++;
    } else if (code === 2) {
      return parts.join('');
    }
    let entry: string;
    if (code < dictionary.length && code > 2) entry = dictionary[code] as string;
    else if (code === dictionary.length) entry = previous + previous.charAt(0);
    else return null;
    length += entry.length;
    if (length > maxLength) throw new DecodedTooLong(maxLength);
    parts.push(entry);
    dictionary.push(previous + entry.charAt(0));
    previous = entry;
    if (--enlargeIn === 0) enlargeIn = 2 ** width++;
  }
}
