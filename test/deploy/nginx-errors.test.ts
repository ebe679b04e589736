/**
 * What deploy/nginx.conf refuses itself — a body over its 10 MB, a header
 * line or request line over its buffers — is answered as a replica answers
 * the same request: Runnel's JSON error (OpenAI's shape on /v1/ bodies), not
 * nginx's HTML page. A probe: behind nginx, an 11 MB body got
 * `<html>…413 Request Entity Too Large…nginx`, with no code to read.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/index.js';
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
