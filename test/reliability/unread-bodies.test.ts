/**
 * A body sent with a request no route reads (a GET's): Fastify parses none,
 * and Node read and dropped one of any size after the answer, keeping the
 * connection open for the next request (a probe: 200 MB with `GET /healthz`
 * in under a second). It is bounded as any refused body: one declared past
 * the body limit is answered 413 and the connection closes after at most
 * LINGER_MAX_BYTES more; a chunked one is cut past LINGER_MAX_BYTES. The
 * same for TRACE (Fastify's third bodyless method) and the methods Node
 * parses that no route has (PROPFIND, …: a review sent 64 MiB with
 * `TRACE /healthz`, read and dropped, the connection kept).
 * Each case counts answers and bytes taken, never a time.
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

interface Outcome {
  statuses: string[];
  /** Whether the server closed the connection before the client had sent the whole body. */
  cut: boolean;
}

/**
 * Sends `method path` with a body of TOTAL bytes (declared, or chunked) as fast as the server takes it; if the
 * server takes all of it, pipelines a `GET /healthz` behind it and reads until the server closes.
 */
function sendWithBody(port: number, path: string, options: { chunked?: boolean; method?: string } = {}): Promise<Outcome> {
  const { chunked = false, method = 'GET' } = options;
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
    const framing = chunked ? 'transfer-encoding: chunked' : `content-length: ${TOTAL}`;
    socket.write(`${method} ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n${framing}\r\n\r\n`);
    const piece = Buffer.alloc(64 * 1024, 0x20);
    const chunk = chunked ? Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]) : piece;
    void (async () => {
      for (let sent = 0; sent < TOTAL; sent += piece.length) {
        if (closed || socket.destroyed) return;
        if (!socket.write(chunk)) await new Promise((next) => socket.once('drain', next).once('close', next));
      }
      if (closed || socket.destroyed) return;
      sentAll = true;
      socket.write(`${chunked ? '0\r\n\r\n' : ''}GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n`);
    })();
  });
}

describe('a body no route reads', () => {
  it('declared past the body limit: 413, and the connection closes before the rest is taken', async () => {
    const { port } = new URL(server.url);
    for (const path of ['/healthz', '/echo/input_schema', '/nowhere']) {
      const outcome = await sendWithBody(Number(port), path);
      expect(outcome, path).toEqual({ statuses: ['413'], cut: true });
    }
  });

  it('chunked: the connection is cut past LINGER_MAX_BYTES', async () => {
    const { port } = new URL(server.url);
    const outcome = await sendWithBody(Number(port), '/healthz', { chunked: true });
    expect(outcome.cut).toBe(true);
    // The answer to the GET itself may go out before the body arrives; nothing pipelined behind it is answered.
    expect(outcome.statuses.length).toBeLessThanOrEqual(1);
  });

  // DELETE and OPTIONS go through the body parsers, which bound them: checked beside the others all the same.
  for (const method of ['TRACE', 'PROPFIND', 'DELETE', 'OPTIONS']) {
    it(`${method}: declared past the body limit, 413 and the connection closes before the rest is taken`, async () => {
      const { port } = new URL(server.url);
      expect(await sendWithBody(Number(port), '/healthz', { method })).toEqual({ statuses: ['413'], cut: true });
    });
  }
});
