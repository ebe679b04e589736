/**
 * Requests a probe sent that no route reads: answered in Runnel's error shape, each status with its own code
 * and every answer with its request id — and a valid request pipelined ahead of a malformed one keeps its own
 * answer.
 */
import type { ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from '../support/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => server.close());

/** Writes `bytes` on a new connection and reads everything the server sends until it closes. */
function raw(bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const { port } = new URL(server.url);
    const socket = connect(Number(port), '127.0.0.1', () => socket.write(bytes));
    let got = '';
    socket.on('data', (chunk: Buffer) => (got += chunk.toString('latin1')));
    socket.on('close', () => resolve(got));
    socket.on('error', reject);
  });
}

/** A connection to `url`, open: what it has read so far, and when it closes (its errors are the server closing it). */
async function opened(url: string): Promise<{ socket: Socket; got: () => string; closed: Promise<void> }> {
  const socket = connect(Number(new URL(url).port), '127.0.0.1');
  let text = '';
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  return { socket, got: () => text, closed };
}

const bodyOf = (answer: string): { code?: string } => JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { code?: string };

describe('odd requests', () => {
  // They were all RUNNEL_ERR_BODY_INVALID ("the request body is not JSON…") on GET requests with no body.
  it("a static file's own 4xx says what it is", async () => {
    const range = await fetch(`${server.url}/docs/static/swagger-ui.css`, { headers: { range: 'bytes=99999999-' } });
    expect(range.status).toBe(416);
    expect(await range.json()).toMatchObject({ code: 'RUNNEL_ERR_RANGE_NOT_SATISFIABLE' });
    const precondition = await fetch(`${server.url}/docs/static/swagger-ui.css`, { headers: { 'if-match': '"nope"' } });
    expect(precondition.status).toBe(412);
    expect(await precondition.json()).toMatchObject({ code: 'RUNNEL_ERR_PRECONDITION_FAILED' });
    // A path out of the folder, as a raw client may send it (fetch and curl would resolve the dots).
    const out = await raw('GET /docs/static/../x HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n');
    expect(out).toMatch(/^HTTP\/1\.1 403 /);
    expect(bodyOf(out)).toMatchObject({ code: 'RUNNEL_ERR_FORBIDDEN' });
  });

  it('every error answer carries the request id: unknown routes, other methods, broken URLs, missing assets', async () => {
    const headers = { 'x-request-id': 'probe-rid-1' };
    for (const [method, path] of [
      ['GET', '/nope'],
      ['GET', '/echo/invoke'],
      ['DELETE', '/echo/input_schema'],
      ['POST', '/echo/invoke/'],
      ['GET', '/chat/history/%zz'],
      ['GET', '/echo/playground/assets/x.css'],
      ['GET', '/v1/nope'],
      ['GET', '/v1/chat/completions'],
    ] as const) {
      const res = await fetch(`${server.url}${path}`, { method, headers });
      expect(res.status, `${method} ${path}`).toBeGreaterThanOrEqual(400);
      expect(res.headers.get('x-request-id'), `${method} ${path}`).toBe('probe-rid-1');
      const answer = (await res.json()) as { code?: string; error?: { code: string } };
      expect(answer.code ?? answer.error?.code, `${method} ${path}`).toMatch(/^RUNNEL_ERR_/);
    }
  });

  // Node's own 417 had an empty body. As Node does, the body is read and dropped and the connection goes on: a
  // review found that closing it left a request pipelined after it run with no answer, and a client still
  // sending its body with a broken pipe instead of the 417.
  it('an expect other than 100-continue is a 417 in the error shape; a request pipelined after it is answered', async () => {
    const body = JSON.stringify({ input: { name: 'ada' } });
    const refused = `POST /echo/invoke HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nexpect: bogus\r\nx-request-id: probe-rid-2\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
    const next = `POST /echo/invoke HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
    const answer = await raw(refused + next);
    expect([...answer.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => match[1])).toEqual(['417', '200']);
    const first = answer.slice(0, answer.indexOf('HTTP/1.1 200'));
    expect(first).toMatch(/\r\nx-request-id: probe-rid-2\r\n/i);
    expect(JSON.parse(first.slice(first.indexOf('\r\n\r\n') + 4))).toMatchObject({ code: 'RUNNEL_ERR_EXPECTATION_FAILED' });
    expect(answer).toContain('"output":"hello ada"');
  });

  it("on the OpenAI-compatible routes, the 417 is in OpenAI's error shape, as every other error there", async () => {
    const body = JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'hi' }] });
    const answer = await raw(`POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nexpect: bogus\r\nconnection: close\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    expect(answer).toMatch(/^HTTP\/1\.1 417 /);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({ error: { code: 'RUNNEL_ERR_EXPECTATION_FAILED', type: 'invalid_request_error' } });
  });

  it('a client that sends a large body along with a bad expect reads its 417 (no broken pipe)', async () => {
    const body = JSON.stringify({ input: { name: 'x'.repeat(4 * 1024 * 1024) } });
    const { port } = new URL(server.url);
    const socket = connect(Number(port), '127.0.0.1');
    let got = '';
    socket.on('data', (chunk: Buffer) => (got += chunk.toString('latin1')));
    const errors: string[] = [];
    socket.on('error', (error: NodeJS.ErrnoException) => void errors.push(error.code ?? error.message));
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write(`POST /echo/invoke HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nexpect: bogus\r\ncontent-length: ${body.length}\r\n\r\n`);
    // All of it sent (a broken pipe fails the write), then the answer read whole.
    await new Promise<void>((resolve) => socket.write(body, () => resolve()));
    const whole = () => {
      const head = got.indexOf('\r\n\r\n');
      const length = Number(/\r\ncontent-length: (\d+)/i.exec(got)?.[1]);
      return head >= 0 && got.length >= head + 4 + length;
    };
    while (!whole() && errors.length === 0 && !socket.destroyed) await new Promise((resolve) => setTimeout(resolve, 5));
    socket.destroy();
    expect(errors).toEqual([]);
    expect(got).toMatch(/^HTTP\/1\.1 417 /);
  });

  // A probe: CONNECT (a proxy's tunnel request) had its connection closed with no answer at all.
  it('CONNECT is a 405 in the error shape, and its connection closes', async () => {
    const answer = await raw('CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\nx-request-id: probe-connect\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 405 /);
    expect(answer).toMatch(/\r\nx-request-id: probe-connect\r\n/i);
    expect(bodyOf(answer)).toMatchObject({ code: 'RUNNEL_ERR_METHOD_NOT_ALLOWED' });
  });

  // A review: behind a request whose answer was still to come, the 405 went out first, read as that one's answer.
  it('never answers a CONNECT pipelined behind a request in that request\'s place', async () => {
    const body = JSON.stringify({ input: { name: 'ada' } });
    const answer = await raw(`POST /echo/invoke HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n`);
    const heads = [...answer.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => match[1]);
    expect(heads[0]).not.toBe('405');
  });

  // Fastify closed the connection after a body that did not parse, though it had arrived whole: a request
  // pipelined behind it was dropped unanswered.
  it('a body that is not JSON is a 422, and a request pipelined after it is answered on the same connection', async () => {
    const good = JSON.stringify({ input: { name: 'ada' } });
    const bad = '{"input": {"name": ';
    const request = (body: string, last = false) =>
      `POST /echo/invoke HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n${last ? 'connection: close\r\n' : ''}content-length: ${body.length}\r\n\r\n${body}`;
    const answer = await raw(request(bad) + request('') + request(good, true));
    expect([...answer.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => match[1])).toEqual(['422', '422', '200']);
    expect(answer).toContain('"output":"hello ada"');
  });

  // A probe: the 400 for the garbage went out at once, in the place of the first request's answer — which a
  // client reads as that answer — though the first request ran.
  it('a valid request pipelined ahead of a malformed one gets its own answer, then the malformed one its 400', async () => {
    const body = JSON.stringify({ input: { name: 'ada' } });
    const answer = await raw(`POST /echo/invoke HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}GARBAGE\r\n\r\n`);
    const heads = [...answer.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => match[1]);
    expect(heads).toEqual(['200', '400']);
    expect(answer).toContain('"output":"hello ada"');
    expect(answer.slice(answer.lastIndexOf('HTTP/1.1 400'))).toContain('RUNNEL_ERR_BAD_REQUEST');
  });

  // A review: garbage pipelined behind a /v1 request got its 400 in OpenAI's shape (the parser's last request was /v1's).
  it('answers garbage pipelined behind a /v1 request in Runnel\'s shape: the shape is the request\'s own', async () => {
    const answer = await raw('GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\nGARBAGE\r\n\r\n');
    expect([...answer.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => match[1])).toEqual(['200', '400']);
    expect(bodyOf(answer.slice(answer.lastIndexOf('HTTP/1.1 400')))).toMatchObject({ code: 'RUNNEL_ERR_BAD_REQUEST' });
  });

  // A review: with two requests ahead of the garbage, the 400 waited for the first answer only, then went out
  // in the second one's place.
  it('two requests pipelined ahead of a malformed one both get their answers, in order, then the 400', async () => {
    const slowBody = (count: number) => JSON.stringify({ input: { count } });
    const request = (count: number) => `POST /slow/invoke HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${slowBody(count).length}\r\n\r\n${slowBody(count)}`;
    const answer = await raw(`${request(3)}${request(6)}GARBAGE\r\n\r\n`);
    expect([...answer.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => match[1])).toEqual(['200', '200', '400']);
    expect(answer).toContain('"output":"t0 t1 t2 "');
    expect(answer).toContain('"output":"t0 t1 t2 t3 t4 t5 "');
  });

  // A review: every chunk that arrived after the garbage raised the client error again, and each added a pair of
  // listeners to the answer under way — without bound, for as long as a stream ran.
  it('bytes that keep coming after the garbage add nothing while the answer before it is written', async () => {
    const sockets: Socket[] = [];
    const onConnection = (socket: Socket) => void sockets.push(socket);
    server.app.server.on('connection', onConnection);
    const { port } = new URL(server.url);
    const socket = connect(Number(port), '127.0.0.1');
    socket.setNoDelay(true);
    let got = '';
    socket.on('data', (chunk: Buffer) => (got += chunk.toString('latin1')));
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    const body = JSON.stringify({ input: { count: 40 } });
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write(`POST /slow/stream HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}GARBAGE\r\n\r\n`);
    // The stream's first frame: the answer is under way.
    while (!got.includes('event: data')) await new Promise((resolve) => setTimeout(resolve, 5));
    const answer = (sockets.at(-1) as unknown as { _httpMessage?: ServerResponse | null })._httpMessage;
    const listeners = answer?.listenerCount('finish') ?? 0;
    expect(listeners).toBeGreaterThan(0);
    for (let i = 0; i < 30; i++) {
      socket.write('G');
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(answer?.listenerCount('finish')).toBe(listeners);
    await closed;
    server.app.server.off('connection', onConnection);
    expect(got).toContain('event: end');
    expect(got.slice(got.lastIndexOf('HTTP/1.1'))).toMatch(/^HTTP\/1\.1 400 /);
  });

  // A review: after a bad expect, Node's own drain of the refused body had no bound (2 GB in 4 s), and a body
  // timeout meanwhile sent a second answer.
  it('reads a refused body behind a bad expect up to the limit any refused body has, then closes', async () => {
    const { port } = new URL(server.url);
    const socket = connect(Number(port), '127.0.0.1');
    let got = '';
    socket.on('data', (chunk: Buffer) => (got += chunk.toString('latin1')));
    socket.on('error', () => undefined);
    let closed = false;
    socket.on('close', () => (closed = true));
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write('POST /echo/invoke HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nexpect: bogus\r\ncontent-length: 100000000000\r\n\r\n');
    const chunk = Buffer.alloc(1024 * 1024, 'x');
    let sent = 0;
    // Far past the 16 MiB limit unless the server closes first.
    while (!closed && sent < 128 * 1024 * 1024) {
      await new Promise<void>((resolve) => {
        if (socket.write(chunk)) resolve();
        else socket.once('drain', () => resolve());
        socket.once('close', () => resolve());
      });
      sent += chunk.length;
    }
    await new Promise<void>((resolve) => (closed ? resolve() : socket.once('close', () => resolve())));
    expect(sent).toBeLessThan(64 * 1024 * 1024);
    expect([...got.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => match[1])).toEqual(['417']);
  });
});

// A review: a request pipelined behind a slow one whose body then stalled past the body timeout was left to run
// once its late body came (its answer, then a stray 408): the timed-out request must not run.
describe('a pipelined request whose body times out', () => {
  let timed: TestServer;
  beforeAll(async () => {
    timed = await startServer({ bodyTimeoutMs: 300 });
  });
  afterAll(async () => timed.close());

  it('is not run when its body arrives late, and no 408 is read as the answer before it', async () => {
    const { socket, got, closed } = await opened(timed.url);
    const slowBody = JSON.stringify({ input: { count: 100 } });
    const lateBody = JSON.stringify({ input: { name: 'late' } });
    socket.write(`POST /slow/invoke HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${slowBody.length}\r\n\r\n${slowBody}`);
    socket.write(`POST /echo/invoke HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${lateBody.length}\r\n\r\n${lateBody.slice(0, 5)}`);
    // The rest of the body once the server has seen the timeout (its client-error event, heard after its own).
    await new Promise<void>((resolve) => timed.app.server.once('clientError', () => resolve()));
    socket.write(lateBody.slice(5));
    await closed;
    socket.destroy();
    expect(got()).not.toContain('hello late');
    // Dropped, not answered in /slow's place (or inside its answer).
    expect(got()).not.toContain('RUNNEL_ERR_BODY_TIMEOUT');
  });

  // A review: two refused requests pipelined on one connection, the first whole, the second's body stalled: the
  // first's end unmarked the connection, and the second got a 408 after its 417.
  it('gives each of two refused requests behind bad expects one answer', async () => {
    const { socket, got, closed } = await opened(timed.url);
    const head = (length: number) => `POST /echo/invoke HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nexpect: bogus\r\ncontent-length: ${length}\r\n\r\n`;
    socket.write(`${head(5)}hello${head(10)}abc`);
    await closed;
    expect([...got().matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => match[1])).toEqual(['417', '417']);
  });

  // A review: the 408 went out at once, into the chunked stream being written before it. The connection now
  // closes with nothing written: the stream before it is cut (a chunked body without its last chunk, which a
  // client tells from a whole one), never corrupted.
  it("writes no 408 into a stream written before it: the connection closes, the stream cut, not corrupted", async () => {
    const { socket, got, closed } = await opened(timed.url);
    const slowBody = JSON.stringify({ input: { count: 50 } });
    socket.write(`POST /slow/stream HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${slowBody.length}\r\n\r\n${slowBody}POST /echo/invoke HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 40\r\n\r\n{"inp`);
    await closed;
    expect(got()).toMatch(/^HTTP\/1\.1 200 /);
    expect(got().match(/HTTP\/1\.1 /g)).toHaveLength(1);
    expect(got()).not.toContain('RUNNEL_ERR_BODY_TIMEOUT');
  });
});

