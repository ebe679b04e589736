/** A pino destination for tests: each JSON line the logger writes, parsed, in order. */
import { Writable } from 'node:stream';

/**
 * @example
 * const { lines, stream } = jsonLogLines();
 * const app = await buildApp({ chains, logger: { level: 'warn', stream } });
 */
export function jsonLogLines(): { lines: Record<string, unknown>[]; stream: Writable } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line.trim() !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { lines, stream };
}
