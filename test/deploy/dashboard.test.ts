/**
 * The Grafana dashboard of deploy/grafana against a live `/metrics`: every
 * metric its queries name is one the server exports, and every label they
 * match or group by is one the series carry — so renaming a series or a
 * label fails here rather than leaving an empty panel. The server first
 * serves a chain with a cached fake model (a miss, a hit, a stream), a model
 * that fails, a bad request and a background run, so every `runnel_*` series
 * the panels read has samples.
 */
import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AIMessageChunk, buildApp, ChatModel, ChatPromptTemplate, connectServices, defineChain, FakeListChatModel, ScriptedChatModel, StringOutputParser, type ChainSpec, type Services } from '../../src/index.js';
import { metricNames, parseMetrics } from '../support/prometheus.js';

interface Target {
  expr: string;
  datasource?: { uid?: string };
}
interface Panel {
  type: string;
  title: string;
  datasource?: { uid?: string };
  targets?: Target[];
  gridPos: { h: number; w: number; x: number; y: number };
}
const dashboard = JSON.parse(readFileSync(new URL('../../deploy/grafana/dashboards/runnel.json', import.meta.url), 'utf8')) as { uid: string; title: string; panels: Panel[] };
const queries = dashboard.panels.flatMap((panel) => (panel.targets ?? []).map((target) => ({ panel: panel.title, expr: target.expr })));

/** Labels Prometheus adds when it scrapes, or that histograms carry: not in a series' own labels. */
const SCRAPE_LABELS = new Set(['instance', 'job', 'le']);
const METRIC = /\b((?:runnel|nodejs|process)_[a-z0-9_]+)\b/g;

let services: Services;
let app: FastifyInstance;
let exposition: string;

beforeAll(async () => {
  services = await connectServices({});
  const model = new FakeListChatModel({ responses: ['a cached answer'], cache: services.modelCache() });
  const chain = defineChain({
    path: '/answer',
    description: 'prompt | cached fake model | parser',
    runnable: ChatPromptTemplate.fromMessages([['human', '{question}']]).pipe(model).pipe(new StringOutputParser()),
  });
  const down = defineChain({
    path: '/down',
    description: 'a model whose provider fails',
    runnable: new ScriptedChatModel({
      respond: () => {
        throw new Error('provider down');
      },
    }),
  });
  // A provider that reports the input its prompt cache read, as OpenAI's and Anthropic's do.
  const cachedPrompt = defineChain({
    path: '/cached-prompt',
    description: 'a model whose provider read most of the prompt from its cache',
    runnable: new ChatModel(
      {
        id: 'caching',
        async *stream() {
          yield new AIMessageChunk({
            content: 'ok',
            usage_metadata: { input_tokens: 10, output_tokens: 1, total_tokens: 11, input_token_details: { cache_read: 8 } },
            response_metadata: { finish_reason: 'stop' },
          });
        },
      },
      { name: 'Caching', defaultModel: 'caching-1' },
    ),
  });
  app = await buildApp({ chains: [chain, down, cachedPrompt] as ChainSpec<never, unknown>[], services });
  const send = (url: string, payload: unknown) => app.inject({ method: 'POST', url, payload: payload as Record<string, unknown> });
  expect((await send('/answer/invoke', { input: { question: 'q' } })).statusCode).toBe(200);
  expect((await send('/answer/invoke', { input: { question: 'q' } })).statusCode).toBe(200);
  expect((await send('/answer/stream', { input: { question: 'streamed' } })).statusCode).toBe(200);
  expect((await send('/answer/invoke', { input: 'not an object' })).statusCode).toBe(422);
  expect((await send('/down/invoke', { input: 'hello' })).statusCode).toBe(502);
  expect((await send('/cached-prompt/invoke', { input: 'hello' })).statusCode).toBe(200);
  expect((await send('/answer/runs', { input: { question: 'in the background' } })).statusCode).toBe(202);
  exposition = (await app.inject('/metrics')).body;
});
afterAll(async () => app.close());

describe('deploy/grafana/dashboards/runnel.json', () => {
  it('has the panels operators asked for, on the provisioned Prometheus', () => {
    expect(dashboard.uid).toBe('runnel');
    const titles = dashboard.panels.map((panel) => panel.title).join('\n');
    for (const topic of [/requests per second/i, /latency p50 \/ p99/i, /first token/i, /tokens per minute by model/i, /prompt-cache share/i, /cache hit rate/i, /errors by code/i, /event-loop lag/i, /memory/i, /queue depth/i]) {
      expect(titles).toMatch(topic);
    }
    for (const panel of dashboard.panels.filter((p) => p.type !== 'row')) {
      expect(panel.datasource?.uid, panel.title).toBe('prometheus');
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      expect(panel.gridPos.x + panel.gridPos.w, panel.title).toBeLessThanOrEqual(24);
    }
  });

  it('names only metrics that /metrics exports', () => {
    const exported = metricNames(exposition);
    const used = new Set(queries.flatMap(({ expr }) => [...expr.matchAll(METRIC)].map((match) => match[1] as string)));
    expect(used.size).toBeGreaterThan(10);
    const missing = [...used].filter((name) => !exported.has(name));
    expect(missing).toEqual([]);
  });

  it('matches and groups by labels the series carry', () => {
    const samples = parseMetrics(exposition);
    const labelsOf = (name: string): Set<string> => new Set(samples.filter((sample) => sample.name === name).flatMap((sample) => Object.keys(sample.labels)));
    const problems: string[] = [];
    for (const { panel, expr } of queries) {
      const names = [...expr.matchAll(METRIC)].map((match) => match[1] as string);
      // Every runnel_* series a query reads has samples after the traffic above (Node's may wait for a GC).
      for (const name of names) if (name.startsWith('runnel_') && !samples.some((sample) => sample.name === name)) problems.push(`${panel}: ${name} has no samples`);
      const carried = new Set(names.flatMap((name) => [...labelsOf(name)]));
      if (carried.size === 0) continue;
      const matched = [...expr.matchAll(/\{([^}]*)\}/g)].flatMap((match) => [...(match[1] ?? '').matchAll(/(\w+)\s*(?:=~|!~|!=|=)/g)].map((label) => label[1] as string));
      const grouped = [...expr.matchAll(/\bby \(([^)]*)\)/g)].flatMap((match) => (match[1] ?? '').split(',').map((label) => label.trim()));
      for (const label of [...matched, ...grouped]) if (!SCRAPE_LABELS.has(label) && !carried.has(label)) problems.push(`${panel}: no series of ${names.join(', ')} has the label ${label}`);
    }
    expect(problems).toEqual([]);
  });
});
