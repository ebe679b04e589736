import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { observed, post, startServer, text, type TestServer } from '../support/server.js';
import { settleWithin } from '../helpers.js';

let server: TestServer;
beforeAll(async () => {
  server = await startServer({ maxStreams: 3, pingMs: 100 });
});
afterAll(async () => server.close());

/** The frames of an SSE body: [event, data] pairs (data parsed), comments as ['comment', text]. */
function frames(body: string): [string, unknown][] {
  return body
    .split('\r\n\r\n')
    .filter((frame) => frame !== '')
    .map((frame) => {
      if (frame.startsWith(':')) return ['comment', frame.slice(1).trim()];
      const event = /^event: (.*)$/m.exec(frame)?.[1] as string;
      const data = /^data: (.*)$/m.exec(frame)?.[1];
      return [event, data === undefined ? undefined : JSON.parse(data)];
    });
}

/** Opens a stream and reads until `until` returns true; the socket is then destroyed (a client going away). */
function readThenLeave(path: string, body: unknown, until: (received: string) => boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let received = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        received += chunk;
        if (until(received)) {
          req.destroy();
          resolve(received);
        }
      });
    });
    req.on('error', (error) => (error.message.includes('socket hang up') ? undefined : reject(error)));
    req.end(JSON.stringify(body));
  });
}

describe('/stream', () => {
  it('sends the headers and frames of PROTOCOL.md, byte for byte', async () => {
    const res = await post(`${server.url}/echo/stream`, { input: { name: 'Ada' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(res.headers.get('x-accel-buffering')).toBe('no');
    const body = await text(res);
    expect(body).toMatch(/^event: metadata\r\ndata: \{"run_id":"[0-9a-f-]{36}"\}\r\n\r\nevent: data\r\ndata: "hello Ada"\r\n\r\nevent: end\r\n\r\n$/);
  });

  it('keeps the connection alive by default, and closes it after the stream when the client asked to close', async () => {
    expect((await post(`${server.url}/echo/stream`, { input: { name: 'Ada' } })).headers.get('connection')).toBe('keep-alive');
    const body = JSON.stringify({ input: { name: 'Ada' } });
    const { port } = new URL(server.url);
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port: Number(port) }, () =>
        socket.write(`POST /echo/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`),
      );
      let received = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (received += chunk));
      socket.on('error', reject);
      // Resolves only when the server closes the socket.
      socket.on('close', () => resolve(received));
    });
    expect(raw).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(raw.toLowerCase()).toContain('\r\nconnection: close\r\n');
    expect(raw).toContain('event: end\r\n\r\n');
  });

  it('streams model tokens as separate data frames', async () => {
    const body = await text(await post(`${server.url}/joke/stream`, { input: { topic: 'cats' } }));
    const data = frames(body).filter(([event]) => event === 'data').map(([, d]) => d);
    expect(data.join('')).toBe('Why did the cat sit on the computer?');
    expect(data.length).toBeGreaterThan(5);
  });

  it('decides everything it can before the stream starts: a JSON 4xx', async () => {
    const res = await post(`${server.url}/echo/stream`, { input: { name: 3 } });
    expect(res.status).toBe(422);
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
    expect(((await res.json()) as { code: string }).code).toBe('RUNNEL_ERR_INPUT_INVALID');
  });

  it('ends a failure after the start with one error frame and a clean end, leaking nothing', async () => {
    const body = await text(await post(`${server.url}/failing/stream`, { input: { when: 'after' } }));
    expect(frames(body)).toEqual([
      ['metadata', expect.objectContaining({ run_id: expect.any(String) })],
      ['data', 'partial'],
      ['error', { status_code: 500, message: 'Internal Server Error', code: 'RUNNEL_ERR_INTERNAL' }],
    ]);
    expect(body).not.toContain('sk-canary');
    const typed = frames(await text(await post(`${server.url}/failing/stream`, { input: { when: 'typed' } })));
    expect(typed).toEqual([['error', { status_code: 429, message: 'provider rate-limited the request (429)', code: 'RUNNEL_ERR_PROVIDER_RATE_LIMITED' }]]);
  });

  it('aborts the run when the client disconnects, and frees its slot', async () => {
    const before = observed.aborted;
    await readThenLeave('/slow/stream', { input: {} }, (received) => received.includes('t1 '));
    await settleWithin(
      (async () => {
        while (observed.aborted === before || server.app.runnel.streams.size > 0) await new Promise((r) => setTimeout(r, 10));
      })(),
      2000,
    );
    const metrics = await server.app.runnel.metrics.render();
    expect(metrics).toMatch(/^runnel_open_streams 0$/m);
    expect(metrics).toMatch(/runnel_requests_total\{chain="\/slow",endpoint="stream",status="499"\} 1/);
  });

  it('sends a comment ping while a stream is quiet', async () => {
    const received = await readThenLeave('/slow/stream', { input: { count: 1000 } }, (r) => r.includes(': ping'));
    expect(received).toContain(': ping\r\n\r\n');
  });

  it('answers a fast 503 with retry-after when every stream slot is taken', async () => {
    const open = [1, 2, 3].map(() => readThenLeave('/slow/stream', { input: {} }, (r) => r.includes('t2 ')));
    await new Promise((r) => setTimeout(r, 30));
    const refused = await post(`${server.url}/slow/stream`, { input: {} });
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(((await refused.json()) as { code: string }).code).toBe('RUNNEL_ERR_OVERLOADED');
    await Promise.all(open);
    while (server.app.runnel.streams.size > 0) await new Promise((r) => setTimeout(r, 10));
  });
});

