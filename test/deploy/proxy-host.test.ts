/**
 * The Host a client sent reaches the replica through deploy/nginx.conf as the client wrote it, port and all.
 * Runnel compares it with a browser's Origin: a POST without a JSON body (a run's cancel) from a page of its
 * own origin that sends no Sec-Fetch-Site is told apart from one from another site by `Origin`'s host being
 * the request's `Host`. nginx's `$host` drops the port, so behind compose (published on port 8000) every such
 * cancel from `http://localhost:8000` was refused 415, as if from another site; it was served directly.
 */
import { request } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/index.js';
import { startNginx, type Nginx } from '../support/nginx.js';
import { allChains } from '../support/server.js';

let app: FastifyInstance;
let direct = '';
let nginx: Nginx;

beforeAll(async () => {
  app = await buildApp({ chains: allChains });
  await app.listen({ port: 0, host: '127.0.0.1' });
  direct = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  nginx = await startNginx({ upstreams: [new URL(direct).host] });
}, 60_000);

afterAll(async () => {
  await nginx?.close();
  await app?.close();
});

/** One request with these headers and no others a browser would add (fetch adds `sec-fetch-mode`). */
function send(url: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.method ?? 'GET', headers: options.headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

async function submit(base: string): Promise<string> {
  const answer = await send(`${base}/joke/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { topic: 'cats' } }) });
  expect(answer.status).toBe(202);
  return (JSON.parse(answer.body) as { run_id: string }).run_id;
}

describe('behind nginx, the Host the client sent', () => {
  it.each([
    ['directly', () => direct],
    ['through nginx', () => nginx.url],
  ])("serves a cancel from a page of the server's own origin (Origin's host, port included, is Host) %s", async (_how, base) => {
    const runId = await submit(base());
    // A browser without Sec-Fetch-Site (older Safari) says only its Origin: the address the page was loaded from.
    const cancel = await send(`${base()}/joke/runs/${runId}/cancel`, { method: 'POST', headers: { origin: base() } });
    expect(cancel.status, cancel.body).toBe(200);
    expect(JSON.parse(cancel.body)).toMatchObject({ run_id: runId });
  });

  it('still refuses that cancel from a page on another port of the same host, through nginx', async () => {
    const runId = await submit(nginx.url);
    const other = new URL(nginx.url);
    other.port = String(Number(other.port) === 65535 ? 1 : Number(other.port) + 1);
    const cancel = await send(`${nginx.url}/joke/runs/${runId}/cancel`, { method: 'POST', headers: { origin: other.origin } });
    expect(cancel.status).toBe(415);
  });

  it('gives the replica a Host when an HTTP/1.0 client sent none (nginx speaks HTTP/1.1 to it, which needs one)', async () => {
    const { port } = new URL(nginx.url);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), '127.0.0.1', () => socket.write('GET /healthz HTTP/1.0\r\n\r\n'));
      let text = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (text += chunk));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
  });
});
