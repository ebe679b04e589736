/**
 * Prometheus metrics, hand-rolled and small: requests by chain, endpoint and
 * status; latency histograms; open streams; model tokens in and out; cache
 * hits and misses. `render()` gives the text exposition format.
 */

type Labels = Record<string, string>;

const keys = new Map<string, string>();

/** The label part of a series, cached: the same few label sets recur on every request. */
const key = (labels: Labels): string => {
  let raw = '';
  for (const name in labels) raw += `${name}\u0000${labels[name]}\u0001`;
  let formatted = keys.get(raw);
  if (formatted === undefined) {
    formatted = format(labels);
    if (keys.size < 10_000) keys.set(raw, formatted);
  }
  return formatted;
};

const format = (labels: Labels): string =>
  Object.keys(labels)
    .sort()
    .map((name) => `${name}="${String(labels[name]).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`)
    .join(',');

class Counter {
  readonly values = new Map<string, number>();
  constructor(readonly name: string, readonly help: string) {}
  inc(labels: Labels = {}, by = 1): void {
    const k = key(labels);
    this.values.set(k, (this.values.get(k) ?? 0) + by);
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`];
    for (const [labels, value] of this.values) lines.push(`${this.name}${labels ? `{${labels}}` : ''} ${value}`);
    return lines.join('\n');
  }
}

class Gauge {
  value = 0;
  constructor(readonly name: string, readonly help: string) {}
  render(): string {
    return [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} gauge`, `${this.name} ${this.value}`].join('\n');
  }
}

class Histogram {
  private readonly series = new Map<string, { buckets: number[]; sum: number; count: number }>();
  constructor(readonly name: string, readonly help: string, readonly bounds: number[]) {}
  observe(labels: Labels, value: number): void {
    const k = key(labels);
    let s = this.series.get(k);
    if (s === undefined) {
      s = { buckets: this.bounds.map(() => 0), sum: 0, count: 0 };
      this.series.set(k, s);
    }
    this.bounds.forEach((bound, i) => {
      if (value <= bound) (s as { buckets: number[] }).buckets[i] = ((s as { buckets: number[] }).buckets[i] ?? 0) + 1;
    });
    s.sum += value;
    s.count += 1;
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const [labels, s] of this.series) {
      const prefix = labels ? `${labels},` : '';
      this.bounds.forEach((bound, i) => lines.push(`${this.name}_bucket{${prefix}le="${bound}"} ${s.buckets[i]}`));
      lines.push(`${this.name}_bucket{${prefix}le="+Inf"} ${s.count}`, `${this.name}_sum${labels ? `{${labels}}` : ''} ${s.sum}`, `${this.name}_count${labels ? `{${labels}}` : ''} ${s.count}`);
    }
    return lines.join('\n');
  }
}

/** The server's metrics. */
export class Metrics {
  readonly requests = new Counter('runnel_requests_total', 'Requests by chain, endpoint and status.');
  readonly duration = new Histogram('runnel_request_duration_seconds', 'Request latency (for streams: until the stream ends).', [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]);
  readonly openStreams = new Gauge('runnel_open_streams', 'Event streams open now.');
  readonly tokens = new Counter('runnel_model_tokens_total', 'Model tokens by chain and direction (in, out).');
  readonly cache = new Counter('runnel_model_cache_total', 'Model response cache lookups by result (hit, miss).');

  /** The Prometheus text exposition of every metric. */
  render(): string {
    return `${[this.requests, this.duration, this.openStreams, this.tokens, this.cache].map((m) => m.render()).join('\n')}\n`;
  }
}
