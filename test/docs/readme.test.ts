/**
 * Issue 14: README's headline figure disagreed with its own Benchmarks table,
 * and it linked a file outside the repository. Its links resolve inside a
 * clone, and the headline quotes the table.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = new URL('../..', import.meta.url).pathname;
const readme = readFileSync(join(root, 'README.md'), 'utf8');

describe('README', () => {
  it('links only to files that exist in the repository', () => {
    const links = [...readme.matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)].map((m) => m[1] as string).filter((link) => !/^[a-z]+:/.test(link));
    expect(links.length).toBeGreaterThan(5);
    for (const link of links) {
      expect(link.startsWith('..'), link).toBe(false);
      expect(existsSync(join(root, link)), link).toBe(true);
    }
    expect(readme).not.toContain('shared/PROTOCOL.md');
  });

  it("quotes the Benchmarks table's 3-step invoke figures in its headline", () => {
    const headline = /a 3-step `invoke` costs ([\d.]+) µs against @langchain\/core's\s+([\d.]+) µs/.exec(readme);
    const row = /^\| 3-step invoke \| [\d.]+ µs \| ([\d.]+) µs \| ([\d.]+) µs \|/m.exec(readme);
    expect(headline).not.toBeNull();
    expect(row).not.toBeNull();
    expect(Number(headline?.[1])).toBeCloseTo(Number(row?.[1]), 1);
    expect(Math.abs(Number(headline?.[2]) - Number(row?.[2]))).toBeLessThan(1);
  });

  it('uses no platform-only commands in its examples (open is macOS-only)', () => {
    expect(readme).not.toMatch(/^open http/m);
  });
});
