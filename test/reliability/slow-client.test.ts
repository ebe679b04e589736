/**
 * A client that reads nothing: the server keeps at most about one socket
 * buffer of the stream in memory (the run waits for the client), stays under
 * 1 MiB, and cuts the stream after the configured stall. A client that reads
 * slowly but never stops is served whole, however long a large answer takes.
 */
import { execFile } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { buildApp, defineChain, generator, lambda } from '../../src/index.js';

/**
 * Python's socket with an 8 KB receive buffer (Node's net cannot set one), reading 16 KB at a time with a
 * 2 ms pause: it never stops reading, but it takes a 32 MB answer at 8 MB/s at most (some 2 MB/s measured)
 * — many seconds, longer than the stall. Prints what it read: how many bytes, and the tail.
 */
const STEADY_READER = `
import socket, sys, time, json
port, path = int(sys.argv[1]), sys.argv[2]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
s.connect(('127.0.0.1', port))
body = b'{"input": null}'
s.sendall(b'POST ' + path.encode() + b' HTTP/1.1\\r\\nhost: 127.0.0.1\\r\\ncontent-type: application/json\\r\\nconnection: close\\r\\ncontent-length: 15\\r\\n\\r\\n' + body)
total, tail = 0, b''
while True:
    try:
        data = s.recv(16384)
    except ConnectionResetError:
        break
    if not data:
        break
    total += len(data)
    tail = (tail + data)[-64:]
    time.sleep(0.002)
print(json.dumps({'total': total, 'tail': tail.decode('latin-1')}))
`;

function readSteadily(port: number, path: string): Promise<{ total: number; tail: string }> {
  return new Promise((resolve, reject) => {
    execFile('python3', ['-c', STEADY_READER, String(port), path], { timeout: 120_000 }, (error, stdout, stderr) => {
      if (error !== null) reject(new Error(`${error.message} ${stderr}`));
      else resolve(JSON.parse(stdout) as { total: number; tail: string });
    });
  });
}

describe('a client that reads nothing', () => {
  it('bounds the server-side buffer and cuts the stream after RUNNEL_STREAM_STALL_MS', async () => {
    let produced = 0;
    const chunk = 'x'.repeat(64 * 1024);
    const app = await buildApp({
      chains: [
        defineChain({
          path: '/flood',
          runnable: generator(async function* () {
            // 64 KiB chunks, as fast as the stream takes them: 64 MiB if nothing held it back.
            for (let i = 0; i < 1024; i++) {
              produced++;
              yield chunk;
            }
          }),
        }),
      ] as never,
      config: { streamStallMs: 1500 },
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    let maxBuffered = 0;
    const sampler = setInterval(() => {
      for (const connection of openSockets) maxBuffered = Math.max(maxBuffered, connection.writableLength);
    }, 5);
    const openSockets = new Set<Socket>();
    let streamsSeen = 0;
    app.server.on('connection', (socket) => {
      streamsSeen++;
      openSockets.add(socket);
      socket.on('close', () => openSockets.delete(socket));
    });
    // A raw client: sends the request, then never reads (its receive window fills and stays full).
    const client = connect(port, '127.0.0.1');
    client.pause();
    const body = JSON.stringify({ input: null });
    client.write(`POST /flood/stream HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    client.on('error', () => {});
    // The server's side of the connection closes when the stall timer cuts the stream (a paused client may not notice).
    await new Promise<void>((resolve) => {
      const poll = setInterval(() => {
        if (streamsSeen > 0 && openSockets.size === 0) {
          clearInterval(poll);
          resolve();
        }
      }, 20);
    });
    client.destroy();
    clearInterval(sampler);
    const metrics = (await app.inject('/metrics')).body;
    await app.close();
    expect(produced).toBeLessThan(1024);
    expect(maxBuffered).toBeLessThan(1024 * 1024);
    expect(/^runnel_open_streams (\d+)$/m.exec(metrics)?.[1]).toBe('0');
    console.log(`client never read: ${produced} of 1024 chunks produced, server buffer peaked at ${(maxBuffered / 1024).toFixed(0)} KiB`);
  }, 30_000);

  // A probe: while a client read nothing, every ping met the full socket and added a drain and a close
  // listener and a stall timer of its own (Node warned past ten).
  it('waits for a full socket once, whatever pings come meanwhile', async () => {
    const app = await buildApp({
      chains: [defineChain({ path: '/flood', runnable: generator(async function* () {
        for (let i = 0; i < 1024; i++) yield 'y'.repeat(64 * 1024);
      }) })] as never,
      config: { streamStallMs: 1000, pingMs: 10 },
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    let most = 0;
    let answered = false;
    app.server.on('request', (_request, response) => {
      answered = true;
      const sample = setInterval(() => (most = Math.max(most, response.listenerCount('drain'))), 5);
      response.on('close', () => clearInterval(sample));
    });
    const client = connect(port, '127.0.0.1');
    client.pause();
    client.on('error', () => {});
    const body = JSON.stringify({ input: null });
    client.write(`POST /flood/stream HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    // Until the stall cuts it: the server's side closes.
    await new Promise<void>((resolve) => {
      const poll = setInterval(() => {
        if (answered && app.runnel.streams.size === 0) {
          clearInterval(poll);
          resolve();
        }
      }, 20);
    });
    client.destroy();
    await app.close();
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(2);
  }, 30_000);
});

describe('a client that reads slowly', () => {
  // A probe: the stall timer waited for a whole write to drain, so a client reading all the time, but slower
  // than a large frame (or JSON answer) takes within the stall, was cut mid-answer as if it read nothing.
  it('does not cut a client that keeps reading, however long a large answer takes it', async () => {
    const big = 'x'.repeat(32 * 1024 * 1024);
    const app = await buildApp({
      chains: [
        defineChain({ path: '/frame', runnable: generator(async function* () { yield big; }) }),
        defineChain({ path: '/answer', runnable: lambda(() => big) }),
      ] as never,
      // The process sees the client's progress when the kernel takes another part of the write (about a third
      // of its send buffer, some 1.4 MB): every fraction of a second at this reader's pace, well within 3 s (a
      // loaded machine would have to slow the reader below 0.5 MB/s for the whole stall). The whole answer, at
      // 8 MB/s at most, takes longer than that: a stall counted from the write would cut it.
      config: { streamStallMs: 3000 },
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    try {
      const [stream, answer] = await Promise.all([readSteadily(port, '/frame/stream'), readSteadily(port, '/answer/invoke')]);
      expect(stream.tail).toMatch(/event: end\r\n\r\n(\r\n)?0\r\n\r\n$/);
      expect(stream.total).toBeGreaterThan(big.length);
      expect(answer.tail).toMatch(/"feedback_tokens":\[\]\}\}$/);
      expect(answer.total).toBeGreaterThan(big.length);
    } finally {
      await app.close();
    }
  }, 120_000);
});

