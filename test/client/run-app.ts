/**
 * A Runnel app with the durable-run chains (`/story`, `/long`, `/noop`)
 * listening on 127.0.0.1, its runs on the in-process queue or on BullMQ in
 * Redis (a namespace of its own), with two API keys.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { buildApp, connectServices, type ChainSpec } from '../../src/index.js';
import { runChains } from '../support/run-server.js';

export const keys = { ada: 'ada-key-0123456789abcdef', bob: 'bob-key-0123456789abcdef' };
export const auth = (who: keyof typeof keys): Record<string, string> => ({ authorization: `Bearer ${keys[who]}` });

export interface RunApp {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** Starts the app; `close` stops it (and its workers). */
export async function startRunApp(backend: 'memory' | 'redis'): Promise<RunApp> {
  const runNamespace = `runnel-test-${randomUUID()}`;
  const services = backend === 'redis' ? await connectServices({ redisUrl: 'redis://127.0.0.1:6379', namespace: runNamespace }) : undefined;
  const app = await buildApp({
    chains: runChains as ChainSpec<never, unknown>[],
    services,
    config: { apiKeys: Object.entries(keys).map(([name, key]) => ({ name, key })), runNamespace, workerConcurrency: 4 },
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, port, close: () => app.close() };
}
