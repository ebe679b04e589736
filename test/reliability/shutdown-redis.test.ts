/**
 * A review: shutdown ended streams and answered in-flight requests only after the run queue had closed, and
 * with Redis gone that close takes longer than the grace (a worker's close waits 2 s more, and its steps time
 * out): an /invoke running at SIGTERM lost its connection at the deadline, and the process exited 1.
 */
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { RedisServer } from '../support/redis-server.js';

const root = new URL('../../', import.meta.url).pathname;

describe('SIGTERM with a background run under way and Redis gone', () => {
  it('still answers an in-flight /invoke with 503 RUNNEL_ERR_SHUTTING_DOWN, and exits 0', async () => {
    const redis = await RedisServer.scratch();
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/shutdown-redis-server.ts'], {
      cwd: root,
      env: { ...process.env, REDIS_URL: redis.url },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      let out = '';
      const port = await new Promise<number>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          const match = /ready (\d+)/.exec(out);
          if (match) resolve(Number(match[1]));
        });
        child.once('exit', (code) => reject(new Error(`exited ${code}`)));
      });
      const base = `http://127.0.0.1:${port}`;
      const json = { 'content-type': 'application/json' };
      const invoke = fetch(`${base}/forever/invoke`, { method: 'POST', headers: json, body: JSON.stringify({ input: 'invoked' }) }).then(async (res) => ({
        status: res.status,
        body: (await res.json()) as { code?: string },
      }));
      expect((await fetch(`${base}/forever/runs`, { method: 'POST', headers: json, body: JSON.stringify({ input: 'queued' }) })).status).toBe(202);
      while ((out.match(/started forever/g) ?? []).length < 2) await new Promise((resolve) => setTimeout(resolve, 20));
      await redis.kill();
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      child.kill('SIGTERM');
      expect(await invoke).toEqual({ status: 503, body: expect.objectContaining({ code: 'RUNNEL_ERR_SHUTTING_DOWN' }) });
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
      await redis.kill();
    }
  }, 60_000);
});
