/**
 * Requests a probe sent that no route reads: answered in Runnel's error shape, each status with its own code
 * and every answer with its request id — and a valid request pipelined ahead of a malformed one keeps its own
 * answer.
 */
import { connect } from 'node:net';
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

  it('an expect other than 100-continue is a 417 in the error shape, and the connection closes', async () => {
    const body = JSON.stringify({ input: { name: 'ada' } });
    const answer = await raw(`POST /echo/invoke HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nexpect: bogus\r\nx-request-id: probe-rid-2\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    expect(answer).toMatch(/^HTTP\/1\.1 417 /);
    expect(answer).toMatch(/\r\nx-request-id: probe-rid-2\r\n/i);
    expect(answer).toMatch(/\r\nconnection: close\r\n/i);
    expect(bodyOf(answer)).toMatchObject({ code: 'RUNNEL_ERR_EXPECTATION_FAILED' });
    // One answer, not a second one for the body taken as a request.
    expect(answer.match(/HTTP\/1\.1 /g)).toHaveLength(1);
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
});
