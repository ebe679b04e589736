/**
 * The rate limit counts what costs the server work — the chains' routes —
 * not the playground's pages, assets and icons: the same static files for
 * everyone, loaded without a key. A probe: with `RUNNEL_RATE_LIMIT=9` and no
 * keys, one playground load took seven of the minute's requests (page,
 * script, style, icon, three schemas), and a reload or two later the page
 * itself answered a JSON 429 instead of the playground.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/index.js';
import { echo } from '../support/server.js';

let app: FastifyInstance;
let assets: string[];

beforeAll(async () => {
  app = await buildApp({ chains: [echo] as never, config: { rateLimit: 3 } });
  const page = await app.inject('/echo/playground/');
  expect(page.statusCode).toBe(200);
  assets = [...page.body.matchAll(/(?:src|href)="\.\/(assets\/[^"]+)"/g)].map((match) => `/echo/playground/${match[1]}`);
  expect(assets.length).toBeGreaterThan(0);
});
afterAll(async () => app.close());

describe('the rate limit', () => {
  it('does not count the playground, its assets or the icons, and still limits the chain', async () => {
    for (let load = 0; load < 5; load++) {
      for (const url of ['/echo/playground', '/echo/playground/', ...assets, '/favicon.svg', '/favicon.ico']) {
        const res = await app.inject(url);
        expect(res.statusCode, url).toBeLessThan(400);
        expect(res.headers['x-ratelimit-limit'], url).toBeUndefined();
      }
    }
    const call = () => app.inject({ method: 'POST', url: '/echo/invoke', payload: { input: { name: 'a' } } });
    for (let i = 0; i < 3; i++) expect((await call()).statusCode).toBe(200);
    const limited = await call();
    expect([limited.statusCode, limited.json().code]).toEqual([429, 'RUNNEL_ERR_RATE_LIMITED']);
    // Over the limit, the page still loads (and says what the chain's routes answer once it runs).
    expect((await app.inject('/echo/playground/')).statusCode).toBe(200);
  });
});
