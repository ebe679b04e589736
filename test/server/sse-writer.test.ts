/**
 * The SSE writer's batching, seen from a real client over a real socket:
 * frames ready in the same tick go out in one write, a frame made later goes
 * out without waiting for another, and the headers reach the client before a
 * slow first frame.
 */
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FLUSH_BYTES, SseWriter } from '../../src/server/sse.js';
import { deferred, settleWithin } from '../helpers.js';

let server: Server | undefined;
afterEach(async () => {
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  server = undefined;
});

/** A server whose one handler gets an open SseWriter and counts the writes that reach its response. */
async function serve(handler: (sse: SseWriter, writes: () => number) => Promise<void>, pingMs = 60_000): Promise<string> {
  server = createServer((_req: IncomingMessage, res: ServerResponse) => {
    let writes = 0;
    const write = res.write.bind(res);
    const end = res.end.bind(res);
    res.write = ((...args: Parameters<typeof write>) => {
      writes++;
      return write(...args);
    }) as typeof res.write;
    res.end = ((...args: Parameters<typeof end>) => {
      if (typeof args[0] === 'string') writes++;
      return end(...args);
    }) as typeof res.end;
    const sse = new SseWriter(res, { pingMs });
    sse.open();
    void handler(sse, () => writes);
  });
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

/** Opens the stream; resolves with the response once its headers arrive, and collects the body. */
function open(url: string): Promise<{ res: IncomingMessage; body: Promise<string>; received: () => string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST' }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      const body = new Promise<string>((done) => res.on('end', () => done(text)));
      resolve({ res, body, received: () => text });
    });
    req.on('error', reject);
    req.end();
  });
}

describe('SseWriter', () => {
  it('writes the frames of one tick in one write, and ends with the rest in one more', async () => {
    const counted = deferred<number>();
    const url = await serve(async (sse, writes) => {
      for (let i = 0; i < 200; i++) expect(sse.send('data', `c${i}`)).toBe(true);
      await new Promise((resolve) => setImmediate(resolve));
      sse.send('end');
      sse.end();
      counted.resolve(writes());
    });
    const { body } = await open(url);
    const text = await settleWithin(body, 5000);
    expect(text.split('event: data\r\n').length - 1).toBe(200);
    expect(text).toContain('data: "c0"\r\n\r\nevent: data\r\ndata: "c1"');
    expect(text.endsWith('event: end\r\n\r\n')).toBe(true);
    // One write for the 200 frames (with the headers), one for the end: 200 and 1 before batching.
    expect(await counted.promise).toBe(2);
  });

  it('held, keeps what is sent (and what waited for the tick) for its end: one write', async () => {
    const counted = deferred<number>();
    const url = await serve(async (sse, writes) => {
      await new Promise((resolve) => setImmediate(resolve));
      const before = writes();
      sse.send('data', 'a');
      sse.hold();
      // Several ticks pass, as while a durable run's end is written: nothing goes out meanwhile.
      for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
      sse.send('data', 'b');
      await new Promise((resolve) => setImmediate(resolve));
      expect(writes()).toBe(before);
      sse.send('end');
      sse.end();
      counted.resolve(writes() - before);
    });
    const { body } = await open(url);
    expect(await settleWithin(body, 5000)).toBe('event: data\r\ndata: "a"\r\n\r\nevent: data\r\ndata: "b"\r\n\r\nevent: end\r\n\r\n');
    expect(await counted.promise).toBe(1);
  });

  it('held, sends what it kept at the next ping: a stream kept back stays alive', async () => {
    const clientSaw = deferred<void>();
    const url = await serve(async (sse) => {
      sse.hold();
      sse.send('data', 'kept');
      await clientSaw.promise;
      sse.end();
    }, 20);
    const { received, body } = await open(url);
    while (!received().includes(': ping')) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(received()).toContain('data: "kept"');
    clientSaw.resolve();
    await settleWithin(body, 5000);
  });

  it('held, still writes once the kept frames reach FLUSH_BYTES (it never buffers without bound)', async () => {
    const url = await serve(async (sse, writes) => {
      await new Promise((resolve) => setImmediate(resolve));
      sse.hold();
      const before = writes();
      const big = 'x'.repeat(1024);
      for (let i = 0; i < 20; i++) sse.send('data', big);
      expect(writes()).toBeGreaterThan(before);
      sse.end();
    });
    const { body } = await open(url);
    expect((await settleWithin(body, 5000)).split('event: data').length - 1).toBe(20);
    expect(FLUSH_BYTES).toBeLessThan(20 * 1024);
  });

  it('sends a frame made in a later tick without waiting for more, and the headers before a slow first frame', async () => {
    const clientSawFirst = deferred<void>();
    const clientSawHeaders = deferred<void>();
    const url = await serve(async (sse) => {
      await clientSawHeaders.promise;
      sse.send('data', 'first');
      // Nothing else is sent until the client has read the first frame: it must not sit in a buffer.
      await clientSawFirst.promise;
      sse.send('data', 'second');
      sse.end();
    });
    const { res, body, received } = await open(url);
    expect(res.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    clientSawHeaders.resolve();
    await settleWithin(
      (async () => {
        while (!received().includes('"first"')) await new Promise((resolve) => setTimeout(resolve, 5));
      })(),
      5000,
    );
    clientSawFirst.resolve();
    expect(await settleWithin(body, 5000)).toBe('event: data\r\ndata: "first"\r\n\r\nevent: data\r\ndata: "second"\r\n\r\n');
  });

  it('writes at once when a tick makes more than a batch, and keeps the order', async () => {
    const url = await serve(async (sse, writes) => {
      const big = 'x'.repeat(1024);
      const frames = Math.ceil((3 * FLUSH_BYTES) / big.length);
      for (let i = 0; i < frames; i++) {
        const sent = sse.send('data', `${i}:${big}`);
        if (sent !== true) await sent;
      }
      // Three batches' worth went out while the tick was still making frames.
      expect(writes()).toBeGreaterThanOrEqual(2);
      sse.end();
    });
    const { body } = await open(url);
    const text = await settleWithin(body, 5000);
    const order = [...text.matchAll(/data: "(\d+):/g)].map((m) => Number(m[1]));
    expect(order).toEqual(order.map((_, i) => i));
    expect(order.length).toBe(Math.ceil((3 * FLUSH_BYTES) / 1024));
  });

  it('drops what is pending once the client is gone', async () => {
    const result = deferred<unknown>();
    const url = await serve(async (sse) => {
      sse.send('data', 'a');
      // The client destroys its socket: once the server has seen it, nothing is written, and send says so.
      while (!sse.closed) await new Promise((resolve) => setTimeout(resolve, 5));
      result.resolve(sse.send('data', 'b'));
      sse.end();
    });
    const { res } = await open(url);
    res.destroy();
    expect(await settleWithin(result.promise, 5000)).toBe(false);
  });
});
