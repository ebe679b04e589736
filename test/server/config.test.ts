import { describe, expect, it } from 'vitest';
import { buildApp, defineChain, lambda, loadServerConfig } from '../../src/index.js';

describe('loadServerConfig', () => {
  it('reads defaults and values', () => {
    expect(loadServerConfig({})).toMatchObject({ port: 8000, host: '0.0.0.0', bodyLimit: 1048576, maxBatch: 100, maxStreams: 1000, apiKeys: [], corsOrigins: [] });
    const config = loadServerConfig({ PORT: '9000', RUNNEL_API_KEYS: 'ops:0123456789abcdef0, 0123456789abcdef1', RUNNEL_CORS_ORIGINS: 'https://a.example, https://b.example' });
    expect(config.port).toBe(9000);
    expect(config.apiKeys.map((k) => k.name)).toEqual(['ops', 'key2']);
    expect(config.corsOrigins).toEqual(['https://a.example', 'https://b.example']);
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
  });

  it('serves only the enabled endpoints', async () => {
    const app = await buildApp({ chains: [defineChain({ path: '/only', runnable: lambda((x: unknown) => x), enabledEndpoints: ['invoke'] })] as never });
    expect((await app.inject({ method: 'POST', url: '/only/invoke', payload: { input: 1 } })).statusCode).toBe(200);
    expect((await app.inject({ method: 'POST', url: '/only/stream', payload: { input: 1 } })).statusCode).toBe(404);
    expect((await app.inject({ method: 'POST', url: '/only/c/N4XyA/invoke', payload: { input: 1 } })).statusCode).toBe(404);
    await app.close();
  });
});
