/**
 * What deploy/nginx.conf refuses itself — a body over its 10 MB, a header
 * line or request line over its buffers — is answered as a replica answers
 * the same request: Runnel's JSON error (OpenAI's shape on /v1/ bodies), not
 * nginx's HTML page. A probe: behind nginx, an 11 MB body got
 * `<html>…413 Request Entity Too Large…nginx`, with no code to read.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/index.js';
import { freePort } from '../helpers.js';
import { startNginx, type Nginx } from '../support/nginx.js';
import { allChains } from '../support/server.js';

let app: FastifyInstance;
let direct = '';
let nginx: Nginx;
const dir = mkdtempSync(join(tmpdir(), 'runnel-nginx-errors-'));

beforeAll(async () => {
  app = await buildApp({ chains: allChains });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const upstream = `127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  direct = `http://${upstream}`;
  nginx = await startNginx({ upstreams: [upstream] });
}, 60_000);

afterAll(async () => {
  await nginx?.close();
  await app?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Answer {
  status: number;
  contentType: string;
  body: string;
}

/** curl's view of one request: status, content type and body, and apart from them its `x-request-id` ('' without one). */
function curl(args: string[]): Promise<Answer & { requestId: string }> {
  return new Promise((resolve, reject) => {
    execFile('curl', ['-sS', '-o', '-', '-w', '\n%{http_code} %header{x-request-id} %{content_type}', ...args], { maxBuffer: 1 << 20 }, (error, stdout) => {
      if (error !== null) return reject(error);
      const split = stdout.lastIndexOf('\n');
      const [status = '', requestId = '', ...type] = stdout.slice(split + 1).split(' ');
      resolve({ status: Number(status), requestId, contentType: type.join(' '), body: stdout.slice(0, split) });
    });
  });
}

/** The answer without its request id, which differs from one request to the next. */
const answer = ({ requestId: _, ...rest }: Answer & { requestId: string }): Answer => rest;

/** nginx's `$request_id`: 32 hexadecimal digits, which the replica takes as the request's id (it makes UUIDs of its own). */
const NGINX_REQUEST_ID = /^[0-9a-f]{32}$/;

/** A JSON body of about `bytes` bytes. */
function bodyFile(name: string, bytes: number): string {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify({ input: { name: 'x'.repeat(bytes) } }));
  return path;
}

describe('behind nginx, what nginx refuses itself', () => {
  it.each(['/echo/invoke', '/v1/chat/completions'])('answers a body over its 10 MB as the replica answers one over its own limit (%s)', async (path) => {
    const post = (base: string, file: string) => curl(['-H', 'content-type: application/json', '--data-binary', `@${file}`, `${base}${path}`]);
    // Over the replica's 1 MiB and under nginx's 10 MB: the replica's own answer, through nginx.
    const replica = await post(nginx.url, bodyFile('two.json', 2 * 1024 * 1024));
    expect(replica.status).toBe(413);
    expect(replica.body).toContain('RUNNEL_ERR_BODY_TOO_LARGE');
    expect(replica.requestId).toMatch(NGINX_REQUEST_ID);
    const refused = await post(nginx.url, bodyFile('eleven.json', 11 * 1024 * 1024));
    expect(answer(refused)).toEqual({ status: 413, contentType: 'application/json; charset=utf-8', body: replica.body });
    // Every error answer carries x-request-id, nginx's own too (they had none): the id of nginx's log line.
    expect(refused.requestId).toMatch(NGINX_REQUEST_ID);
  });

  it.each([
    ['a header line', (base: string) => ['-H', `x-long: ${'a'.repeat(20_000)}`, `${base}/healthz`]],
    ['a request line', (base: string) => [`${base}/echo/${'a'.repeat(20_000)}`]],
  ])('answers %s over its buffers as the replica answers it: 431 in Runnel’s JSON', async (_what, args) => {
    const replica = await curl(args(direct));
    expect(replica.status).toBe(431);
    expect(replica.requestId).not.toBe('');
    const refused = await curl(args(nginx.url));
    expect(answer(refused)).toEqual({ status: 431, contentType: 'application/json; charset=utf-8', body: JSON.stringify(JSON.parse(replica.body)) });
    expect(refused.requestId).toMatch(NGINX_REQUEST_ID);
  });
});

/** What comes back for `text` written as is on a new connection to `url`'s port, split into status line and body. */
function raw(url: string, text: string): Promise<{ status: string; contentType: string; requestId: string; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(new URL(url).port), '127.0.0.1', () => socket.write(text));
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      answer += chunk;
      const end = answer.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: *(\d+)/i.exec(answer);
      if (end !== -1 && length !== null && answer.length >= end + 4 + Number(length[1])) socket.destroy();
    });
    socket.on('close', () => {
      const [head = '', body = ''] = answer.split('\r\n\r\n');
      const header = (name: string) => new RegExp(`\r\n${name}: *([^\r]*)`, 'i').exec(head)?.[1] ?? '';
      resolve({ status: head.split('\r\n')[0] ?? '', contentType: header('content-type'), requestId: header('x-request-id'), body });
    });
    socket.on('error', reject);
  });
}

