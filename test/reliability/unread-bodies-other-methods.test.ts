/**
 * A body sent with a method Fastify reads no body for is bounded as a GET's is: not only GET and HEAD but
 * TRACE (Fastify's third bodyless method) and the methods Node parses that no route has (PROPFIND, PURGE, …),
 * whose requests reach the 404 handler with their body unread. A review's probe: 64 MiB sent with
 * `TRACE /healthz` was read and dropped, the connection kept for the request pipelined behind it.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LINGER_MAX_BYTES } from '../../src/server/connection-limits.js';
import { startServer, type TestServer } from '../support/server.js';

const TOTAL = 4 * LINGER_MAX_BYTES;
let server: TestServer;

beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

/** Sends `method path` with a declared body of TOTAL bytes; pipelines a GET /healthz if all of it was taken. */
function send(port: number, method: string, path: string): Promise<{ statuses: string[]; cut: boolean }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    let closed = false;
    let sentAll = false;
    socket.on('data', (data: Buffer) => {
      received += data.toString('latin1');
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      closed = true;
      resolve({ statuses: [...received.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1] as string), cut: !sentAll });
    });
    socket.write(`${method} ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: ${TOTAL}\r\n\r\n`);
    const piece = Buffer.alloc(64 * 1024, 0x20);
    void (async () => {
      for (let sent = 0; sent < TOTAL; sent += piece.length) {
        if (closed || socket.destroyed) return;
        if (!socket.write(piece)) await new Promise((next) => socket.once('drain', next).once('close', next));
      }
      if (closed || socket.destroyed) return;
      sentAll = true;
      socket.write('GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n');
    })();
  });
}

describe('a body no route reads, of a method other than GET and HEAD', () => {
  for (const method of ['TRACE', 'PROPFIND', 'DELETE', 'OPTIONS']) {
    it(`${method}: declared past the body limit, 413 and the connection closes before the rest is taken`, async () => {
      const { port } = new URL(server.url);
      const outcome = await send(Number(port), method, '/healthz');
      expect(outcome).toEqual({ statuses: ['413'], cut: true });
    });
  }
});
