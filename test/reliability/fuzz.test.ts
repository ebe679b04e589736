/**
 * Property-based fuzzing (fast-check) of every route of every shipped chain,
 * on real Redis and Postgres: bodies drawn from each chain's own JSON Schemas
 * (so many runs are valid and reach the chain) mixed with poison —
 * `__proto__` / `constructor` keys, deep nesting, huge strings, wrong types,
 * invalid UTF-8, and wrong or tricky content types. 2,000 runs per route:
 * every answer is a 2xx or a 4xx (a stream's error frame included), never a
 * 5xx, and nothing reaches Object.prototype.
 */
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChains } from '../../chains/index.js';
import { buildApp, connectServices, type Services } from '../../src/index.js';
import { scanKeys } from '../helpers.js';

const RUNS = Number(process.env.RUNNEL_FUZZ_RUNS ?? 2000);
const DATABASE_URL = process.env.RUNNEL_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/runnel_test';
const run = `fuzz-${process.pid}-${Date.now()}`;
const prototypeKeys = Object.getOwnPropertyNames(Object.prototype).sort();

type Schema = {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  enum?: unknown[];
  anyOf?: Schema[];
  oneOf?: Schema[];
  maxLength?: number;
  minLength?: number;
};

/** Values a schema accepts (roughly: the fuzzer wants many valid inputs, not only valid ones). */
function fromSchema(schema: Schema, depth = 0): fc.Arbitrary<unknown> {
  if (schema.enum !== undefined) return fc.constantFrom(...schema.enum);
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives !== undefined && depth < 4) return fc.oneof(...alternatives.map((s) => fromSchema(s, depth + 1)));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'string':
      return fc.string({ minLength: schema.minLength ?? 0, maxLength: Math.min(schema.maxLength ?? 60, 60) });
    case 'number':
      return fc.double({ noNaN: true, noDefaultInfinity: true });
    case 'integer':
      return fc.integer();
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array':
      return depth > 3 ? fc.constant([]) : fc.array(fromSchema(schema.items ?? {}, depth + 1), { maxLength: 3 });
    case 'object': {
      if (depth > 3 || schema.properties === undefined) return fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 });
      const required = schema.required ?? [];
      return fc.record(Object.fromEntries(Object.entries(schema.properties).map(([k, s]) => [k, fromSchema(s, depth + 1)])), {
        requiredKeys: required.filter((k) => k in (schema.properties ?? {})),
      });
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

/** A request body: bytes, and the content type to send them with. */
interface Body {
  payload: string | Buffer;
  contentType: string | undefined;
}

const CONTENT_TYPES = ['application/json', 'APPLICATION/JSON', 'application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', undefined];

function poison(): fc.Arbitrary<string | Buffer> {
  return fc.oneof(
    fc.constant('{"input": {"__proto__": {"polluted": true}}}'),
    fc.constant('{"__proto__": {"polluted": true}, "input": {}}'),
    fc.constant('{"input": {"constructor": {"prototype": {"polluted": true}}}}'),
    fc.constant('{"config": {"configurable": {"__proto__": {"polluted": true}}}, "input": {}}'),
    fc.constant('{"inputs": [{"__proto__": {"x": 1}}], "config": {"constructor": {"prototype": {"polluted": 1}}}}'),
    fc.integer({ min: 100, max: 20_000 }).map((n) => `{"input": ${'['.repeat(n)}${']'.repeat(n)}}`),
    fc.integer({ min: 100, max: 5_000 }).map((n) => `{"input": ${'{"a":'.repeat(n)}1${'}'.repeat(n)}}`),
    fc.integer({ min: 200_000, max: 2_000_000 }).map((n) => JSON.stringify({ input: { text: 'x'.repeat(n), question: 'y'.repeat(n), topic: 'z', message: 'm', input: 'i' } })),
    fc.uint8Array({ minLength: 1, maxLength: 64 }).map((bytes) => Buffer.concat([Buffer.from('{"input": {"topic": "'), Buffer.from([0xff, 0xfe, 0xc3, ...bytes]), Buffer.from('"}}')])),
    fc.jsonValue().map((v) => JSON.stringify(v)),
    fc.string(),
    fc.constant(''),
    fc.constant('null'),
    fc.constant('{"input": null, "config": null, "kwargs": null}'),
  );
}

