/**
 * The bounded config-hash decoder agrees with lz-string's own on every hash
 * lz-string makes and on arbitrary strings of its alphabet, and stops at its
 * bound: a hash whose text would grow past it costs time in proportion to the
 * hash, not to the text.
 */
import fc from 'fast-check';
import LZString from 'lz-string';
import { describe, expect, it } from 'vitest';
import { decodeHashText, DecodedTooLong } from '../../src/server/config-hash.js';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+-$';
const UNBOUNDED = Number.MAX_SAFE_INTEGER;

/** lz-string's answer, `throws` where it throws (it does on some strings that are not hashes). */
function reference(hash: string): string | null | 'throws' {
  try {
    return LZString.decompressFromEncodedURIComponent(hash);
  } catch {
    return 'throws';
  }
}

describe('decodeHashText', () => {
  it('decodes every hash lz-string makes: text, any Unicode, JSON configs', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 300 }), fc.string({ unit: 'binary', maxLength: 300 }), fc.json({ maxDepth: 4 })), (text) => {
        expect(decodeHashText(LZString.compressToEncodedURIComponent(text), UNBOUNDED)).toBe(text);
      }),
      { numRuns: 2000 },
    );
    const config = JSON.stringify({ configurable: { temperature: 0.7, session_id: 'abc-123', system: 'Be brief. '.repeat(200) }, tags: ['x'] });
    expect(decodeHashText(LZString.compressToEncodedURIComponent(config), 65_536)).toBe(config);
  });

  it('answers as lz-string does for arbitrary strings of its alphabet (and spaces, read as +)', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom(...ALPHABET, ' ', '%', 'é'), minLength: 1, maxLength: 60 }), (hash) => {
        const expected = reference(hash);
        const got = decodeHashText(hash, UNBOUNDED);
        // A first code of 3, which lz-string never writes and its decoder does not check (it goes on with an
        // undefined first entry and answers garbage, or throws): this decoder says "not a hash".
        if ((Math.max(0, ALPHABET.indexOf(hash[0] === ' ' ? '+' : (hash[0] as string))) & 48) === 48) return void expect(got).toBeNull();
        // Otherwise the same answer, text, '' or null.
        expect(got).toBe(expected);
      }),
      { numRuns: 5000 },
    );
    expect(decodeHashText('', UNBOUNDED)).toBeNull();
  });

  it('stops as soon as the text would pass its bound', () => {
    // 500,000 characters from a hash of about 1 KB (lz-string's output grows with the square of its input).
    const bomb = LZString.compressToEncodedURIComponent('a'.repeat(500_000));
    expect(bomb.length).toBeLessThan(2_000);
    expect(() => decodeHashText(bomb, 65_536)).toThrow(DecodedTooLong);
    const text = 'b'.repeat(65_536);
    expect(decodeHashText(LZString.compressToEncodedURIComponent(text), 65_536)).toBe(text);
    expect(() => decodeHashText(LZString.compressToEncodedURIComponent(`${text}b`), 65_536)).toThrow(DecodedTooLong);
  });
});
