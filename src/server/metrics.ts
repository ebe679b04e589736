/**
 * Prometheus metrics on prom-client. Each app has a registry of its own with
 * the `runnel_*` series (tests build many apps in one process, and two apps
 * never share a series); Node's default metrics (memory, CPU, event-loop lag,
 * GC, handles) describe the process, so they are collected once per process
 * into a registry of their own and every app's `/metrics` shows them. That
 * also keeps apps from leaking: prom-client's default collectors start an
 * event-loop monitor and a GC observer that nothing can stop, so starting
 * them per app would leave both behind each closed app.
 *
 * Labels stay bounded: chains and endpoints are the registry's, error codes
 * the code registry's, statuses HTTP's, and provider/model pairs are capped
 * at {@link MAX_MODEL_SERIES}.
 */
import { AggregatorRegistry, collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type MetricObjectWithValues, type MetricValue, type MetricValueWithName } from 'prom-client';
import { errorCodes, type ModelCall } from '../core/index.js';

/** At most this many provider/model pairs get series of their own; calls of later ones count under model `other`. */
export const MAX_MODEL_SERIES = 50;

let processMetrics: Registry | undefined;

/** The process's default metrics, started on first use (by the first app) and shared by every app after it. */
function processRegistry(): Registry {
  if (processMetrics === undefined) {
    processMetrics = new Registry();
    collectDefaultMetrics({ register: processMetrics });
  }
  return processMetrics;
}

/** The buckets of `runnel_request_duration_seconds`, in seconds. */
const REQUEST_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * One route's requests (a chain's endpoint): how many were answered with each status, and how long they took, in
 * plain numbers. prom-client's `inc` and `observe` make a labels object, check it, hash it and build a closure on
 * every call: about 2 µs of CPU a request for the pair, 8% of an `/invoke` of a 3-step chain (measured). The
 * route's series are kept here instead, and the exposition reads them at each scrape ({@link RouteSeriesMetric}).
 *
 * @example
 * const invoke = metrics.route('/joke', 'invoke');
 * invoke.answered(200, reply.elapsedTime / 1000);
 * invoke.answered(499); // the client went away: counted, not timed
 */
export class RouteRequests {
  readonly labels: Readonly<{ chain: string; endpoint: string }>;
  /** Answers by status code. */
  readonly statuses = new Map<number, number>();
  /** Requests timed, by bucket (not cumulative; the last one past the largest bound), their sum and their count. */
  readonly buckets = new Array<number>(REQUEST_BUCKETS.length + 1).fill(0);
  sum = 0;
  count = 0;

  constructor(chain: string, endpoint: string) {
    this.labels = { chain, endpoint };
  }

  /** Counts an answer with its status; `seconds`, when given, is its latency for the histogram. */
  answered(status: number, seconds?: number): void {
    this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1);
    if (seconds === undefined || !Number.isFinite(seconds)) return;
    let bucket = 0;
    while (bucket < REQUEST_BUCKETS.length && seconds > (REQUEST_BUCKETS[bucket] as number)) bucket++;
    this.buckets[bucket] = (this.buckets[bucket] as number) + 1;
    this.sum += seconds;
    this.count++;
  }

  reset(): void {
    this.statuses.clear();
    this.buckets.fill(0);
    this.sum = 0;
    this.count = 0;
  }
}

/**
 * A series of the routes' requests as prom-client's registry reads a metric — name, help, type, aggregator, and
 * `get()` with its values in prom-client's own shape (a histogram's `_bucket` values with `le`, then `_sum` and
 * `_count`) — so the exposition, the JSON values and a cluster's sum are prom-client's, as for every other series.
 */