describe('behind nginx, a request nginx cannot read', () => {
  // A chunk size that is not hexadecimal: a client's bug, which both refuse 400.
  const badChunk = (host: string) =>
    `POST /echo/invoke HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n`;

  it('answers a malformed chunked body as the replica answers it: 400 in Runnel’s JSON, with a request id', async () => {
    const replica = await raw(direct, badChunk('127.0.0.1'));
    expect(replica.status).toBe('HTTP/1.1 400 Bad Request');
    expect(JSON.parse(replica.body)).toMatchObject({ code: 'RUNNEL_ERR_BAD_REQUEST' });
    const refused = await raw(nginx.url, badChunk('127.0.0.1'));
    expect({ status: refused.status, contentType: refused.contentType, body: refused.body }).toEqual({
      status: 'HTTP/1.1 400 Bad Request',
      contentType: 'application/json; charset=utf-8',
      body: replica.body,
    });
    expect(refused.requestId).toMatch(NGINX_REQUEST_ID);
  });
});

/**
 * A replica that cannot be reached (stopped, restarting) or that dies mid-answer (`kill -9`, the OOM killer)
 * leaves nginx to answer itself: 502 (504 past `proxy_read_timeout`). A probe with two replicas behind
 * deploy/nginx.conf killed one under four `/invoke` calls: two got nginx's `<html>…502 Bad Gateway…` page, with
 * no code to read and no x-request-id.
 */
describe('behind nginx, a replica that does not answer', () => {
  let healthy: FastifyInstance;
  let dying: Server;
  let silent: Server;
  let front: Nginx;
  let timing: Nginx;

  beforeAll(async () => {
    healthy = await buildApp({ chains: allChains });
    await healthy.listen({ port: 0, host: '127.0.0.1' });
    const healthyUpstream = `127.0.0.1:${(healthy.server.address() as AddressInfo).port}`;
    // Takes the request, then drops the connection with no answer: a replica killed mid-request.
    dying = createServer((socket) => socket.once('data', () => socket.destroy()));
    // Takes the request and never answers.
    silent = createServer((socket) => socket.on('data', () => undefined));
    await Promise.all([dying, silent].map((server) => new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))));
    const dyingUpstream = `127.0.0.1:${(dying.address() as AddressInfo).port}`;
    const silentUpstream = `127.0.0.1:${(silent.address() as AddressInfo).port}`;
    // startNginx waits for /healthz through the proxy, so the healthy replica is in each upstream; the others are
    // reached with `location`s of their own, on the same server block and its error pages.
    const route = (conf: string, prefix: string, upstream: string, extra = ''): string =>
      conf.replace('    location / {', `    location ${prefix} {\n        proxy_pass http://${upstream};\n        proxy_http_version 1.1;${extra}\n    }\n\n    location / {`);
    const refusedUpstream = `127.0.0.1:${await freePort()}`;
    front = await startNginx({
      upstreams: [healthyUpstream],
      edit: (conf) => route(route(route(conf, '/dying/', dyingUpstream), '/v1/', dyingUpstream), '/refused/', refusedUpstream),
    });
    timing = await startNginx({
      upstreams: [healthyUpstream],
      edit: (conf) => route(conf, '/silent/', silentUpstream, '\n        proxy_read_timeout 1s;'),
    });
  }, 60_000);

  afterAll(async () => {
    await front?.close();
    await timing?.close();
    await healthy?.close();
    await Promise.all([dying, silent].map((server) => new Promise<void>((resolve) => (server?.listening ? server.close(() => resolve()) : resolve()))));
  });

  const post = (url: string) => curl(['-H', 'content-type: application/json', '--data', '{"input":{"topic":"cats"}}', url]);

  it.each([
    ['dies mid-request', '/dying/joke/invoke'],
    ['cannot be reached', '/refused/joke/invoke'],
  ])('answers in Runnel’s JSON when the replica %s, with a request id', async (_what, path) => {
    const answer = await post(`${front.url}${path}`);
    expect(answer.status).toBe(502);
    expect(answer.contentType).toBe('application/json; charset=utf-8');
    expect(JSON.parse(answer.body)).toEqual({ code: 'RUNNEL_ERR_REPLICA_UNAVAILABLE', message: expect.any(String), detail: expect.any(String) });
    expect(answer.requestId).toMatch(NGINX_REQUEST_ID);
  });

  it('answers in OpenAI’s shape under /v1/, which the openai SDKs read', async () => {
    const answer = await post(`${front.url}/v1/chat/completions`);
    expect(answer.status).toBe(502);
    expect(answer.contentType).toBe('application/json; charset=utf-8');
    expect(JSON.parse(answer.body)).toEqual({ error: { message: expect.any(String), type: 'server_error', param: null, code: 'RUNNEL_ERR_REPLICA_UNAVAILABLE' } });
  });

  it('answers a replica that outlasts proxy_read_timeout the same way', async () => {
    const answer = await post(`${timing.url}/silent/joke/invoke`);
    expect(answer.status).toBe(502);
    expect(JSON.parse(answer.body)).toMatchObject({ code: 'RUNNEL_ERR_REPLICA_UNAVAILABLE' });
    expect(answer.requestId).toMatch(NGINX_REQUEST_ID);
  });
});
