/**
 * The requests of each route (`runnel_requests_total`, `runnel_request_duration_seconds`) are counted in plain
 * numbers and read at each scrape (prom-client's own calls cost 2 µs a request): what they expose must be what
 * prom-client's Counter and Histogram expose for the same answers — the same samples, cumulative buckets, `+Inf`,
 * `_sum` and `_count` — and a cluster's sum of them must be prom-client's too.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { aggregateMetrics, Metrics } from '../../src/server/metrics.js';
import { parseMetrics, type Sample } from '../support/prometheus.js';

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** Answers as [chain, endpoint, status, seconds (undefined: counted, not timed)]: on bounds, between them, past the last. */
const ANSWERS: [string, string, number, number | undefined][] = [
  ['/joke', 'invoke', 200, 0.004],
  ['/joke', 'invoke', 200, 0.005],
  ['/joke', 'invoke', 200, 0.0051],
  ['/joke', 'invoke', 422, 0.3],
  ['/joke', 'stream', 200, 61],
  ['/joke', 'stream', 499, undefined],
  ['/rag', 'batch', 500, 2.5],
  ['/rag', 'batch', 200, 0],
];

/** What prom-client's own metrics expose for the same answers. */
async function promClients(answers: typeof ANSWERS): Promise<Registry> {
  const registry = new Registry();
  const requests = new Counter({ name: 'runnel_requests_total', help: 'h', labelNames: ['chain', 'endpoint', 'status'], registers: [registry] });
  const duration = new Histogram({ name: 'runnel_request_duration_seconds', help: 'h', labelNames: ['chain', 'endpoint'], buckets: BUCKETS, registers: [registry] });
  for (const [chain, endpoint, status, seconds] of answers) {
    requests.inc({ chain, endpoint, status: String(status) });
    if (seconds !== undefined) duration.observe({ chain, endpoint }, seconds);
  }
  return registry;
}

function ours(answers: typeof ANSWERS): Metrics {
  const metrics = new Metrics();
  for (const [chain, endpoint, status, seconds] of answers) metrics.route(chain, endpoint).answered(status, seconds);
  return metrics;
}

/** The samples of the two series, in one order whatever order the labels were written in. */
const requestSamples = (text: string): string[] =>
  parseMetrics(text)
    .filter((sample: Sample) => sample.name.startsWith('runnel_requests_total') || sample.name.startsWith('runnel_request_duration_seconds'))
    .map((sample) => `${sample.name}{${Object.entries(sample.labels).sort().map(([key, value]) => `${key}=${value}`).join(',')}} ${sample.value}`)
    .sort();

describe('the routes’ request series', () => {
  it('expose what prom-client’s Counter and Histogram expose for the same answers', async () => {
    const expected = requestSamples(await (await promClients(ANSWERS)).metrics());
    expect(expected.length).toBeGreaterThan(40);
    expect(requestSamples(await ours(ANSWERS).render())).toEqual(expected);
  });

  it('keep their # TYPE lines (a histogram, a counter), as scrapers read them', async () => {
    const text = await ours(ANSWERS).render();
    expect(text).toContain('# TYPE runnel_requests_total counter');
    expect(text).toContain('# TYPE runnel_request_duration_seconds histogram');
  });

  it('add up across a cluster’s processes as prom-client’s do', async () => {
    const first = ANSWERS.slice(0, 5);
    const second = ANSWERS.slice(3);
    const expected = await aggregateMetrics([await (await promClients(first)).getMetricsAsJSON(), await (await promClients(second)).getMetricsAsJSON()]);
    const summed = await aggregateMetrics([await ours(first).values(), await ours(second).values()]);
    expect(requestSamples(summed)).toEqual(requestSamples(expected));
  });

  it('keep the newest process’s start time in a cluster’s sum (prom-client’s leaves it out)', async () => {
    // Each process's registry, with the series as prom-client's default metrics make it.
    const started = async (seconds: number) => {
      const registry = new Registry();
      new Gauge({ name: 'process_start_time_seconds', help: 'h', aggregator: 'omit', registers: [registry] }).set(seconds);
      return registry.getMetricsAsJSON();
    };
    const summed = await aggregateMetrics([await started(1_700_000_000), await started(1_700_000_500), await started(1_700_000_200)]);
    expect(summed).toMatch(/^process_start_time_seconds 1700000500$/m);
  });

  it('skip a latency that is not a number, as a count', async () => {
    const metrics = new Metrics();
    metrics.route('/joke', 'invoke').answered(200, Number.NaN);
    const samples = requestSamples(await metrics.render());
    expect(samples).toEqual(['runnel_requests_total{chain=/joke,endpoint=invoke,status=200} 1']);
  });

  it('reset with the registry', async () => {
    const metrics = ours(ANSWERS);
    metrics.registry.resetMetrics();
    expect(requestSamples(await metrics.render())).toEqual([]);
  });
});
