/**
 * While a real Runnel process drains after SIGTERM, it keeps listening:
 * /readyz answers 503 on new connections (a balancer sees "not ready", not
 * "connection refused"), new chain requests answer 503
 * RUNNEL_ERR_SHUTTING_DOWN, and streams opened before the signal run on to
 * their final frame. The streams wait on a gate the test opens, so every
 * step is ordered by events, not by how fast this machine is; the grace
 * (30 s, past the old fixed 10 s deadline) only bounds a failure.
 */
import { request } from 'node:http';
import { describe, expect, it } from 'vitest';
import { startReadyProcess } from '../helpers.js';

interface Answer {
  status: number;
  body: string;
}

/** One request on a connection of its own (no keep-alive pool), as a balancer's probe or a new client makes it. */
function ask(base: string, path: string, init: { method?: string; body?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { method: init.method ?? 'GET', agent: false, headers: { 'content-type': 'application/json' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

/** A stream that records its frames as they arrive. */
function openStream(base: string, path: string): { frames: string[]; first: Promise<void>; done: Promise<void> } {
  const frames: string[] = [];
  let onFirst!: () => void;
  const first = new Promise<void>((resolve) => (onFirst = resolve));
  const done = new Promise<void>((resolve, reject) => {
    const req = request(`${base}${path}`, { method: 'POST', agent: false, headers: { 'content-type': 'application/json' } }, (res) => {
      let buffer = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buffer += chunk;
        const parts = buffer.split('\r\n\r\n');
        buffer = parts.pop() ?? '';
        for (const part of parts) if (part.startsWith('event:')) frames.push(part);
        if (frames.some((f) => f.startsWith('event: data'))) onFirst();
      });
      res.on('end', () => resolve());
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(JSON.stringify({ input: { topic: 'drain' } }));
  });
  return { frames, first, done };
}

describe('draining after SIGTERM', () => {
  it('keeps listening: /readyz 503, new chain requests 503 RUNNEL_ERR_SHUTTING_DOWN, open streams run on to their final frame, exit 0', async () => {
    const { child, base, exited } = await startReadyProcess('test/support/slow-server.ts', { RUNNEL_SHUTDOWN_GRACE_MS: '30000' });
    try {
      expect((await ask(base, '/readyz')).status).toBe(200);
      const streams = Array.from({ length: 5 }, () => openStream(base, '/gated/stream'));
      await Promise.all(streams.map((s) => s.first));
      let streamsEnded = 0;
      for (const s of streams) void s.done.then(() => streamsEnded++);

      child.kill('SIGTERM');
      // Probe as a balancer does, each time on a new connection, until readiness changes.
      let ready = await ask(base, '/readyz');
      while (ready.status === 200) ready = await ask(base, '/readyz');
      expect(ready.status).toBe(503);
      expect(JSON.parse(ready.body)).toMatchObject({ status: 'shutting down' });
      // Draining (the gate is shut, so the streams are still open): new work is turned away in Runnel's error shape.
      const invoke = await ask(base, '/wait/invoke', { method: 'POST', body: JSON.stringify({ input: 'late' }) });
      expect(invoke.status).toBe(503);
      expect(JSON.parse(invoke.body)).toMatchObject({ code: 'RUNNEL_ERR_SHUTTING_DOWN' });
      const stream = await ask(base, '/gated/stream', { method: 'POST', body: JSON.stringify({ input: null }) });
      expect(stream.status).toBe(503);
      expect(JSON.parse(stream.body)).toMatchObject({ code: 'RUNNEL_ERR_SHUTTING_DOWN' });
      expect((await ask(base, '/readyz')).status).toBe(503);
      expect(streamsEnded).toBe(0);

      expect((await ask(base, '/release', { method: 'POST', body: '{}' })).status).toBe(200);
      await Promise.all(streams.map((s) => s.done));
      for (const s of streams) {
        expect(s.frames.filter((f) => f.startsWith('event: data')).map((f) => f.split('data: ')[1])).toEqual(['"waiting "', '"released"']);
        expect(s.frames.at(-1)).toMatch(/^event: end/);
      }
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  }, 60_000);
});
