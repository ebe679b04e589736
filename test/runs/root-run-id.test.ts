/**
 * A background run's chain runs under the run's own id: its root run (what `stream_events` names, and a
 * trace's `runnel.run_id`) is the record's, as an `/invoke`'s root is its answer's `run_id`. A probe found
 * another id there, so neither a trace nor an event led back to the run.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/index.js';
import { allChains } from '../support/server.js';

let app: FastifyInstance;
beforeAll(async () => {
  app = await buildApp({ chains: allChains });
});
afterAll(async () => app.close());

describe("a run's root run", () => {
  it('has the id of the run, on a durable stream of events', async () => {
    const res = await app.inject({ method: 'POST', url: '/joke/stream_events', payload: { input: { topic: 'ids' }, on_disconnect: 'continue' } });
    const frames = res.body.split('\r\n\r\n').filter((frame) => frame.includes('data: '));
    const data = frames.map((frame) => JSON.parse(frame.slice(frame.indexOf('data: ') + 6)) as { run_id?: string; parent_ids?: string[]; event?: string });
    const runId = data[0]?.run_id;
    expect(runId).toMatch(/^[0-9a-f-]{36}$/);
    const roots = data.filter((event) => event.event !== undefined && event.parent_ids?.length === 0);
    expect(roots.length).toBeGreaterThan(0);
    for (const root of roots) expect(root.run_id).toBe(runId);
  });

  // A review: a client's `config.run_id` (where the chain allows it) names the run's trace, never the run.
  it("is the client's run_id when it sent one", async () => {
    const own = '11111111-1111-4111-8111-111111111111';
    const res = await app.inject({ method: 'POST', url: '/echo/stream_events', payload: { input: { name: 'x' }, config: { run_id: own }, on_disconnect: 'continue' } });
    const data = res.body
      .split('\r\n\r\n')
      .filter((frame) => frame.includes('data: '))
      .map((frame) => JSON.parse(frame.slice(frame.indexOf('data: ') + 6)) as { run_id?: string; parent_ids?: string[]; event?: string });
    expect(data[0]?.run_id).not.toBe(own);
    const roots = data.filter((event) => event.event !== undefined && event.parent_ids?.length === 0);
    expect(roots.length).toBeGreaterThan(0);
    for (const root of roots) expect(root.run_id).toBe(own);
  });
});
