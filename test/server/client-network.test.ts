/**
 * A limits probe: the per-address limits (failed authentications, the keyless rate limit) counted each IPv6
 * address on its own, so one client — which holds a whole /64 and may pick any address in it — had a fresh
 * budget at every address. They now count an IPv6 client by its /64, checked with real requests through a
 * trusted proxy's X-Forwarded-For.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientNetwork } from '../../src/server/client-network.js';
import { startServer, type TestServer } from '../support/server.js';

const KEY = 'network-key-0123456789abcdef';

describe('clientNetwork', () => {
  it('keeps IPv4 and takes an IPv6 address to its /64, however it is written', () => {
    expect(clientNetwork('203.0.113.7')).toBe('203.0.113.7');
    expect(clientNetwork('::ffff:203.0.113.7')).toBe('203.0.113.7');
    for (const ip of ['2001:db8:1:2::a', '2001:0db8:0001:0002:ffff:ffff:ffff:ffff', '2001:db8:1:2:3:4:5.6.7.8', '2001:db8:1:2::1%eth0']) {
      expect(clientNetwork(ip), ip).toBe('2001:db8:1:2::/64');
    }
    // The review: an IPv4 tail after '::' was counted one group, and a mapped address written in hex was not
    // seen as IPv4 (with every other form of it, in one bucket with ::1).
    expect(clientNetwork('1::2:3:4:5:1.2.3.4')).toBe(clientNetwork('1:0:2:3:4:5:1.2.3.4'));
    expect(clientNetwork('1::2:3:4:5:1.2.3.4')).toBe('1:0:2:3::/64');
    expect(clientNetwork('::ffff:cb00:7107')).toBe('203.0.113.7');
    expect(clientNetwork('::FFFF:203.0.113.7')).toBe('203.0.113.7');
    expect(clientNetwork('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(clientNetwork('::1')).toBe('0:0:0:0::/64');
    expect(clientNetwork('2001:db8:1:3::a')).not.toBe(clientNetwork('2001:db8:1:2::a'));
    expect(clientNetwork('not an address')).toBe('not an address');
  });
});

describe('per-address limits on IPv6', () => {
  let keyless: TestServer;
  let keyed: TestServer;
  beforeAll(async () => {
    keyless = await startServer({ rateLimit: 2, trustProxy: ['loopback'] });
    keyed = await startServer({ apiKeys: [{ name: 'team', key: KEY }], authFailLimit: 2, trustProxy: ['loopback'] });
  });
  afterAll(async () => {
    await keyless.close();
    await keyed.close();
  });

  const invoke = (server: TestServer, from: string, key?: string) =>
    fetch(`${server.url}/echo/invoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': from, ...(key === undefined ? {} : { authorization: `Bearer ${key}` }) },
      body: JSON.stringify({ input: { name: 'ada' } }),
    });

  it('gives one /64 one keyless rate limit, and another /64 its own', async () => {
    expect((await invoke(keyless, '2001:db8:1:2::1')).status).toBe(200);
    expect((await invoke(keyless, '2001:db8:1:2::2')).status).toBe(200);
    const third = await invoke(keyless, '2001:db8:1:2:ffff::3');
    expect(third.status).toBe(429);
    expect(await third.json()).toMatchObject({ code: 'RUNNEL_ERR_RATE_LIMITED' });
    expect((await invoke(keyless, '2001:db8:1:3::1')).status).toBe(200);
  });

  it('refuses a /64 whose addresses guessed keys, with the right key too; another /64 is served', async () => {
    expect((await invoke(keyed, '2001:db8:5:6::a', 'wrong-key-0123456789abcdef')).status).toBe(401);
    expect((await invoke(keyed, '2001:db8:5:6::b', 'wrong-key-0123456789abcdef')).status).toBe(401);
    const refused = await invoke(keyed, '2001:db8:5:6::c', KEY);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).not.toBeNull();
    expect((await invoke(keyed, '2001:db8:5:7::c', KEY)).status).toBe(200);
  });
});