class RouteSeriesMetric {
  readonly aggregator = 'sum';

  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'histogram',
    private readonly routes: ReadonlyMap<string, RouteRequests>,
  ) {}

  get(): { name: string; help: string; type: string; values: MetricValueWithName<string>[]; aggregator: 'sum' } {
    const values: MetricValueWithName<string>[] = [];
    for (const route of this.routes.values()) {
      if (this.type === 'counter') {
        for (const [status, count] of route.statuses) values.push({ labels: { ...route.labels, status: String(status) }, value: count, metricName: this.name });
        continue;
      }
      // A route shows in the histogram once it has timed a request, as prom-client's histograms show a label set.
      if (route.count === 0) continue;
      let cumulative = 0;
      REQUEST_BUCKETS.forEach((bound, bucket) => {
        cumulative += route.buckets[bucket] as number;
        values.push({ labels: { ...route.labels, le: bound }, value: cumulative, metricName: `${this.name}_bucket` });
      });
      values.push({ labels: { ...route.labels, le: '+Inf' }, value: route.count, metricName: `${this.name}_bucket` });
      values.push({ labels: route.labels, value: route.sum, metricName: `${this.name}_sum` });
      values.push({ labels: route.labels, value: route.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** The registry's `resetMetrics()`. */
  reset(): void {
    for (const route of this.routes.values()) route.reset();
  }
}

/** What the gauges read at each scrape. */
export interface MetricsSources {
  /** Event streams open now (live, durable and rejoined alike). */
  openStreams(): number;
  /** The run queue's counts, or undefined while it has not started. */
  runCounts(): Promise<{ waiting: number; active: number }> | undefined;
  /** Spans tracing has dropped so far (a full queue, failed exports), or undefined with tracing off. */
  spansDropped?(): number | undefined;
}

const NO_SOURCES: MetricsSources = { openStreams: () => 0, runCounts: () => undefined };

/** Resolves `work`, or undefined once `ms` passed or it failed: a scrape never waits on an unreachable Redis. */
async function within<T>(work: Promise<T> | undefined, ms: number): Promise<T | undefined> {
  if (work === undefined) return undefined;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)));
  try {
    return await Promise.race([work.catch(() => undefined), late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The server's metrics: one per app.
 *
 * @example
 * const metrics = new Metrics({ openStreams: () => streams.size, runCounts: () => queue?.counts() });
 * metrics.route('/joke', 'invoke').answered(200, 0.012);
 * reply.type(metrics.contentType).send(await metrics.render());
 */
export class Metrics {
  readonly registry = new Registry();
  readonly contentType = this.registry.contentType;
  /** `runnel_requests_total` and `runnel_request_duration_seconds`: the series of each route, by chain and endpoint. */
  private readonly routes = new Map<string, RouteRequests>();
  readonly openStreams: Gauge;
  readonly tokens: Counter<'chain' | 'direction'>;
  readonly cache: Counter<'result'>;
  readonly firstToken: Histogram<'chain' | 'endpoint'>;
  readonly modelDuration: Histogram<'provider' | 'model'>;
  readonly modelErrors: Counter<'provider' | 'model' | 'code'>;
  readonly modelTokens: Counter<'provider' | 'model' | 'direction'>;
  readonly modelTokenDetails: Counter<'provider' | 'model' | 'detail'>;
  readonly errors: Counter<'code'>;
  readonly runs: Gauge<'status'>;
  private readonly models = new Set<string>();

  constructor(sources: MetricsSources = NO_SOURCES) {
    processRegistry();
    const registers = [this.registry];
    // Metrics of prom-client's registry are its four classes; these two are read the same way (RouteSeriesMetric).
    this.registry.registerMetric(new RouteSeriesMetric('runnel_requests_total', 'Requests by chain, endpoint and status.', 'counter', this.routes) as unknown as Counter);
    this.registry.registerMetric(
      new RouteSeriesMetric('runnel_request_duration_seconds', 'Request latency (for streams: until the stream ends).', 'histogram', this.routes) as unknown as Histogram,
    );
    this.openStreams = new Gauge({
      name: 'runnel_open_streams',
      help: 'Event streams open now.',
      registers,
      collect() {
        this.set(sources.openStreams());
      },
    });
    this.tokens = new Counter({ name: 'runnel_model_tokens_total', help: 'Model tokens by chain and direction (in, out).', labelNames: ['chain', 'direction'], registers });
    this.cache = new Counter({ name: 'runnel_model_cache_total', help: 'Model response cache lookups by result (hit, miss, error: the cache was unavailable and the lookup failed open).', labelNames: ['result'], registers });
    this.firstToken = new Histogram({
      name: 'runnel_time_to_first_token_seconds',
      help: "Event streams: from the request's arrival to the first chunk of the chain's output (on stream_events and stream_log too).",
      labelNames: ['chain', 'endpoint'],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.modelDuration = new Histogram({
      name: 'runnel_model_request_duration_seconds',
      help: "Chat model calls to their provider (cache hits excluded): from the call until its answer's end or its failure.",
      labelNames: ['provider', 'model'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120],
      registers,
    });
    this.modelErrors = new Counter({
      name: 'runnel_model_request_errors_total',
      help: 'Chat model calls that failed, by provider, model and Runnel error code (RUNNEL_ERR_ABORTED: cut short by the caller).',
      labelNames: ['provider', 'model', 'code'],
      registers,
    });
    this.modelTokens = new Counter({
      name: 'runnel_model_request_tokens_total',
      help: 'Tokens the provider reported, by provider, model and direction (in, out).',
      labelNames: ['provider', 'model', 'direction'],
      registers,
    });
    this.modelTokenDetails = new Counter({
      name: 'runnel_model_request_token_details_total',
      help: "Of the tokens in runnel_model_request_tokens_total, those the provider said its prompt cache read (cache_read) or wrote (cache_creation), parts of 'in', and those spent reasoning (reasoning), part of 'out'.",
      labelNames: ['provider', 'model', 'detail'],
      registers,
    });
    this.errors = new Counter({
      name: 'runnel_errors_total',
      help: 'Error answers by Runnel error code: JSON error answers and the error frames of live streams.',
      labelNames: ['code'],
      registers,
    });
    // Only with tracing on: a collector out of reach shows here (and in a warning a minute), not only as a hole in the traces.
    if (sources.spansDropped?.() !== undefined) {
      new Counter({
        name: 'runnel_trace_spans_dropped_total',
        help: 'Trace spans dropped: the export queue full, or an export the collector did not take after its retries.',
        registers,
        collect() {
          this.reset();
          this.inc(sources.spansDropped?.() ?? 0);
        },
      });
    }
    this.runs = new Gauge({
      name: 'runnel_runs',
      help: 'Runs by status: pending (the queue depth) and running (background runs and durable streams executing).',
      labelNames: ['status'],
      registers,
      // Every process of one deployment counts the same queue: across processes, the count is one of theirs.
      aggregator: 'max',
      async collect() {
        const counts = await within(sources.runCounts(), 1_000);
        this.reset();
        if (counts === undefined) return;
        this.set({ status: 'pending' }, counts.waiting);
        this.set({ status: 'running' }, counts.active);
      },
    });
  }

  /** Counts one chat model call to its provider (`RunnableConfig.onModelCall`): latency, error, tokens. */
  modelCall(call: ModelCall): void {
    // An answer from the cache (or shared by an identical call) made no request to time or count.
    if (call.cached === true) return;
    const labels = this.modelLabels(call.provider, call.model);
    this.modelDuration.observe(labels, call.seconds);
    if (call.error !== undefined) this.modelErrors.inc({ ...labels, code: knownCode(call.error) });
    if (call.usage !== undefined) {
      this.modelTokens.inc({ ...labels, direction: 'in' }, call.usage.input_tokens);
      this.modelTokens.inc({ ...labels, direction: 'out' }, call.usage.output_tokens);
      // The details Runnel knows by name only: a custom provider's own keys would add series without bound.
      const { cache_read, cache_creation } = call.usage.input_token_details ?? {};
      const { reasoning } = call.usage.output_token_details ?? {};
      for (const [detail, count] of [['cache_read', cache_read], ['cache_creation', cache_creation], ['reasoning', reasoning]] as const) {
        if (typeof count === 'number' && count > 0) this.modelTokenDetails.inc({ ...labels, detail }, count);
      }
    }
  }

  /** The requests of a chain's endpoint, to count its answers with (a route holds its own on to skip the lookup). */
  route(chain: string, endpoint: string): RouteRequests {
    const key = `${chain}\u0000${endpoint}`;
    let route = this.routes.get(key);
    if (route === undefined) {
      route = new RouteRequests(chain, endpoint);
      this.routes.set(key, route);
    }
    return route;
  }

  /** Counts one error answer. */
  error(code: string): void {
    this.errors.inc({ code: knownCode(code) });
  }

  /** The Prometheus text exposition: the app's series, then the process's. */
  async render(): Promise<string> {
    const [own, node] = await Promise.all([this.registry.metrics(), processRegistry().metrics()]);
    return own + node;
  }

  /** The same series as values, for the first process of a cluster to add up ({@link aggregateMetrics}). */
  async values(): Promise<MetricObjectWithValues<MetricValue<string>>[]> {
    const [own, node] = await Promise.all([this.registry.getMetricsAsJSON(), processRegistry().getMetricsAsJSON()]);
    return [...own, ...node];
  }

  /** The labels of a provider/model pair: its own while fewer than {@link MAX_MODEL_SERIES} pairs were seen, else model `other`. */
  private modelLabels(provider: string, model: string): { provider: string; model: string } {
    const name = model.slice(0, 100);
    const key = `${provider}\u0000${name}`;
    if (this.models.has(key)) return { provider, model: name };
    if (this.models.size < MAX_MODEL_SERIES) {
      this.models.add(key);
      return { provider, model: name };
    }
    return { provider, model: 'other' };
  }
}

/** A code of the registry as it is; anything else (never expected) as `RUNNEL_ERR_INTERNAL`, so the label stays bounded. */
const knownCode = (code: string): string => (Object.hasOwn(errorCodes, code) ? code : 'RUNNEL_ERR_INTERNAL');

/** Endpoints whose items are run events or log patches rather than output chunks. */
const EVENT_ENDPOINTS = new Set(['stream_events', 'stream_log', 'ui_stream']);

/**
 * True for an item that carries a chunk of the chain's own output — the
 * first token, on every endpoint alike: any item on `/stream` and the chat
 * frontends; on `/stream_events` the root run's `*_stream` event (not the
 * start events, nor the output of the steps before the model); on
 * `/stream_log` the patch that adds to the root's `streamed_output`.
 */
function isOutput(endpoint: string, item: unknown): boolean {
  if (!EVENT_ENDPOINTS.has(endpoint) || item === null || typeof item !== 'object') return true;
  const { event, parent_ids: parents, ops } = item as { event?: unknown; parent_ids?: unknown; ops?: unknown };
  if (typeof event === 'string' && Array.isArray(parents)) return parents.length === 0 && event.endsWith('_stream');
  if (Array.isArray(ops)) return ops.some((op: { path?: unknown }) => op?.path === '/streamed_output/-');
  return true;
}

/**
 * A stream's time to first token: call the returned function with each item
 * the stream sends; the first that is output observes
 * `runnel_time_to_first_token_seconds` with `elapsedSeconds()`, once.
 *
 * @example
 * const firstToken = firstTokenTimer(state.metrics, { chain: '/joke', endpoint: 'stream' }, () => reply.elapsedTime / 1000);
 * for await (const item of items) { firstToken(item); send(item); }
 */
export function firstTokenTimer(metrics: Metrics, labels: { chain: string; endpoint: string }, elapsedSeconds: () => number): (item: unknown) => void {
  let waiting = true;
  return (item) => {
    if (waiting && isOutput(labels.endpoint, item)) {
      waiting = false;
      metrics.firstToken.observe(labels, elapsedSeconds());
    }
  };
}

/**
 * The series of a cluster's server processes as one exposition: counters and histograms added up, the queue's
 * gauge the largest, Node's process metrics as prom-client aggregates them (memory added up, event-loop lag
 * averaged, ...) and the newest process's start time. A scrape of `/metrics` on the cluster's port then reads the whole server, whichever
 * process answers it.
 */
export async function aggregateMetrics(parts: MetricObjectWithValues<MetricValue<string>>[][]): Promise<string> {
  // prom-client leaves the start time out of a sum; the newest process's is kept, the last time a part of the
  // summed counters began again from zero (a dashboard's uptime then shows a process's restart).
  const kept = parts.map((metrics) => metrics.map((metric) => (metric.name === 'process_start_time_seconds' ? { ...metric, aggregator: 'max' as const } : metric)));
  return AggregatorRegistry.aggregate(kept).metrics();
}
