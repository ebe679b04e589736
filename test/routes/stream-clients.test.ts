/**
 * `/stream` read by clients other than Node's: curl and Python's http.client
 * get every frame, in order, whether the frames of a tick go out together
 * (a fast chain's burst, one write) or one at a time (a model's tokens).
 */
import { execFile } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, defineChain, generator } from '../../src/index.js';

let app: Awaited<ReturnType<typeof buildApp>>;
let base = '';
beforeAll(async () => {
  app = await buildApp({
    chains: [
      // 300 chunks made in one tick: one write.
      defineChain({ path: '/burst', runnable: generator(async function* () { for (let i = 0; i < 300; i++) yield `c${i}`; }) }),
      // Chunks a timer apart, as a model's tokens come: one write each.
      defineChain({
        path: '/paced',
        runnable: generator(async function* () {
          for (let i = 0; i < 20; i++) {
            await new Promise((resolve) => setTimeout(resolve, 2));
            yield `t${i}`;
          }
        }),
      }),
    ] as never,
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});
afterAll(async () => app.close());

const run = (file: string, args: string[]): Promise<string> =>
  new Promise((resolve, reject) => execFile(file, args, { maxBuffer: 1 << 22, timeout: 60_000 }, (error, stdout) => (error ? reject(error) : resolve(stdout))));

const PYTHON = `
import http.client, sys
conn = http.client.HTTPConnection('127.0.0.1', int(sys.argv[1]))
conn.request('POST', sys.argv[2], body='{"input": null}', headers={'content-type': 'application/json'})
res = conn.getresponse()
sys.stdout.write(str(res.status) + '\\n' + res.getheader('content-type') + '\\n')
while True:
    chunk = res.read1(65536)
    if not chunk:
        break
    sys.stdout.write(chunk.decode())
`;

/** The data of the `data` frames, then the last event's name. */
function frames(body: string): { data: unknown[]; last: string | undefined } {
  const events = body.split('\r\n\r\n').filter((frame) => frame.startsWith('event: '));
  const data = events.filter((frame) => frame.startsWith('event: data\r\n')).map((frame) => JSON.parse(frame.split('\r\ndata: ')[1] as string));
  return { data, last: events.at(-1)?.split('\r\n')[0] };
}

describe('/stream read by curl and Python http.client', () => {
  for (const [path, expected] of [
    ['/burst/stream', Array.from({ length: 300 }, (_, i) => `c${i}`)],
    ['/paced/stream', Array.from({ length: 20 }, (_, i) => `t${i}`)],
  ] as const) {
    it(`curl: every frame of ${path}, in order, then end`, async () => {
      const body = await run('curl', ['-sS', '-N', '-H', 'content-type: application/json', '--data', '{"input":null}', `${base}${path}`]);
      expect(frames(body)).toEqual({ data: expected, last: 'event: end' });
    });

    it(`Python http.client: every frame of ${path}, in order, then end`, async () => {
      const port = base.split(':').pop() as string;
      const out = await run('python3', ['-c', PYTHON, port, path]);
      const [status, type, ...rest] = out.split('\n');
      expect(status).toBe('200');
      expect(type).toBe('text/event-stream; charset=utf-8');
      expect(frames(rest.join('\n'))).toEqual({ data: expected, last: 'event: end' });
    });
  }
});
