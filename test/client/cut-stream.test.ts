/**
 * A stream whose body ends cleanly before its `end` frame — a proxy, a load balancer or an HTTP/1.0 hop that
 * closed it — was taken by `RemoteRunnable` for the whole answer (a probe: `["Hel", "lo"]`, no error). LangServe's
 * streams end with `end`; without it the answer is cut, and the client says so.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RemoteRunnable } from '../../src/index.js';

let server: Server;
let url: string;

beforeAll(async () => {
  server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write('event: metadata\r\ndata: {"run_id":"r1"}\r\n\r\n');
      response.write('event: data\r\ndata: "Hel"\r\n\r\n');
      response.write('event: data\r\ndata: "lo"\r\n\r\n');
      if (request.url?.startsWith('/whole/')) response.write('event: end\r\n\r\n');
      response.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => new Promise<void>((resolve) => server.close(() => resolve())));

async function drain(iterable: AsyncIterable<unknown>): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const item of iterable) out.push(item);
  return out;
}

describe('RemoteRunnable and a stream cut before its end frame', () => {
  it('gives the chunks of a whole stream', async () => {
    expect(await drain(await new RemoteRunnable({ url: `${url}/whole` }).stream('x'))).toEqual(['Hel', 'lo']);
  });

  it('fails a stream, an event stream and a log stream that end without it', async () => {
    const cut = new RemoteRunnable({ url: `${url}/cut` });
    for (const open of [() => cut.stream('x'), async () => cut.streamEvents('x'), async () => cut.streamLog('x')]) {
      await expect(drain(await open())).rejects.toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_UNAVAILABLE', message: expect.stringContaining('before its end') });
    }
  });
});
