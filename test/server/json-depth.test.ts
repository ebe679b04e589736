/**
 * A body nested thousands of levels deep overflowed the stack of whatever
 * walked it later: `/agent`'s tool-call arguments in the model cache's key
 * (500 RUNNEL_ERR_INTERNAL), a background run's record as it was stored. A
 * request's JSON may now nest 100 levels (Ruby's JSON default); deeper, it
 * is refused before it is parsed, with the body's usual 422.
 */
import { randomUUID } from 'node:crypto';
import LZString from 'lz-string';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentChain } from '../../chains/agent.js';
import { DocsCollection } from '../../chains/docs.js';
import { connectServices, type ChainSpec, type Services } from '../../src/index.js';
import { MAX_JSON_DEPTH, nestedDeeperThan } from '../../src/server/request.js';
import { post, startServer, type TestServer } from '../support/server.js';

/** `depth` objects, one inside the other, around 1. */
const nested = (depth: number): string => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;

/** An /agent input whose earlier tool call had arguments `args` (JSON text). */
const agentBody = (args: string): string =>
  `{"input":{"input":"what is 2+2?","chat_history":[{"type":"ai","content":"","tool_calls":[{"id":"c1","name":"calculator","args":${args}}]}]}}`;

describe('nestedDeeperThan', () => {
  it('counts arrays and objects, not brackets inside strings', () => {
    expect(nestedDeeperThan('[[[1]]]', 3)).toBe(false);
    expect(nestedDeeperThan('[[[[1]]]]', 3)).toBe(true);
    expect(nestedDeeperThan('{"a":[{"b":1}]}', 2)).toBe(true);
    expect(nestedDeeperThan(`{"text":"${'['.repeat(500)}"}`, 3)).toBe(false);
    expect(nestedDeeperThan(`{"text":"\\"${'{'.repeat(500)}"}`, 3)).toBe(false);
    expect(nestedDeeperThan(nested(MAX_JSON_DEPTH))).toBe(false);
    expect(nestedDeeperThan(nested(MAX_JSON_DEPTH + 1))).toBe(true);
  });
});

describe('a request nested deeper than 100 levels', () => {
  let services: Services;
  let server: TestServer;
  beforeAll(async () => {
    services = await connectServices({ redisUrl: 'redis://127.0.0.1:6379', cacheNamespace: `runnel-test:depth:${randomUUID()}` });
    const context = { services, env: {}, offlineDelayMs: 0 };
    server = await startServer({}, [agentChain(context, new DocsCollection(context))] as ChainSpec<never, unknown>[]);
  });
  afterAll(async () => {
    await server?.close();
    await services?.close();
  });

  it('is a 422 naming the limit, not an internal error; 100 levels still run', async () => {
    for (const depth of [101, 3_000, 6_000]) {
      const res = await post(`${server.url}/agent/invoke`, agentBody(nested(depth)));
      expect(res.status).toBe(422);
      expect(await res.json()).toMatchObject({ code: 'RUNNEL_ERR_BODY_INVALID', message: 'JSON nested deeper than 100 levels' });
    }
    // The body's own two levels and the input's five, around the arguments.
    const res = await post(`${server.url}/agent/invoke`, agentBody(nested(MAX_JSON_DEPTH - 7)));
    expect(res.status).toBe(200);
  });

  it('in a tool call’s arguments too, JSON inside a JSON string that is parsed later (a review: 500 at 6,000 levels)', async () => {
    const turn = (args: string) => ({
      input: {
        input: 'what is 2+2?',
        chat_history: [
          { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'calculator', arguments: args } }] },
          { role: 'tool', tool_call_id: 'c1', content: '4' },
        ],
      },
    });
    // Past the limit, the call is refused as one whose arguments are not JSON: left out of the turn.
    expect((await post(`${server.url}/agent/invoke`, turn(nested(6_000)))).status).toBe(200);
    expect((await post(`${server.url}/agent/invoke`, turn(nested(50)))).status).toBe(200);
  });

  it('in a /c/{hash} config too: the hash is refused', async () => {
    const hash = LZString.compressToEncodedURIComponent(`{"configurable":${nested(3_000)}}`);
    const res = await post(`${server.url}/agent/c/${hash}/invoke`, { input: { input: 'hi' } });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ code: 'RUNNEL_ERR_CONFIG_HASH_INVALID', message: 'Invalid config hash: its config is nested deeper than 100 levels' });
  });
});
