/**
 * A review: shutdown ended streams and answered in-flight requests only after the run queue had closed, and
 * with Redis gone that close takes longer than the grace (a worker's close waits 2 s more, and its steps time
 * out): an /invoke running at SIGTERM lost its connection at the deadline, and the process exited 1.
 */
import { describe, expect, it } from 'vitest';
import { startReadyProcess, type ReadyProcess } from '../helpers.js';
import { RedisServer } from '../support/redis-server.js';

describe('SIGTERM with a background run under way and Redis gone', () => {
  it('still answers an in-flight /invoke with 503 RUNNEL_ERR_SHUTTING_DOWN, and exits 0', async () => {
    const redis = await RedisServer.scratch();
    let child: ReadyProcess['child'] | undefined;
    try {
      const server = await startReadyProcess('test/support/shutdown-redis-server.ts', { REDIS_URL: redis.url });
      child = server.child;
      const { base } = server;
      const json = { 'content-type': 'application/json' };
      const invoke = fetch(`${base}/forever/invoke`, { method: 'POST', headers: json, body: JSON.stringify({ input: 'invoked' }) }).then(async (res) => ({
        status: res.status,
        body: (await res.json()) as { code?: string },
      }));
      expect((await fetch(`${base}/forever/runs`, { method: 'POST', headers: json, body: JSON.stringify({ input: 'queued' }) })).status).toBe(202);
      while ((server.output().match(/started forever/g) ?? []).length < 2) await new Promise((resolve) => setTimeout(resolve, 20));
      await redis.kill();
      child.kill('SIGTERM');
      expect(await invoke).toEqual({ status: 503, body: expect.objectContaining({ code: 'RUNNEL_ERR_SHUTTING_DOWN' }) });
      expect(await server.exited).toBe(0);
    } finally {
      child?.kill('SIGKILL');
      await redis.kill();
    }
  }, 60_000);
});
