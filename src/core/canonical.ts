/** JSON in one form for equal values, whatever order their keys were written in: for keys and comparisons. */

function stable(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(stable);
  if (value !== null && typeof value === 'object') {
    const json = typeof (value as { toJSON?: unknown }).toJSON === 'function' ? (value as { toJSON(): unknown }).toJSON() : value;
    if (json !== value) return stable(json);
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .filter((key) => (value as Record<string, unknown>)[key] !== undefined)
        .map((key) => [key, stable((value as Record<string, unknown>)[key])]),
    );
  }
  return value;
}

/**
 * `value` as JSON with every object's keys in order and undefined members left out: two values equal as JSON
 * give the same text (a cache key; stored metadata against new, which jsonb has reordered).
 *
 * @example
 * canonicalJson({ b: 1, a: [{ d: 2, c: undefined }] }); // '{"a":[{"d":2}],"b":1}'
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(stable(value)) ?? 'null';
}
