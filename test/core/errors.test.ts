import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { errorCodes } from '../../src/index.js';

describe('error registry', () => {
  it('documents every code in docs/errors.md with its status', () => {
    const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
    for (const [code, { status }] of Object.entries(errorCodes)) {
      expect(doc, code).toMatch(new RegExp(`\\|\\s*\`${code}\`\\s*\\|\\s*${status}\\s*\\|`));
    }
    const documented = [...doc.matchAll(/\|\s*`(RUNNEL_ERR_[A-Z_]+)`/g)].map((m) => m[1]);
    expect(documented.sort()).toEqual(Object.keys(errorCodes).sort());
  });
});
