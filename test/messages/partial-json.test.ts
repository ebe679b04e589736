import { describe, expect, it } from 'vitest';
import { parsePartialJson } from '../../src/index.js';

describe('parsePartialJson', () => {
  it.each([
    ['{"a": 1}', { a: 1 }],
    ['{"a": [1, 2', { a: [1, 2] }],
    ['{"name": "Ad', { name: 'Ad' }],
    ['{"name": "Ada", "age"', { name: 'Ada' }],
    ['{"name": "Ada", "age":', { name: 'Ada' }],
    ['{"ok": tr', {}],
    ['{"ok": true, "n": -1.5e3', { ok: true, n: -1500 }],
    ['[{"a": "x\\n', [{ a: 'x\n' }]],
    ['{"s": "a\\', { s: 'a' }],
    ['{"nested": {"deep": {"x": [1, {"y": "z', { nested: { deep: { x: [1, { y: 'z' }] } } }],
  ])('%s', (text, expected) => {
    expect(parsePartialJson(text)).toEqual(expected);
  });

  it('gives undefined for nothing yet, or for text that is not JSON', () => {
    expect(parsePartialJson('')).toBeUndefined();
    expect(parsePartialJson('   ')).toBeUndefined();
    expect(parsePartialJson('Sure! Here it is')).toBeUndefined();
  });

  it('never lets a key pollute the prototype', () => {
    const parsed = parsePartialJson('{"__proto__": {"polluted": true}, "a": 1') as Record<string, unknown>;
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
  });
});
