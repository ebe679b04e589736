/**
 * A probe: a client that never reads a JSON answer held its bytes in the server for as long as it liked —
 * 500 sockets asking `/openapi.json` (public, about 200 KB) held 100 MB of heap for the probe's 100 s, and
 * there is no bound on connections. Event streams cut such a client after RUNNEL_STREAM_STALL_MS; every
 * other answer is now cut after twice that.
 */
import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { expect, it } from 'vitest';
import { buildApp, defineChain, lambda } from '../../src/index.js';

it('cuts a connection whose client stopped reading its answer, and leaves a quiet one alone', async () => {
  let release!: () => void;
  const slow = new Promise<string>((resolve) => (release = () => resolve('done')));
  const chains = [
    defineChain({ path: '/slow', runnable: lambda(() => slow) }),
    // More than the socket buffers of both ends take (their kernel may give a loopback connection tens of MB).
    defineChain({ path: '/big', runnable: lambda(() => 'x'.repeat(96 * 1024 * 1024)) }),
  ];
  const app = await buildApp({ chains: chains as never, config: { streamStallMs: 200 } });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  const open = new Set<Socket>();
  app.server.on('connection', (socket) => {
    open.add(socket);
    socket.on('close', () => open.delete(socket));
  });
  try {
    // A quiet request whose answer takes longer than the stall (nothing waits to be sent): not cut.
    const quiet = fetch(`http://127.0.0.1:${port}/slow/invoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"input":null}' });
    // A raw client that asks for a 96 MB answer and never reads.
    const stalled = connect(port, '127.0.0.1');
    stalled.pause();
    stalled.on('error', () => undefined);
    stalled.write('POST /big/invoke HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 14\r\n\r\n{"input":null}');
    while (open.size < 2) await new Promise((resolve) => setTimeout(resolve, 20));
    const [quietSocket] = [...open].filter((socket) => socket.remotePort !== stalled.localPort);
    // The server's side of the stalled connection closes (a paused client may not notice).
    while ([...open].some((socket) => socket.remotePort === stalled.localPort)) await new Promise((resolve) => setTimeout(resolve, 20));
    stalled.destroy();
    expect(quietSocket?.destroyed).toBe(false);
    release();
    const answer = await quiet;
    expect([answer.status, ((await answer.json()) as { output: string }).output]).toEqual([200, 'done']);
  } finally {
    await app.close();
  }
});
