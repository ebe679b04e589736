/**
 * Without RUNNEL_TRUST_PROXY (the default), a caller is its socket's address:
 * X-Forwarded-For is ignored, so a client can neither leave its rate-limit
 * bucket nor spend another's by writing one. (Behind a proxy, see
 * test/deploy/proxy-identity.test.ts.)
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, loadServerConfig } from '../../src/index.js';
import { requestFrom } from '../support/from-address.js';
import { allChains } from '../support/server.js';

const A = '127.0.0.1';
const B = '127.0.0.2';
let app: FastifyInstance;
let base = '';
const seen: string[] = [];

beforeAll(async () => {
  app = await buildApp({ chains: allChains, config: loadServerConfig({ RUNNEL_RATE_LIMIT: '2' }) });
  app.addHook('onResponse', async (request) => {
    if (request.url === '/echo/invoke') seen.push(request.ip);
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});
afterAll(async () => app?.close());

const invoke = (from: string, forwardedFor?: string) =>
  requestFrom(from, `${base}/echo/invoke`, { headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor }, body: { input: { name: 'a' } } });

describe('without a trusted proxy', () => {
  it('keys direct clients by their socket address and ignores X-Forwarded-For', async () => {
    expect((await invoke(A, B)).status).toBe(200);
    expect((await invoke(A, '203.0.113.9')).status).toBe(200);
    expect((await invoke(A, '198.51.100.7')).status).toBe(429);
    expect((await invoke(B, A)).status).toBe(200);
    expect(seen).toEqual([A, A, A, B]);
  });
});
