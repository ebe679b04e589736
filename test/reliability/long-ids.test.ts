/**
 * Every id the API accepts is usable in every route that takes it: a
 * 128-character session id (the most `session_id` allows) through the
 * shipped /chat chain and its history routes, and config hashes of a few KB
 * in `/c/{config_hash}/` URLs. A URL past what the server takes gets its
 * own status and code, never a body error.
 */
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import LZString from 'lz-string';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawExchange } from '../helpers.js';
import { createChains } from '../../chains/index.js';
import { buildApp, connectServices } from '../../src/index.js';
import { startServer, type TestServer } from '../support/server.js';

let app: FastifyInstance;
let base: string;
let echoServer: TestServer;

beforeAll(async () => {
  const services = await connectServices({});
  app = await buildApp({ chains: createChains({ services, env: {}, offlineDelayMs: 0 }).chains, services });
  await app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  echoServer = await startServer();
});
afterAll(async () => {
  await app.close();
  await echoServer.close();
});

/** Letters and digits, which compress badly: the hash of a config holding them is about as long as they are. */
const noise = (length: number): string => randomBytes(length).toString('base64url').slice(0, length);
const hash = (config: unknown): string => LZString.compressToEncodedURIComponent(JSON.stringify(config));

const json = { 'content-type': 'application/json' };

describe('a 128-character session id', () => {
  it('is usable in /chat/invoke, in /chat/c/{hash}/invoke, and in GET and DELETE /chat/history/{session_id}', async () => {
    const sessionId = noise(128);
    const said = await fetch(`${base}/chat/invoke`, { method: 'POST', headers: json, body: JSON.stringify({ input: { message: 'My name is Grace.' }, config: { configurable: { session_id: sessionId } } }) });
    expect(said.status).toBe(200);
    // The playground's way: the same session in a config hash (over 100 characters here).
    const inHash = hash({ configurable: { session_id: sessionId } });
    expect(inHash.length).toBeGreaterThan(128);
    const again = await fetch(`${base}/chat/c/${inHash}/invoke`, { method: 'POST', headers: json, body: JSON.stringify({ input: { message: 'What is my name?' } }) });
    expect(again.status).toBe(200);
    expect(((await again.json()) as { output: string }).output).toContain('My name is Grace.');

    const history = await fetch(`${base}/chat/history/${sessionId}`);
    expect(history.status).toBe(200);
    const body = (await history.json()) as { session_id: string; messages: { type: string }[] };
    expect(body.session_id).toBe(sessionId);
    expect(body.messages.map((m) => m.type)).toEqual(['human', 'ai', 'human', 'ai']);

    expect((await fetch(`${base}/chat/history/${sessionId}`, { method: 'DELETE' })).status).toBe(204);
    expect(((await (await fetch(`${base}/chat/history/${sessionId}`)).json()) as { messages: unknown[] }).messages).toEqual([]);
  });

  it('one character more is refused alike by the chain and by the history routes (422), never as a body error', async () => {
    const sessionId = noise(129);
    const said = await fetch(`${base}/chat/invoke`, { method: 'POST', headers: json, body: JSON.stringify({ input: { message: 'hi' }, config: { configurable: { session_id: sessionId } } }) });
    expect(said.status).toBe(422);
    expect(await said.json()).toMatchObject({ code: 'RUNNEL_ERR_CONFIG_INVALID' });
    for (const method of ['GET', 'DELETE']) {
      const response = await fetch(`${base}/chat/history/${sessionId}`, { method });
      expect(response.status).toBe(422);
      expect(await response.json()).toMatchObject({ code: 'RUNNEL_ERR_CONFIG_INVALID' });
    }
  });
});

describe('a config hash of a few KB', () => {
  it('is usable in /c/{config_hash}/invoke, /stream and /config_schema', async () => {
    const metadata = { note: noise(4000) };
    const configHash = hash({ metadata, tags: ['long'] });
    expect(configHash.length).toBeGreaterThan(4000);
    const invoked = await fetch(`${echoServer.url}/echo/c/${configHash}/invoke`, { method: 'POST', headers: json, body: JSON.stringify({ input: { name: 'a' } }) });
    expect(invoked.status).toBe(200);
    expect(await invoked.json()).toMatchObject({ output: 'hello a' });
    const streamed = await fetch(`${echoServer.url}/echo/c/${configHash}/stream`, { method: 'POST', headers: json, body: JSON.stringify({ input: { name: 'b' } }) });
    expect(streamed.status).toBe(200);
    expect(await streamed.text()).toContain('hello b');
    expect((await fetch(`${echoServer.url}/echo/c/${configHash}/config_schema`)).status).toBe(200);
  });
});

describe('a URL longer than the server takes', () => {
  it('a path parameter past the router limit answers 414 RUNNEL_ERR_URI_TOO_LONG', async () => {
    // inject() is not bound by Node's header-size limit, so it reaches the router's own limit.
    const response = await echoServer.app.inject({ method: 'POST', url: `/echo/c/${'A'.repeat(70_000)}/invoke`, payload: { input: { name: 'a' } } });
    expect(response.statusCode).toBe(414);
    expect(response.json()).toMatchObject({ code: 'RUNNEL_ERR_URI_TOO_LONG' });
  });

  it('a request line past Node\'s header-size limit answers 431 RUNNEL_ERR_HEADERS_TOO_LARGE in JSON', async () => {
    const received = await rawExchange(new URL(echoServer.url).port, `GET /echo/c/${'A'.repeat(70_000)}/config_schema HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n`);
    const [head = '', body = ''] = received.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 431 /);
    expect(JSON.parse(body)).toMatchObject({ code: 'RUNNEL_ERR_HEADERS_TOO_LARGE' });
  });
});