function body(inputSchema: Schema, endpoint: string): fc.Arbitrary<Body> {
  const input = fc.oneof({ weight: 3, arbitrary: fromSchema(inputSchema) }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) });
  const config = fc.option(
    fc.oneof(
      // A session id (chains with history need one) — most of the time, so many runs reach the chain.
      { weight: 4, arbitrary: fc.record({ configurable: fc.record({ session_id: fc.oneof(fc.string({ minLength: 1, maxLength: 20 }), fc.constant(run)), cache: fc.boolean() }, { requiredKeys: ['session_id'] }) }) },
      { weight: 1, arbitrary: fc.record({ tags: fc.array(fc.string()), metadata: fc.dictionary(fc.string(), fc.string()), run_name: fc.string(), callbacks: fc.jsonValue(), recursion_limit: fc.integer() }, { requiredKeys: [] }) },
      { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
    ),
    { nil: undefined, freq: 6 },
  );
  const shaped =
    endpoint === 'batch'
      ? fc.record({ inputs: fc.array(input, { maxLength: 3 }), config: config }, { requiredKeys: ['inputs'] })
      : endpoint === 'stream_events' || endpoint === 'stream_log'
        ? fc.record({ input, config, include_types: fc.option(fc.array(fc.constantFrom('chain', 'tool', 'chat_model', 'x')), { nil: undefined }) }, { requiredKeys: ['input'] })
        : fc.record({ input, config }, { requiredKeys: ['input'] });
  return fc.oneof(
    { weight: 4, arbitrary: shaped.map((b) => ({ payload: JSON.stringify(b), contentType: 'application/json' as string | undefined })) },
    { weight: 2, arbitrary: fc.record({ payload: poison(), contentType: fc.constantFrom(...CONTENT_TYPES) }) },
    { weight: 1, arbitrary: fc.record({ payload: shaped.map((b) => JSON.stringify(b)), contentType: fc.constantFrom(...CONTENT_TYPES) }) },
  );
}

/** The worst status in a response: its own, or an SSE error frame's. */
function worstStatus(status: number, text: string): number {
  let worst = status;
  for (const match of text.matchAll(/"status_code":\s*(\d{3})/g)) worst = Math.max(worst, Number(match[1]));
  return worst;
}

let app: FastifyInstance;
let services: Services;
let chains: { path: string; inputSchema: Schema }[] = [];

beforeAll(async () => {
  services = await connectServices({ redisUrl: 'redis://127.0.0.1:6379', databaseUrl: DATABASE_URL, cacheNamespace: `runnel-test-cache:${run}` });
  const built = createChains({ services, env: {}, offlineDelayMs: 0 });
  await built.docs.seed();
  app = await buildApp({ chains: built.chains, services });
  chains = await Promise.all(built.chains.map(async (c) => ({ path: c.path, inputSchema: (await app.inject({ url: `${c.path}/input_schema` })).json() as Schema })));
}, 120_000);

afterAll(async () => {
  // Fuzzed chat sessions expire with the history TTL; the cache namespace is this run's own.
  const mine = services.redis === undefined ? [] : await scanKeys(services.redis, `runnel-test-cache:${run}:*`);
  if (mine.length > 0) await services.redis?.del(...mine);
  await app.close();
});

describe('fuzzing every route of every chain', () => {
  for (const path of ['/joke', '/chat', '/rag', '/agent', '/extract']) {
    for (const endpoint of ['invoke', 'batch', 'stream', 'stream_log', 'stream_events']) {
      it(`POST ${path}/${endpoint}: ${RUNS} runs, only 2xx/4xx, no prototype pollution`, async () => {
        const chain = chains.find((c) => c.path === path);
        expect(chain).toBeDefined();
        const statuses = new Map<number, number>();
        await fc.assert(
          fc.asyncProperty(body(chain?.inputSchema ?? {}, endpoint), fc.constantFrom('', '/c/N4XyA', '/c/%%%'), async ({ payload, contentType }, prefix) => {
            const res = await app.inject({
              method: 'POST',
              url: `${path}${prefix}/${endpoint}`,
              payload,
              headers: contentType === undefined ? {} : { 'content-type': contentType },
            });
            const status = worstStatus(res.statusCode, res.body);
            statuses.set(status, (statuses.get(status) ?? 0) + 1);
            if (status >= 500) throw new Error(`${status} for ${String(payload).slice(0, 300)}: ${res.body.slice(0, 300)}`);
            expect(({} as Record<string, unknown>).polluted).toBeUndefined();
          }),
          { numRuns: RUNS, seed: Number(process.env.RUNNEL_FUZZ_SEED ?? Date.now() % 2 ** 31) },
        );
        expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(prototypeKeys);
        // The runs reached the chain, not only the validator.
        expect(statuses.get(200) ?? 0).toBeGreaterThan(RUNS / 20);
      }, 600_000);
    }
  }

  it(`GET schemas, history and playground paths: ${RUNS} runs, only 2xx/3xx/4xx`, async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('/joke', '/chat', '/rag', '/agent', '/extract'),
        fc.oneof(
          fc.constantFrom('input_schema', 'output_schema', 'config_schema', 'playground/', 'playground', 'history/x'),
          fc.string({ maxLength: 40 }).map((s) => `history/${encodeURIComponent(s)}`),
          fc.string({ maxLength: 40 }).map((s) => `playground/assets/${s.replace(/[#?]/g, '')}`),
          fc.constantFrom('playground/assets/..%2f..%2fpackage.json', 'playground/assets/%2e%2e%2f%2e%2e%2fpackage.json', 'playground/assets/..%5c..%5cpackage.json', 'playground/assets/%252e%252e%252fpackage.json', 'playground/../../package.json'),
        ),
        fc.constantFrom('GET', 'HEAD', 'DELETE', 'OPTIONS'),
        async (path, rest, method) => {
          const res = await app.inject({ method, url: `${path}/${rest}` });
          expect(res.statusCode).toBeLessThan(500);
          expect(res.body).not.toContain('"devDependencies"');
        },
      ),
      { numRuns: RUNS },
    );
  }, 600_000);
});