describe('/stream_log and /stream_events', () => {
  it('streams v2 events with the root named after the path and no internal metadata', async () => {
    const body = await text(await post(`${server.url}/joke/stream_events`, { input: { topic: 'cats' }, config: { metadata: { __secret: 1 } } }));
    const events = frames(body).filter(([e]) => e === 'data').map(([, d]) => d as { event: string; name: string; parent_ids: string[]; metadata: object });
    expect(events[0]).toMatchObject({ event: 'on_chain_start', name: '/joke', parent_ids: [] });
    expect(events.map((e) => e.event)).toContain('on_chat_model_stream');
    expect(events.at(-1)).toMatchObject({ event: 'on_chain_end', name: '/joke' });
    expect(body).not.toContain('__');
    expect(frames(body).at(-1)).toEqual(['end', undefined]);
  });

  it('applies include/exclude filters, and refuses bad ones before streaming', async () => {
    const body = await text(await post(`${server.url}/joke/stream_events`, { input: { topic: 'cats' }, include_types: ['parser'] }));
    const names = new Set(frames(body).filter(([e]) => e === 'data').map(([, d]) => (d as { name: string }).name));
    // Named as LangChain's string parser is, for LangServe clients that filter by it.
    expect(names).toEqual(new Set(['StrOutputParser']));
    const bad = await post(`${server.url}/joke/stream_events`, { input: { topic: 'cats' }, include_names: [[]] });
    expect(bad.status).toBe(422);
    expect(((await bad.json()) as { detail: { loc: unknown }[] }).detail[0]?.loc).toEqual(['include_names', 0]);
  });

  it('streams the run log as JSON Patch, first replacing the root', async () => {
    const body = await text(await post(`${server.url}/joke/stream_log`, { input: { topic: 'cats' } }));
    const patches = frames(body).filter(([e]) => e === 'data').map(([, d]) => d as { ops: { op: string; path: string; value: Record<string, unknown> }[] });
    expect(patches[0]?.ops[0]).toMatchObject({ op: 'replace', path: '', value: { name: '/joke', type: 'chain', streamed_output: [], final_output: null, logs: {} } });
    expect(patches.flatMap((p) => p.ops).some((op) => op.path === '/logs/FakeListChatModel')).toBe(true);
    expect(patches.at(-1)?.ops.some((op) => op.path === '/final_output' || op.path.endsWith('/end_time'))).toBe(true);
  });
});

/** Reads a whole answer (a POST of `body`, else a GET), each chunk also pushed to `chunks` as it comes. */
function readAll(url: string, chunks: string[], body?: string): Promise<string> {
  return new Promise<string>((resolve) => {
    const options = body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' } };
    httpRequest(url, options, (res) => {
      let received = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        received += chunk;
        chunks.push(chunk);
      });
      res.on('end', () => resolve(received));
    }).end(body);
  });
}

describe('graceful shutdown', () => {
  it('turns readiness off, lets invokes finish, gives open streams a final frame', async () => {
    const own = await startServer({ shutdownGraceMs: 100 });
    const frames: string[] = [];
    const streaming = readAll(`${own.url}/slow/stream`, frames, JSON.stringify({ input: {} }));
    while (frames.length < 2) await new Promise((r) => setTimeout(r, 10));
    const closing = own.app.shutdown();
    expect((await own.app.inject('/readyz')).statusCode).toBe(503);
    const received = await settleWithin(streaming, 5000);
    expect(received).toMatch(/event: error\r\ndata: \{"status_code":503,"message":"The server is shutting down","code":"RUNNEL_ERR_SHUTTING_DOWN"\}\r\n\r\n$/);
    await settleWithin(closing, 5000);
  });

  it('closes readers of runs’ logs at once (their clients rejoin elsewhere), while the runs under way get the grace', async () => {
    const own = await startServer({ shutdownGraceMs: 60_000 });
    const run = (await (await post(`${own.url}/slow/runs`, { input: { count: 150 } })).json()) as { run_id: string };
    const frames: string[] = [];
    const reading = readAll(`${own.url}/slow/runs/${run.run_id}/stream`, frames);
    while (!frames.join('').includes('event: data')) await new Promise((r) => setTimeout(r, 10));
    const closing = own.app.shutdown();
    const received = await reading;
    // Closed while its run was still under way (before, it was held open until the run ended or the grace was over).
    const record = (await own.app.inject(`/slow/runs/${run.run_id}`)).json() as { status: string };
    expect(record.status).toBe('running');
    expect(received).not.toMatch(/event: (end|error)/);
    // A join that starts while the server stops gets what the log holds and is closed (it was held for the grace).
    const late = await (await fetch(`${own.url}/slow/runs/${run.run_id}/stream`)).text();
    expect(late).toContain('event: data');
    expect(late).not.toMatch(/event: (end|error)/);
    expect(((await own.app.inject(`/slow/runs/${run.run_id}`)).json() as { status: string }).status).toBe('running');
    await closing;
    expect(((await own.app.runnel.runQueue().store.get(run.run_id)) as { status: string }).status).toBe('success');
  }, 60_000);
});

describe('streams in /metrics', () => {
  it('counts a stream that ends once, and a stream refused before it starts once', async () => {
    const count = async (status: string): Promise<number> =>
      Number(new RegExp(`runnel_requests_total\\{chain="/joke",endpoint="stream_events",status="${status}"\\} (\\d+)`).exec(await server.app.runnel.metrics.render())?.[1] ?? 0);
    const [ok, invalid] = [await count('200'), await count('422')];
    expect(await text(await post(`${server.url}/joke/stream_events`, { input: { topic: 'metrics' } }))).toContain('event: end');
    expect((await post(`${server.url}/joke/stream_events`, { input: { topic: 'metrics' }, include_names: 'not a list' })).status).toBe(422);
    expect(await count('200')).toBe(ok + 1);
    expect(await count('422')).toBe(invalid + 1);
  });
});
