/**
 * A limits probe: one API key could fill the run queue — up to the in-process queue's 10,000 waiting runs,
 * without bound on Redis — and, the queue being one line, every other key's run waited behind all of
 * them. Now `RUNNEL_MAX_RUNS_PER_KEY` bounds a caller's runs pending or running (429
 * `RUNNEL_ERR_TOO_MANY_RUNS`, counted in Redis across replicas), and the in-process queue starts the run of
 * the caller with the fewest under way first.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, connectServices, defineChain, lambda, type ChainSpec, type Services } from '../../src/index.js';

const keys = { ada: 'ada-key-0123456789abcdef', bob: 'bob-key-0123456789abcdef' };
const as = (who: keyof typeof keys) => ({ authorization: `Bearer ${keys[who]}`, 'content-type': 'application/json' });

/** Runs of `/gate` start, then wait until the test opens their gate by name. */
class Gates {
  readonly started: string[] = [];
  private readonly open = new Map<string, () => void>();
  private readonly startWaiters: (() => void)[] = [];

  async pass(name: string): Promise<string> {
    await new Promise<void>((resolve) => {
      this.open.set(name, resolve);
      this.started.push(name);
      for (const wake of this.startWaiters.splice(0)) wake();
    });
    return name;
  }

  /** Resolves once `count` runs have started. */
  async startedCount(count: number): Promise<void> {
    while (this.started.length < count) await new Promise<void>((resolve) => this.startWaiters.push(resolve));
  }

  release(name: string): void {
    const resolve = this.open.get(name);
    if (resolve === undefined) throw new Error(`${name} has not started`);
    this.open.delete(name);
    resolve();
  }
}

