/**
 * Callers' addresses behind deploy/nginx.conf: with RUNNEL_TRUST_PROXY naming
 * nginx's address, each client is its own rate-limit bucket — not all of
 * them nginx's one — and an X-Forwarded-For a client writes itself buys it
 * neither a new bucket nor someone else's. Two loopback addresses stand for
 * two clients; nginx reaches the server from a third (`proxy_bind`), so the
 * trusted address is nginx's alone.
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, loadServerConfig } from '../../src/index.js';
import { requestFrom } from '../support/from-address.js';
import { startNginx, type Nginx } from '../support/nginx.js';
import { allChains } from '../support/server.js';

const A = '127.0.0.1';
const B = '127.0.0.2';
const NGINX = '127.0.0.3';
const LIMIT = 3;

let app: FastifyInstance;
let direct = '';
let nginx: Nginx;
/** The address the server saw for each /echo/invoke, in order. */
const seen: string[] = [];

beforeAll(async () => {
  app = await buildApp({ chains: allChains, config: loadServerConfig({ RUNNEL_RATE_LIMIT: String(LIMIT), RUNNEL_TRUST_PROXY: NGINX }) });
  app.addHook('onResponse', async (request) => {
    if (request.url === '/echo/invoke') seen.push(request.ip);
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const upstream = `127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  direct = `http://${upstream}`;
  nginx = await startNginx({ upstreams: [upstream], edit: (conf) => conf.replace('proxy_pass http://runnel;', `proxy_pass http://runnel;\n        proxy_bind ${NGINX};`) });
  expect(nginx.conf).toContain(`proxy_bind ${NGINX};`);
}, 60_000);

afterAll(async () => {
  await nginx?.close();
  await app?.close();
});

const invoke = (base: string, from: string, forwardedFor?: string) =>
  requestFrom(from, `${base}/echo/invoke`, { headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor }, body: { input: { name: 'a' } } });

describe('behind nginx with RUNNEL_TRUST_PROXY set to its address', () => {
  it('gives each client its own bucket, whatever X-Forwarded-For it sends', async () => {
    seen.length = 0;
    for (let i = 0; i < LIMIT; i++) expect((await invoke(nginx.url, A)).status, `A's request ${i + 1}`).toBe(200);
    const limited = await invoke(nginx.url, A);
    expect(limited.status).toBe(429);
    expect(JSON.parse(limited.body).code).toBe('RUNNEL_ERR_RATE_LIMITED');
    expect(limited.headers['retry-after']).toBeDefined();
    // A forged address does not open a new bucket for A.
    expect((await invoke(nginx.url, A, '203.0.113.9')).status).toBe(429);
    expect((await invoke(nginx.url, A, '203.0.113.9, 198.51.100.7')).status).toBe(429);
    // Nor does posing as a proxy: nginx appends A's own address after whatever A wrote.
    expect((await invoke(nginx.url, A, `203.0.113.9, ${NGINX}`)).status).toBe(429);

    // B is served although A is limited; naming A, or anyone, still counts against B's own bucket.
    expect((await invoke(nginx.url, B)).status).toBe(200);
    expect((await invoke(nginx.url, B, A)).status).toBe(200);
    expect((await invoke(nginx.url, B, '203.0.113.9')).status).toBe(200);
    expect((await invoke(nginx.url, B, '198.51.100.7')).status).toBe(429);

    expect(seen).toEqual([...Array<string>(LIMIT + 4).fill(A), ...Array<string>(4).fill(B)]);
  });

  it('ignores X-Forwarded-For from a client that reaches the server directly', async () => {
    seen.length = 0;
    await invoke(direct, B, NGINX);
    await invoke(direct, B, `${A}, ${NGINX}`);
    expect(seen).toEqual([B, B]);
  });
});
