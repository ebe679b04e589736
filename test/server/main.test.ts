/**
 * Issue 14: `npm start` on a busy port printed an uncaught stack trace. It
 * says what is wrong and what to set, and exits 1.
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';

const root = new URL('../..', import.meta.url).pathname;
const DATABASE_URL = process.env.RUNNEL_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/runnel_test';

describe('npm start', () => {
  it('on a port in use: one line naming the port and PORT, exit 1, no stack trace', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as { port: number };
    try {
      const child = spawn(process.execPath, ['--import', 'tsx', 'src/server/main.ts'], {
        cwd: root,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', PORT: String(port), HOST: '127.0.0.1', DATABASE_URL, LOG_LEVEL: 'warn' },
      });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.stdout.resume();
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      expect(code).toBe(1);
      expect(stderr).toContain(`runnel: cannot listen: port ${port} is in use (set PORT)`);
      expect(stderr).not.toMatch(/\n\s+at /);
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
  }, 60_000);
});
