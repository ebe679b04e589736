import { describe, expect, it } from 'vitest';
import { cutText } from '../../src/core/index.js';

describe('cutText', () => {
  it('keeps a text that fits and cuts a longer one with an ellipsis', () => {
    expect(cutText('hello', 5)).toBe('hello');
    expect(cutText('hello world', 5)).toBe('hello…');
  });

  it('never keeps half a surrogate pair', () => {
    // '😀' is two UTF-16 units: a cut at 5 falls between them and goes one unit back.
    const cut = cutText('abcd😀efg', 5);
    expect(cut).toBe('abcd…');
    expect(cutText('abc😀efg', 5)).toBe('abc😀…');
    expect(Buffer.from(cut, 'utf8').toString('utf8')).toBe(cut);
  });
});
