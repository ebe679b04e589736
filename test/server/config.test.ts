import { describe, expect, it } from 'vitest';
import { buildApp, defineChain, lambda, loadServerConfig } from '../../src/index.js';

describe('loadServerConfig', () => {
  it('reads defaults and values', () => {
    expect(loadServerConfig({})).toMatchObject({ port: 8000, host: '127.0.0.1', bodyLimit: 1048576, maxBatch: 100, maxStreams: 1000, apiKeys: [], corsOrigins: [] });
    const config = loadServerConfig({ PORT: '9000', RUNNEL_API_KEYS: 'ops:0123456789abcdef0, 0123456789abcdef1', RUNNEL_CORS_ORIGINS: 'https://a.example, https://b.example' });
    expect(config.port).toBe(9000);
    expect(config.apiKeys.map((k) => k.name)).toEqual(['ops', 'key2']);
    expect(config.corsOrigins).toEqual(['https://a.example', 'https://b.example']);
    // An operator's trial: an origin written with a trailing slash matched no browser's Origin, silently.
    expect(loadServerConfig({ RUNNEL_CORS_ORIGINS: 'https://app.example.com/, http://localhost:5173, *' }).corsOrigins).toEqual(['https://app.example.com', 'http://localhost:5173', '*']);
    expect(() => loadServerConfig({ RUNNEL_CORS_ORIGINS: 'https://app.example.com/chat' })).toThrow(/RUNNEL_CORS_ORIGINS: each entry an origin as a browser sends it/);
    // Each names the value it refuses, as the other settings do (a trial found these two did not).
    expect(() => loadServerConfig({ RUNNEL_CORS_ORIGINS: 'https://ok.example, https://app.example.com/chat' })).toThrow(/got "https:\/\/app.example.com\/chat"/);
    expect(() => loadServerConfig({ LOG_LEVEL: 'verbose' })).toThrow(/LOG_LEVEL: one of fatal, error, warn, info, debug, trace, silent; got "verbose"/);
    expect(() => loadServerConfig({ RUNNEL_CORS_ORIGINS: 'app.example.com' })).toThrow(/RUNNEL_CORS_ORIGINS/);
  });

  it('reads an empty variable as an unset one, as compose passes them', () => {
    const empty = loadServerConfig({ LOG_LEVEL: '', REDIS_URL: '', RUNNEL_RUN_NAMESPACE: ' ', PORT: '', RUNNEL_MODEL: '' });
    expect(empty).toMatchObject({ logLevel: 'info', port: 8000 });
    expect(empty.redisUrl).toBeUndefined();
    expect(() => loadServerConfig({ PORT: '65536' })).toThrow(/PORT must be a whole number from 0 to 65535/);
    // RUNNEL_MODEL: what the model factory reads (a provider, optionally a model after the colon), and nothing else.
    for (const model of ['fake', 'openai', 'openai:', ' anthropic:claude-x ', 'fake:x']) expect(() => loadServerConfig({ RUNNEL_MODEL: model }), model).not.toThrow();
    expect(() => loadServerConfig({ RUNNEL_MODEL: 'foo:bar' })).toThrow(/RUNNEL_MODEL must be openai:<model>, anthropic:<model> or fake/);
  });

  // A probe: a one-character webhook secret was taken, while an API key needs 16.
  it('refuses a webhook secret shorter than an API key, without echoing it', () => {
    let message = '';
    try {
      loadServerConfig({ RUNNEL_WEBHOOK_HOSTS: 'hooks.example.com', RUNNEL_WEBHOOK_SECRET: 'short-secret-x' });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/RUNNEL_WEBHOOK_SECRET: at least 16 characters/);
    expect(message).not.toContain('short-secret-x');
    expect(loadServerConfig({ RUNNEL_WEBHOOK_HOSTS: 'hooks.example.com', RUNNEL_WEBHOOK_SECRET: '0123456789abcdef' }).webhookSecret).toBe('0123456789abcdef');
  });

  it('names every bad value in one error, never echoing a key', () => {
    let message = '';
    try {
      loadServerConfig({ PORT: 'eighty', RUNNEL_MAX_BATCH: '0', LOG_LEVEL: 'loud' });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/PORT must be a whole number/);
    expect(message).toMatch(/RUNNEL_MAX_BATCH/);
    expect(message).toMatch(/LOG_LEVEL/);
    expect(() => loadServerConfig({ RUNNEL_API_KEYS: 'short-secret' })).toThrow(/at least 16 characters/);
    try {
      loadServerConfig({ RUNNEL_API_KEYS: 'short-secret' });
    } catch (error) {
      expect((error as Error).message).not.toContain('short-secret');
    }
    // A newcomer's probe: among several keys, the one too short was not said; its position is, never its text.
    expect(() => loadServerConfig({ RUNNEL_API_KEYS: 'alice:alice-key-0123456789,bob:short,carol-key-0123456789,sk-part:rest' })).toThrow(
      'RUNNEL_API_KEYS: every key must be at least 16 characters: entry 2 and entry 4 are shorter',
    );
  });

  // A probe: RUNNEL_MAX_BATCH=1e3 and RUNNEL_BODY_LIMIT=0x1000 were taken (Number() reads them), while RUNNEL_PROCESSES=" 2" was refused.
  it('reads whole numbers in decimal digits only, spaces around them allowed', () => {
    for (const value of ['1e3', '0x1000', '0b11', '+5', '5.0']) expect(() => loadServerConfig({ RUNNEL_MAX_BATCH: value }), value).toThrow(/RUNNEL_MAX_BATCH must be a whole number/);
    expect(loadServerConfig({ RUNNEL_MAX_BATCH: ' 20 ' }).maxBatch).toBe(20);
    expect(loadServerConfig({ RUNNEL_PROCESSES: ' 2 ', REDIS_URL: 'redis://127.0.0.1:6379', DATABASE_URL: 'postgres://127.0.0.1/x' }).processes).toBe(2);
  });

  // A probe: `alice: <key>` kept the space in alice's key (HTTP strips it from the header: always 401) and
  // `bob :<key>` named an identity "bob " that RUNNEL_METRICS_KEYS=bob did not match.
  it('takes spaces around the colon as the list\'s, and refuses a key no header could carry', () => {
    const config = loadServerConfig({ RUNNEL_API_KEYS: 'alice: abcdefghijklmnop1234, bob :qrstuvwxyz0123456789', RUNNEL_METRICS_KEYS: 'bob' });
    expect(config.apiKeys).toEqual([
      { name: 'alice', key: 'abcdefghijklmnop1234' },
      { name: 'bob', key: 'qrstuvwxyz0123456789' },
    ]);
    expect(() => loadServerConfig({ RUNNEL_API_KEYS: 'alice:abcdefgh ijklmnop1234' })).toThrow(/entry 1: a key holds no space or control character/);
  });

  it('refuses two keys under one name, automatic names included, and one key under two names, never echoing a key', () => {
    const a = 'k_live_aaaaaaaaaaaaaaaa';
    const b = 'k_live_bbbbbbbbbbbbbbbb';
    const refusal = (keys: string): string => {
      try {
        loadServerConfig({ RUNNEL_API_KEYS: keys });
      } catch (error) {
        return (error as Error).message;
      }
      return 'accepted';
    };
    const twoOps = refusal(`ops:${a}, ops:${b}`);
    expect(twoOps).toMatch(/RUNNEL_API_KEYS: the name "ops" is used by entry 1 and entry 2/);
    // A bare key is named after its position: the second entry here is "key2", like the first.
    const automatic = refusal(`key2:${a},${b}`);
    expect(automatic).toMatch(/the name "key2" is used by entry 1 and entry 2 \(a bare key, named "key2" after its position\)/);
    const sameKey = refusal(`alice:${a},bob:${a}`);
    expect(sameKey).toMatch(/entry 1 and entry 2 are the same key/);
    expect(refusal(`anonymous:${a}`)).toMatch(/"anonymous" is reserved/);
    // A name left out before the colon: the colon was taken into a bare key before.
    const unnamed = refusal(`alice:${a}, :${b}`);
    expect(unnamed).toMatch(/entry 2: a name before the colon is empty/);
    expect(unnamed).not.toContain(b);
    for (const message of [twoOps, automatic, sameKey]) {
      expect(message).not.toContain(a);
      expect(message).not.toContain(b);
    }
    expect(loadServerConfig({ RUNNEL_API_KEYS: `ops:${a},${b}` }).apiKeys).toEqual([
      { name: 'ops', key: a },
      { name: 'key2', key: b },
    ]);
  });

  it('takes webhook hosts as a webhook URL’s host is matched: names, addresses, *. and two labels or more; nothing that can never match', () => {
    expect(loadServerConfig({ RUNNEL_WEBHOOK_HOSTS: 'hooks.example.com, *.example.com, 10.0.0.5, [::1], localhost, Hooks.Example.COM, webhook_receiver, my_host.internal' }).webhookHosts).toEqual([
      'hooks.example.com',
      '*.example.com',
      '10.0.0.5',
      '[::1]',
      'localhost',
      'hooks.example.com',
      'webhook_receiver',
      'my_host.internal',
    ]);
    // A port names the one a receiver off the scheme's default listens on.
    expect(loadServerConfig({ RUNNEL_WEBHOOK_HOSTS: 'hooks.example.com:8443, *.example.com:9000, [::1]:8080, 10.0.0.5:80' }).webhookHosts).toEqual(['hooks.example.com:8443', '*.example.com:9000', '[::1]:8080', '10.0.0.5:80']);
    for (const bad of ['https://hooks.example.com', 'hooks.example.com:0', 'hooks.example.com:65536', 'hooks.example.com:080', 'hooks.example.com:', 'hooks.example.com/path', '*', '*.com', 'a b', 'hooks..example.com', '-bad-.example.com', 'ok.example.com,*.', '::1', '*.0.0.1']) {
      expect(() => loadServerConfig({ RUNNEL_WEBHOOK_HOSTS: bad }), bad).toThrow(/RUNNEL_WEBHOOK_HOSTS/);
    }
  });

  it('trusts X-Forwarded-For only from listed proxy addresses, refusing true and hop counts', () => {
    expect(loadServerConfig({}).trustProxy).toEqual([]);
    expect(loadServerConfig({ RUNNEL_TRUST_PROXY: 'false' }).trustProxy).toEqual([]);
    expect(loadServerConfig({ RUNNEL_TRUST_PROXY: '10.213.0.0/24, 127.0.0.1,::1,fd00::/8,loopback' }).trustProxy).toEqual([
      '10.213.0.0/24',
      '127.0.0.1',
      '::1',
      'fd00::/8',
      'loopback',
    ]);
    for (const bad of ['true', '1', '10.0.0.0/33', 'nginx', '10.0.0.1/8/8', '::1/129', '0.0.0.0/0', '::/0']) {
      expect(() => loadServerConfig({ RUNNEL_TRUST_PROXY: bad }), bad).toThrow(/RUNNEL_TRUST_PROXY must list the proxies' addresses/);
    }
  });

  it('limits failed authentications by default, and 0 turns that off', () => {
    expect(loadServerConfig({}).authFailLimit).toBe(20);
    expect(loadServerConfig({ RUNNEL_AUTH_FAIL_LIMIT: '0' }).authFailLimit).toBe(0);
    expect(() => loadServerConfig({ RUNNEL_AUTH_FAIL_LIMIT: '-1' })).toThrow(/RUNNEL_AUTH_FAIL_LIMIT must be a whole number/);
    // An operator's trial: durations past what a Node timer takes (2^31 − 1 ms) were taken, and fired after
    // 1 ms — a ping frame a millisecond, the run sweep 6,000 Redis commands a second, a shutdown with no grace.
    for (const name of ['RUNNEL_PING_MS', 'RUNNEL_RUN_LOCK_MS', 'RUNNEL_SHUTDOWN_GRACE_MS', 'RUNNEL_STREAM_STALL_MS', 'RUNNEL_BODY_TIMEOUT_MS']) {
      expect(() => loadServerConfig({ [name]: '9999999999' }), name).toThrow(new RegExp(`${name} must be a whole number from \\d+ to 3600000`));
      expect(() => loadServerConfig({ [name]: '3600000' }), name).not.toThrow();
    }
    expect(() => loadServerConfig({ RUNNEL_BODY_LIMIT: '99999999999999' })).toThrow(/RUNNEL_BODY_LIMIT must be a whole number from 1024 to 1073741824/);
    expect(() => loadServerConfig({ RUNNEL_MAX_BATCH: '99999999999' })).toThrow(/RUNNEL_MAX_BATCH must be a whole number from 1 to 10000/);
    expect(() => loadServerConfig({ RUNNEL_WORKER_CONCURRENCY: '100000' })).toThrow(/RUNNEL_WORKER_CONCURRENCY must be a whole number from 0 to 1000/);
    // Runnel's own docs in the docs collection: on unless turned off, and a value that says neither stops the start.
    expect(loadServerConfig({}).seedDocs).toBe(true);
    expect(loadServerConfig({ RUNNEL_SEED_DOCS: 'false' }).seedDocs).toBe(false);
    expect(() => loadServerConfig({ RUNNEL_SEED_DOCS: 'no' })).toThrow(/RUNNEL_SEED_DOCS/);
  });

  it('serves only the enabled endpoints', async () => {
    const app = await buildApp({ chains: [defineChain({ path: '/only', runnable: lambda((x: unknown) => x), enabledEndpoints: ['invoke'] })] as never });
    expect((await app.inject({ method: 'POST', url: '/only/invoke', payload: { input: 1 } })).statusCode).toBe(200);
    expect((await app.inject({ method: 'POST', url: '/only/stream', payload: { input: 1 } })).statusCode).toBe(404);
    expect((await app.inject({ method: 'POST', url: '/only/c/N4XyA/invoke', payload: { input: 1 } })).statusCode).toBe(404);
    await app.close();
  });
});
