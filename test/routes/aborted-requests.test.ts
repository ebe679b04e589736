/**
 * Issue 14: a request whose client goes away used to log "incoming request"
 * and never a completion line. Each now ends with one line, `request aborted
 * by the client` with status 499, and one 499 in /metrics.
 */
import { request as httpRequest } from 'node:http';
import { Writable } from 'node:stream';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { buildApp, defineChain, lambda } from '../../src/index.js';

/** A chain that waits for its run to be aborted, telling the test when it has started. */
let onStart: () => void = () => {};
const hang = defineChain({
  path: '/hang',
  runnable: lambda(
    async (_input: { n: number }, config) => {
      onStart();
      await new Promise((resolve) => config.signal?.addEventListener('abort', resolve, { once: true }));
      return 'never seen';
    },
    { input: z.object({ n: z.number() }), output: z.string() },
  ),
});

const lines: Record<string, unknown>[] = [];
let waiters: (() => void)[] = [];
let app: FastifyInstance;
let url: string;

/** Resolves once a log line matches. */
async function logged(match: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  for (;;) {
    const found = lines.find(match);
    if (found !== undefined) return found;
    await new Promise<void>((resolve) => waiters.push(resolve));
  }
}

beforeAll(async () => {
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      const ready = waiters;
      waiters = [];
      ready.forEach((resolve) => resolve());
      done();
    },
  });
  app = await buildApp({ chains: [hang], logger: { level: 'info', stream } });
  await app.listen({ port: 0, host: '127.0.0.1' });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});
afterAll(async () => app.close());

const count = async (endpoint: string, status: string): Promise<number> =>
  Number(new RegExp(`runnel_requests_total\\{chain="/hang",endpoint="${endpoint}",status="${status}"\\} (\\d+)`).exec(await app.runnel.metrics.render())?.[1] ?? 0);

describe('a client that goes away', () => {
  for (const endpoint of ['invoke', 'batch', 'stream', 'stream_events'] as const) {
    it(`/${endpoint}: one completion line with 499, and one 499 in /metrics`, async () => {
      const before = await count(endpoint, '499');
      const body = endpoint === 'batch' ? { inputs: [{ n: 1 }] } : { input: { n: 1 } };
      const started = new Promise<void>((resolve) => (onStart = resolve));
      const req = httpRequest(`${url}/hang/${endpoint}`, { method: 'POST', agent: false, headers: { 'content-type': 'application/json' } });
      req.on('error', () => {});
      req.end(JSON.stringify(body));
      await started;
      const incoming = await logged((line) => line.msg === 'incoming request' && (line.req as { url?: string } | undefined)?.url === `/hang/${endpoint}` && !lines.some((l) => l.reqId === line.reqId && l.msg === 'request aborted by the client'));
      req.destroy();
      const done = await logged((line) => line.reqId === incoming.reqId && line.msg === 'request aborted by the client');
      expect(done.res).toEqual({ statusCode: 499 });
      expect(typeof done.responseTime).toBe('number');
      expect(await count(endpoint, '499')).toBe(before + 1);
      // No other completion line for it, and nothing else counted.
      expect(lines.filter((line) => line.reqId === incoming.reqId && line.msg === 'request completed')).toEqual([]);
      expect(await app.runnel.metrics.render()).not.toMatch(new RegExp(`chain="/hang",endpoint="${endpoint}",status="(200|500)"`));
    });
  }
});
