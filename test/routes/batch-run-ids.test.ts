/**
 * A batch's run ids are one per item, also where the client names them: a single config's `run_id` (or one in
 * the URL's config hash) names the first run only, as LangChain's `getConfigList` and the JS client do, and a
 * list of configs that names one run twice is refused. A probe found every item of
 * `{"inputs": [a, b], "config": {"run_id": U}}` answered, traced and cached under the same run id.
 */
import LZString from 'lz-string';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/index.js';
import { allChains } from '../support/server.js';

let app: FastifyInstance;
let base: string;
beforeAll(async () => {
  app = await buildApp({ chains: allChains });
  base = await app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => app.close());

const RUN = '3f2504e0-4f89-11d3-9a0c-0305e82c3301';
/** A batch sent by Node's fetch over a socket: its status and its body, read whole. */
async function batch(payload: unknown, url = '/echo/batch') {
  const res = await fetch(`${base}${url}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(payload) });
  const body = (await res.json()) as { metadata: { run_ids: string[] }; code?: string; message: string; detail?: unknown };
  return { statusCode: res.status, json: () => body };
}

describe('POST /batch with a client run_id', () => {
  it("gives a single config's run_id to the first item and a new one to each other", async () => {
    for (const config of [{ run_id: RUN }, { runId: RUN }]) {
      const res = await batch({ inputs: [{ name: 'a' }, { name: 'b' }, { name: 'c' }], config });
      expect(res.statusCode).toBe(200);
      const ids: string[] = res.json().metadata.run_ids;
      expect(ids[0]).toBe(RUN);
      expect(new Set(ids).size).toBe(3);
    }
  });

  it("gives a config hash's run_id to the first item only", async () => {
    const hash = LZString.compressToEncodedURIComponent(JSON.stringify({ run_id: RUN }));
    const res = await batch({ inputs: [{ name: 'a' }, { name: 'b' }] }, `/echo/c/${hash}/batch`);
    expect(res.statusCode).toBe(200);
    const ids: string[] = res.json().metadata.run_ids;
    expect(ids[0]).toBe(RUN);
    expect(ids[1]).not.toBe(RUN);
  });

  it('keeps the run ids of a list of configs, and refuses one named twice', async () => {
    const other = '9b2f1c3e-2d4a-4b5c-8d6e-7f8091a2b3c4';
    const listed = await batch({ inputs: [{ name: 'a' }, { name: 'b' }], config: [{ run_id: RUN }, { run_id: other }] });
    expect(listed.json().metadata.run_ids).toEqual([RUN, other]);
    const twice = await batch({ inputs: [{ name: 'a' }, { name: 'b' }], config: [{ run_id: RUN }, { runId: RUN }] });
    expect(twice.statusCode).toBe(422);
    expect(twice.json()).toMatchObject({ code: 'RUNNEL_ERR_CONFIG_INVALID', detail: [{ loc: ['config', 1, 'runId'] }] });
    expect(twice.json().message).toContain('run_id');
  });
});
