/**
 * A run's log in Redis keeps its last 10,000 entries. A client that read a long run from its start, or
 * resumed after a frame trimmed away, was sent the answer without its beginning (or its middle) and then
 * `end`: the part it got, as if whole. It is now an `error` frame saying the stream cannot be replayed; a
 * client resuming after a frame the log still holds gets the rest.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildApp, connectServices, type ChainSpec, type Services } from '../../src/index.js';
import { scanKeys } from '../helpers.js';
import { gatedEssay } from '../support/gated-essay.js';
import { frames } from '../support/sse-frames.js';

/** More entries than a log keeps: each word is its own turn, so its own entry. */
const WORDS = 10_300;
const { chain: essay, made, gate } = gatedEssay(WORDS, { turns: true });

const namespace = `runnel-test-trimmed-${randomUUID()}`;
let app: FastifyInstance;
let url: string;
let services: Services;

beforeAll(async () => {
  services = await connectServices({ redisUrl: 'redis://127.0.0.1:6379', namespace });
  app = await buildApp({ chains: [essay] as ChainSpec<never, unknown>[], services, config: { runNamespace: namespace, workerConcurrency: 1 } });
  // Read over a socket by Node's fetch, as a client reads the stream.
  url = await app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  // The run stopped first (closing stops the workers): one still writing would make its log again after the
  // keys are gone, to stay a day (a review found such logs of a failed run).
  gate.resolve();
  await app.close();
  const redis = new Redis('redis://127.0.0.1:6379');
  const keys = await scanKeys(redis, `${namespace}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

it('refuses to replay a run whose log lost its start, or to resume after a trimmed frame; resumes after a kept one', async () => {
  const redis = services.redis;
  if (redis === undefined) throw new Error('no redis');
  const submitted = await fetch(`${url}/essay/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { topic: 'long' } }) });
  expect(submitted.status).toBe(202);
  const runId = ((await submitted.json()) as { run_id: string }).run_id;
  await made.promise;
  const log = `${namespace}:runs:run:${runId}:log`;
  // Every word written: the log's last entry holds the last word's frame (each entry's frames as packed JSON).
  const lastWord = JSON.stringify(`w${WORDS - 1} `);
  for (;;) {
    const [[, last]] = (await redis.xrevrange(log, '+', '-', 'COUNT', 1)) as [[string, string[]]];
    if ((last[1] as string).includes(lastWord)) break;
    await nextTurn();
  }

  // The log holds the run's last entries only: its first frame, `metadata`, is gone.
  const [[, fields]] = (await redis.xrange(log, '-', '+', 'COUNT', 1)) as [[string, string[]]];
  const [[firstKept]] = JSON.parse(fields[1] as string) as [[string, string]];
  const base = firstKept.slice(0, firstKept.lastIndexOf('-') + 1);
  expect(Number(firstKept.slice(base.length))).toBeGreaterThan(1);

  const refused = async (when: string): Promise<void> => {
    for (const lastEventId of [undefined, `${base}5`]) {
      const read = await fetch(`${url}/essay/runs/${runId}/stream`, { headers: lastEventId === undefined ? {} : { 'last-event-id': lastEventId } });
      expect(read.status, `${when} ${lastEventId}`).toBe(200);
      const sent = frames(await read.text());
      // Before: thousands of `data` frames from the middle of the answer, then `end`.
      expect(sent.map((frame) => frame.event), `${when} ${lastEventId}`).toEqual(['error']);
      expect(sent[0]?.data).toMatchObject({ status_code: 410, code: 'RUNNEL_ERR_RUN_LOG_TRIMMED', message: expect.stringContaining('no longer kept') });
    }
  };
  await refused('running');

  gate.resolve();
  const ended = await fetch(`${url}/essay/runs/${runId}/wait?timeout_s=60`);
  expect(await ended.json()).toMatchObject({ status: 'success' });
  // Ended, the same: an `error` frame (a review: a resume of an ended run was a 410 JSON answer, which an
  // EventSource cannot read).
  await refused('ended');
  // After a frame the log still holds: the rest of the answer, whole, and its end.
  const resumed = frames(await (await fetch(`${url}/essay/runs/${runId}/stream`, { headers: { 'last-event-id': firstKept } })).text());
  expect(resumed.at(-1)?.event).toBe('end');
  const text = resumed.filter((frame) => frame.event === 'data').map((frame) => frame.data as string).join('');
  const from = Number(firstKept.slice(base.length));
  // Frame n (after `metadata`, frame 0) is word n - 1: the words after the first kept frame's, then the last.
  expect(text.startsWith(`w${from} w${from + 1} `)).toBe(true);
  expect(text.endsWith(`w${WORDS - 1} end.`)).toBe(true);
}, 120_000);
