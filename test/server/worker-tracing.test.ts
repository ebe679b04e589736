/**
 * A probe: a run worker (`npm run worker`) whose collector refused its spans dropped every one of them without
 * a word — a worker has no `/metrics`, so no `runnel_trace_spans_dropped_total` either — where a server warns
 * of it in its log. A worker now warns the same way.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { buildApp, connectServices, defineChain, lambda, loadServerConfig, type ChainSpec, type Services } from '../../src/index.js';
import { startRunWorkers } from '../../src/server/worker-process.js';
import { startOtlpReceiver, type OtlpReceiver } from '../support/otlp-receiver.js';

const REDIS_URL = process.env.RUNNEL_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const noop = defineChain({ path: '/noop', runnable: lambda((input: { n: number }) => input.n, { input: z.object({ n: z.number() }), output: z.number() }) });

let receiver: OtlpReceiver;
let appServices: Services;
let workerServices: Services;
beforeAll(async () => {
  // The collector refuses every export (400: not retried).
  receiver = await startOtlpReceiver({ answers: Array.from({ length: 100 }, () => 400) });
});
afterAll(async () => {
  await receiver.close();
});

describe('a run worker whose collector refuses its spans', () => {
  it('says so in its log, with the spans dropped', async () => {
    const namespace = `test-worker-tracing-${randomUUID()}`;
    const env = { REDIS_URL, RUNNEL_RUN_NAMESPACE: namespace };
    workerServices = await connectServices({ redisUrl: REDIS_URL, namespace });
    appServices = await connectServices({ redisUrl: REDIS_URL, namespace });
    const warnings: { fields: Record<string, unknown>; message: string }[] = [];
    let warned: () => void = () => undefined;
    const told = new Promise<void>((resolve) => (warned = resolve));
    const worker = startRunWorkers({
      config: loadServerConfig({ ...env, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '10', RUNNEL_WORKER_CONCURRENCY: '1' }),
      chains: [noop] as ChainSpec<never, unknown>[],
      services: workerServices,
      log: {
        info: () => undefined,
        error: () => undefined,
        warn: (fields, message) => {
          warnings.push({ fields, message });
          if (message.startsWith('tracing:')) warned();
        },
      },
    });
    // An HTTP-only server submits the run; the worker runs it.
    const app = await buildApp({ chains: [noop] as ChainSpec<never, unknown>[], config: { ...loadServerConfig(env), workerConcurrency: 0 }, services: appServices });
    try {
      await app.listen({ port: 0, host: '127.0.0.1' });
      const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      const submitted = await fetch(`${url}/noop/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { n: 1 } }) });
      const { run_id: runId } = (await submitted.json()) as { run_id: string };
      const waited = await fetch(`${url}/noop/runs/${runId}/wait?timeout_s=30`);
      expect(((await waited.json()) as { status: string }).status).toBe('success');
      await told;
      expect(warnings.find((warning) => warning.message.startsWith('tracing:'))).toEqual({
        fields: { dropped_spans: expect.any(Number) },
        message: expect.stringContaining('the collector answered 400'),
      });
      expect(receiver.requests.length).toBeGreaterThan(0);
    } finally {
      await app.close();
      await worker.stop();
      await appServices.close();
    }
  });
});
