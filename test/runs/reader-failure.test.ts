/**
 * A join whose reads of the run's log fail with Redis unavailable (the run's own writes need not): a join that
 * had sent frames is closed without an end, so its client rejoins after them; one that fails before sending
 * any is told why, so a read that fails every time for one run does not keep an EventSource reconnecting.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, RunnelError } from '../../src/index.js';
import type { RunStore } from '../../src/runs/index.js';
import { allChains } from '../support/server.js';

let app: FastifyInstance;
let store: RunStore;
beforeAll(async () => {
  app = await buildApp({ chains: allChains });
  store = app.runnel.runQueue().store;
});
afterAll(async () => app.close());

/** A run of /slow that has made frames, and its id. */
async function running(): Promise<string> {
  const res = await app.inject({ method: 'POST', url: '/slow/runs', payload: { input: { count: 1000 } } });
  const runId = (res.json() as { run_id: string }).run_id;
  for (let i = 0; i < 1000 && (await store.frames(runId)).length < 3; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  return runId;
}

/** `store.frames` failing as an unavailable Redis does, from its `from`-th call on (1-based). */
function failFrames(from: number): () => void {
  const original = store.frames.bind(store);
  let calls = 0;
  store.frames = async (...args: Parameters<RunStore['frames']>) => {
    calls += 1;
    if (calls >= from) throw new RunnelError('RUNNEL_ERR_REDIS_UNAVAILABLE', 'Redis is unavailable: runs cannot be read or written');
    return original(...args);
  };
  return () => {
    store.frames = original;
  };
}

describe('a join whose reads fail', () => {
  it('closes without an end after sending frames, and tells a join that got none why', async () => {
    const runId = await running();
    // The first read gives frames, the next fails: closed, no end, no error — the client rejoins.
    let restore = failFrames(2);
    try {
      const cut = await app.inject({ method: 'GET', url: `/slow/runs/${runId}/stream` });
      const events = cut.body.match(/^event: \w+/gm) ?? [];
      expect(events.length).toBeGreaterThan(0);
      expect(events).not.toContain('event: error');
      expect(events).not.toContain('event: end');
    } finally {
      restore();
    }
    // Failing before any frame: the error frame, so an EventSource stops rather than reconnect for ever.
    const after = (await store.frames(runId))[1]?.id as string;
    restore = failFrames(1);
    try {
      const refused = await app.inject({ method: 'GET', url: `/slow/runs/${runId}/stream`, headers: { 'last-event-id': after } });
      expect(refused.body.match(/^event: \w+/gm)).toEqual(['event: error']);
      expect(refused.body).toContain('"code":"RUNNEL_ERR_REDIS_UNAVAILABLE"');
    } finally {
      restore();
      await app.inject({ method: 'POST', url: `/slow/runs/${runId}/cancel`, headers: { 'content-type': 'application/json' }, payload: '{}' });
    }
  });
});