for (const backend of ['memory', 'redis'] as const) {
  describe(`runs per caller (${backend === 'memory' ? 'in-process queue' : 'BullMQ on Redis, two replicas'})`, () => {
    const gates = new Gates();
    const chain = defineChain({ path: '/gate', runnable: lambda((input: { name: string }) => gates.pass(input.name), { input: z.object({ name: z.string() }), output: z.string() }) });
    const apps: FastifyInstance[] = [];
    let urls: string[] = [];

    beforeAll(async () => {
      // Each app closes its own services.
      const runNamespace = `runnel-test-${randomUUID()}`;
      const services = async (): Promise<Services | undefined> => (backend === 'redis' ? connectServices({ redisUrl: 'redis://127.0.0.1:6379', namespace: runNamespace }) : undefined);
      const config = { apiKeys: Object.entries(keys).map(([name, key]) => ({ name, key })), runNamespace, maxRunsPerKey: 3 };
      // One worker, so runs wait; on Redis a second replica that only takes requests shares the queue and the counts.
      apps.push(await buildApp({ chains: [chain] as ChainSpec<never, unknown>[], services: await services(), config: { ...config, workerConcurrency: 1 } }));
      if (backend === 'redis') apps.push(await buildApp({ chains: [chain] as ChainSpec<never, unknown>[], services: await services(), config: { ...config, workerConcurrency: 0 } }));
      for (const app of apps) await app.listen({ port: 0, host: '127.0.0.1' });
      urls = apps.map((app) => `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`);
    });
    afterAll(async () => {
      for (const app of apps) await app.close();
    });

    const submit = async (who: keyof typeof keys, name: string, replica = 0) =>
      fetch(`${urls[replica]}/gate/runs`, { method: 'POST', headers: as(who), body: JSON.stringify({ input: { name } }) });
    const submitted = async (who: keyof typeof keys, name: string, replica = 0): Promise<string> => {
      const res = await submit(who, name, replica);
      expect(res.status, name).toBe(202);
      return ((await res.json()) as { run_id: string }).run_id;
    };
    const waitFor = async (runId: string, who: keyof typeof keys) =>
      (await (await fetch(`${urls[0]}/gate/runs/${runId}/wait?timeout_s=60`, { headers: as(who) })).json()) as { status: string; output?: unknown };

    it('refuses a caller its next run past RUNNEL_MAX_RUNS_PER_KEY on every replica, not another caller; an ended run frees a place', async () => {
      const a1 = await submitted('ada', 'a1');
      await gates.startedCount(1);
      const a2 = await submitted('ada', 'a2', urls.length - 1);
      const a3 = await submitted('ada', 'a3');
      for (const replica of urls.keys()) {
        const refused = await submit('ada', 'a4', replica);
        expect(refused.status).toBe(429);
        expect(refused.headers.get('retry-after')).toBe('1');
        expect(await refused.json()).toMatchObject({ code: 'RUNNEL_ERR_TOO_MANY_RUNS' });
      }
      // Another key has places of its own.
      const b1 = await submitted('bob', 'b1', urls.length - 1);

      // A cancelled waiting run frees its place.
      expect((await fetch(`${urls[0]}/gate/runs/${a3}/cancel`, { method: 'POST', headers: as('ada') })).status).toBe(200);
      expect((await waitFor(a3, 'ada')).status).toBe('cancelled');
      const a5 = await submitted('ada', 'a5', urls.length - 1);
      expect((await submit('ada', 'a6')).status).toBe(429);

      // So does one that ends.
      gates.release('a1');
      expect(await waitFor(a1, 'ada')).toMatchObject({ status: 'success', output: 'a1' });
      const a7 = await submitted('ada', 'a7');
      expect((await submit('ada', 'a8')).status).toBe(429);

      // The four left run one at a time.
      for (let next = 1; next <= 4; next++) {
        await gates.startedCount(next + 1);
        gates.release(gates.started[next] as string);
      }
      for (const [runId, who] of [[a2, 'ada'], [a5, 'ada'], [a7, 'ada'], [b1, 'bob']] as const) expect((await waitFor(runId, who)).status).toBe('success');

      // At the limit with every run ended, submissions at once all find a place (the bench found one refused:
      // another submission had let the ended runs go first).
      const burst = await Promise.all(['c1', 'c2', 'c3'].map((name, index) => submitted('ada', name, index % urls.length)));
      for (let next = 5; next < 8; next++) {
        await gates.startedCount(next + 1);
        gates.release(gates.started[next] as string);
      }
      for (const runId of burst) expect((await waitFor(runId, 'ada')).status).toBe('success');
    });

    // BullMQ's queue is one line (docs/runs.md): the limit is what bounds one caller's lead there.
    if (backend === 'memory') it("starts another caller's run before the rest of one caller's line", async () => {
      const first = gates.started.length;
      const runs = [await submitted('ada', 'f-a1')];
      await gates.startedCount(first + 1);
      runs.push(await submitted('ada', 'f-a2'), await submitted('ada', 'f-a3'));
      const bobs = await submitted('bob', 'f-b1');
      for (let next = first; next < first + 4; next++) {
        await gates.startedCount(next + 1);
        gates.release(gates.started[next] as string);
      }
      for (const runId of runs) expect((await waitFor(runId, 'ada')).status).toBe('success');
      expect((await waitFor(bobs, 'bob')).status).toBe('success');
      // ada's runs came first, but bob's one ran as soon as the worker was free: the caller with the fewest
      // runs under way goes first, then the one whose last run started longest ago.
      expect(gates.started.slice(first)).toEqual(['f-a1', 'f-b1', 'f-a2', 'f-a3']);
    });

    // In process, every run's frame ids counted on from one counter of the process: the gap between two of
    // ada's runs told her how many frames everyone else's runs had sent in between (here bob's 6).
    if (backend === 'memory') it("gives a run frame ids that say nothing of another caller's runs", async () => {
      const ids = async (who: keyof typeof keys, name: string): Promise<number[]> => {
        const runId = await submitted(who, name);
        while (!gates.started.includes(name)) await gates.startedCount(gates.started.length + 1);
        gates.release(name);
        expect((await waitFor(runId, who)).status).toBe('success');
        const text = await (await fetch(`${urls[0]}/gate/runs/${runId}/stream`, { headers: as(who) })).text();
        return [...text.matchAll(/^id: (.+)$/gm)].map((match) => Number(match[1]));
      };
      const first = await ids('ada', 'i-a1');
      for (const name of ['i-b1', 'i-b2']) expect(await ids('bob', name)).toHaveLength(3);
      const second = await ids('ada', 'i-a2');
      expect(second.map((id) => id - (second[0] as number))).toEqual([0, 1, 2]);
      expect(second[0]).not.toBe((first.at(-1) as number) + 7);
    });
  });
}
