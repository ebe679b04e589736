/**
 * Two deployments on one Redis, each with its own `RUNNEL_RUN_NAMESPACE` and an API key of the same name
 * (`ada`, a different key in each). A probe found that only runs kept to the namespace: histories were
 * always under `runnel:history`, the response cache under `runnel:cache`, so one deployment's `ada` read and
 * continued the other's conversations and got its cached answers. Now the namespace prefixes both.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { buildApp, connectServices } from '../../src/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, scanKeys, stopProcesses, waitForProcess } from '../helpers.js';
import { sampleValue } from '../support/prometheus.js';

const root = new URL('../../', import.meta.url).pathname;
const children: ChildProcess[] = [];
const logs: string[] = [];
const run = randomUUID().slice(0, 8);
const deployments = [
  { namespace: `runnel-test-a-${run}`, key: 'ada-key-of-deployment-a-0123', url: '' },
  { namespace: `runnel-test-b-${run}`, key: 'ada-key-of-deployment-b-4567', url: '' },
];
const redis = new Redis('redis://127.0.0.1:6379');

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'runnel-namespaces-'));
  await Promise.all(
    deployments.map(async (deployment, i) => {
      const port = await freePort();
      const child = spawn(process.execPath, ['--import', 'tsx', 'src/server/main.ts'], {
        cwd: root,
        env: {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? '/tmp',
          PORT: String(port),
          HOST: '127.0.0.1',
          REDIS_URL: 'redis://127.0.0.1:6379',
          RUNNEL_DATA_DIR: join(dir, `data-${i}`),
          RUNNEL_RUN_NAMESPACE: deployment.namespace,
          RUNNEL_API_KEYS: `ada:${deployment.key}`,
          RUNNEL_METRICS_KEYS: 'ada',
          LOG_LEVEL: 'warn',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stdout?.on('data', (chunk: Buffer) => logs.push(chunk.toString()));
      child.stderr?.on('data', (chunk: Buffer) => logs.push(chunk.toString()));
      children.push(child);
      deployment.url = `http://127.0.0.1:${port}`;
      await waitForProcess(`${deployment.url}/readyz`, child, logs);
    }),
  );
}, 180_000);

afterAll(async () => {
  await stopProcesses(children);
  for (const { namespace } of deployments) {
    const keys = await scanKeys(redis, `${namespace}:*`);
    if (keys.length > 0) await redis.del(...keys);
  }
  redis.disconnect();
});

const [a, b] = deployments as [(typeof deployments)[number], (typeof deployments)[number]];
const call = (deployment: typeof a, path: string, body?: unknown) =>
  fetch(`${deployment.url}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${deployment.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

describe('deployments sharing a Redis, each with its namespace', () => {
  it('keep their callers’ conversations apart, though both callers are named ada', async () => {
    const session = `s-${run}`;
    const said = await call(a, '/chat/invoke', { input: { message: 'my secret is PINEAPPLE' }, config: { configurable: { session_id: session } } });
    expect(said.status).toBe(200);
    const own = (await (await call(a, `/chat/history/${session}`)).json()) as { messages: { content: string }[] };
    expect(JSON.stringify(own.messages)).toContain('PINEAPPLE');
    const other = (await (await call(b, `/chat/history/${session}`)).json()) as { messages: unknown[] };
    expect(other.messages).toEqual([]);
    // The history is under the deployment's own prefix.
    expect(await scanKeys(redis, `${a.namespace}:history:ada:${session}`)).toHaveLength(1);
    expect(await scanKeys(redis, `runnel:history:ada:${session}`)).toHaveLength(0);
  });

  it('keep their response caches apart: the same question in the other deployment asks the model', async () => {
    const cache = async (deployment: typeof a, result: 'hit' | 'miss') => sampleValue(await (await call(deployment, '/metrics')).text(), 'runnel_model_cache_total', { result }) ?? 0;
    const input = { input: { topic: `otters ${run}` } };
    expect((await call(a, '/joke/invoke', input)).status).toBe(200);
    expect((await call(a, '/joke/invoke', input)).status).toBe(200);
    expect(await cache(a, 'hit')).toBe(1);
    const misses = await cache(b, 'miss');
    expect((await call(b, '/joke/invoke', input)).status).toBe(200);
    expect([await cache(b, 'hit'), await cache(b, 'miss')]).toEqual([0, misses + 1]);
  });

  // An application that builds its own server once passed the namespace to buildApp alone: its runs were
  // under it, its histories and cache under `runnel:`, shared with every other deployment that did the same.
  it('an app refuses services on Redis whose namespace is not its run namespace, at start', async () => {
    for (const [servicesNamespace, runNamespace] of [[undefined, `runnel-test-c-${run}`], [`runnel-test-c-${run}`, `runnel-test-d-${run}`]] as const) {
      const services = await connectServices({ redisUrl: 'redis://127.0.0.1:6379', ...(servicesNamespace === undefined ? {} : { namespace: servicesNamespace }) });
      try {
        await expect(buildApp({ chains: [], services, config: { runNamespace } })).rejects.toMatchObject({
          code: 'RUNNEL_ERR_INVALID_ARGUMENT',
          message: expect.stringContaining(`"${servicesNamespace ?? 'runnel'}" and runs would be under "${runNamespace}"`),
        });
      } finally {
        await services.close();
      }
    }
    // The same namespace in both starts; so do services without Redis (nothing of theirs is in Redis).
    const services = await connectServices({ redisUrl: 'redis://127.0.0.1:6379', namespace: `runnel-test-c-${run}` });
    await (await buildApp({ chains: [], services, config: { runNamespace: `runnel-test-c-${run}` } })).close();
    await (await buildApp({ chains: [], services: await connectServices({}), config: { runNamespace: `runnel-test-d-${run}` } })).close();
  });
});
