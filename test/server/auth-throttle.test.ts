/**
 * Failed authentications are limited per client address: past the limit, the
 * address gets 429 for the rest of the minute, with a right key too (or the
 * one answer that is not a 429 would give the right guess away); other
 * addresses and health checks are unaffected, and the memory it takes is
 * bounded.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthThrottle } from '../../src/server/auth-throttle.js';
import { requestFrom } from '../support/from-address.js';
import { startServer, type TestServer } from '../support/server.js';

const KEY = 'k_live_0123456789abcdef';
const A = '127.0.0.2';
const B = '127.0.0.1';

describe('failed authentications over a real socket', () => {
  let limited: TestServer;
  let unlimited: TestServer;
  beforeAll(async () => {
    limited = await startServer({ apiKeys: [{ name: 'alice', key: KEY }], authFailLimit: 3 });
    unlimited = await startServer({ apiKeys: [{ name: 'alice', key: KEY }], authFailLimit: 0 });
  });
  afterAll(async () => {
    await limited?.close();
    await unlimited?.close();
  });
  const invoke = (server: TestServer, from: string, key?: string) =>
    requestFrom(from, `${server.url}/echo/invoke`, { headers: key === undefined ? {} : { 'x-api-key': key }, body: { input: { name: 'a' } } });

  it('refuses an address past its failures, even with the right key, with retry-after; other addresses go on', async () => {
    expect((await invoke(limited, A, `${KEY}x`)).status).toBe(401);
    // No key at all is no guess: answered 401, not counted (a probe: a playground tab's first requests, sent
    // before its key is asked for, locked the right key out after a few tabs).
    for (let i = 0; i < 5; i++) expect((await invoke(limited, A)).status).toBe(401);
    expect((await invoke(limited, A, 'wrong-wrong-wrong-wrong')).status).toBe(401);
    expect((await requestFrom(A, `${limited.url}/echo/invoke`, { headers: { authorization: 'Basic YTpi' }, body: { input: { name: 'a' } } })).status).toBe(401);

    const blocked = await invoke(limited, A, KEY);
    expect(blocked.status).toBe(429);
    expect(JSON.parse(blocked.body).code).toBe('RUNNEL_ERR_RATE_LIMITED');
    const retryAfter = Number(blocked.headers['retry-after']);
    expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60).toBe(true);
    expect((await invoke(limited, A, `${KEY}x`)).status).toBe(429);
    // Health stays open to the blocked address (load balancers probe from anywhere).
    expect((await requestFrom(A, `${limited.url}/healthz`)).status).toBe(200);

    expect((await invoke(limited, B, KEY)).status).toBe(200);
    expect((await invoke(limited, B, `${KEY}x`)).status).toBe(401);
    expect((await invoke(limited, B, KEY)).status).toBe(200);
  });

  it('does not limit failures with RUNNEL_AUTH_FAIL_LIMIT=0', async () => {
    for (let i = 0; i < 5; i++) expect((await invoke(unlimited, A, `${KEY}x`)).status).toBe(401);
    expect((await invoke(unlimited, A, KEY)).status).toBe(200);
  });
});

describe('AuthThrottle', () => {
  it('counts failures per window from the first failure, and forgets them when it ends', () => {
    let now = 1_000;
    const throttle = new AuthThrottle({ limit: 2, windowMs: 60_000, now: () => now });
    throttle.fail('a');
    expect(throttle.blockedFor('a')).toBe(0);
    now += 30_000;
    throttle.fail('a');
    expect(throttle.blockedFor('a')).toBe(30_000);
    expect(throttle.blockedFor('b')).toBe(0);
    now += 30_000;
    expect(throttle.blockedFor('a')).toBe(0);
    // A new window counts from zero.
    throttle.fail('a');
    expect(throttle.blockedFor('a')).toBe(0);
  });

  it('remembers at most `capacity` addresses, forgetting the oldest failure first', () => {
    const throttle = new AuthThrottle({ limit: 1, capacity: 100 });
    for (let i = 0; i < 10_000; i++) {
      throttle.fail(`10.0.${i >> 8}.${i & 255}`);
      expect(throttle.size).toBeLessThanOrEqual(100);
    }
    expect(throttle.blockedFor('10.0.39.15')).toBeGreaterThan(0); // the last of the 10,000
    expect(throttle.blockedFor('10.0.0.0')).toBe(0); // the first, forgotten
  });
});
