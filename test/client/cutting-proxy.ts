/**
 * A TCP proxy on 127.0.0.1 that drops one connection mid-response, for real:
 * it forwards bytes both ways, and on the first connection whose response
 * bytes contain `marker` for the `nth` time it sends the client the bytes up
 * to the middle of that marker, closes the client's socket and destroys the
 * server side. Once; afterwards it forwards normally.
 *
 * With `hold`, it sends those bytes and keeps the connection open until
 * `release()` ends it: a browser that reads many frames and the end of the
 * connection in one read may drop them all (Chromium did, under load), while
 * a test means to cut after the client has heard some frames.
 */
import { createServer, connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface CuttingProxy {
  url: string;
  /** Connections cut so far (0 or 1). */
  readonly cuts: number;
  /** Every byte clients sent through the proxy (request lines and headers), as latin1 text. */
  readonly sent: string;
  /** With `hold`: ends the held connection (the cut). */
  release(): void;
  close(): Promise<void>;
}

function nthIndex(text: string, marker: string, nth: number): number {
  let at = -1;
  for (let i = 0; i < nth; i++) {
    at = text.indexOf(marker, at + 1);
    if (at === -1) return -1;
  }
  return at;
}

export async function cuttingProxy(targetPort: number, cut: { marker: string; nth: number; hold?: boolean }): Promise<CuttingProxy> {
  const sockets = new Set<Socket>();
  let cuts = 0;
  let sent = '';
  let held: Socket | undefined;
  const server = createServer((client) => {
    const upstream = connect(targetPort, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => socket.destroy());
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => {
      if (held !== client) client.end();
    });
    client.on('data', (chunk: Buffer) => {
      sent += chunk.toString('latin1');
      upstream.write(chunk);
    });
    let seen = '';
    upstream.on('data', (chunk: Buffer) => {
      if (cuts === 0) {
        const before = seen.length;
        seen += chunk.toString('latin1');
        const at = nthIndex(seen, cut.marker, cut.nth);
        if (at !== -1) {
          cuts += 1;
          const upToCut = chunk.subarray(0, Math.max(0, at + Math.floor(cut.marker.length / 2) - before));
          upstream.destroy();
          if (cut.hold === true) {
            client.write(upToCut);
            held = client;
            return;
          }
          // end, not destroy: the client receives every byte up to the cut, then the connection is gone.
          client.end(upToCut);
          return;
        }
      }
      client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get cuts() {
      return cuts;
    },
    get sent() {
      return sent;
    },
    release: () => held?.end(),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
