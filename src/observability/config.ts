/**
 * Tracing's settings, from OpenTelemetry's standard variables only: on when
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is
 * set (and `OTEL_SDK_DISABLED` is not `true`), exporting OTLP over HTTP as
 * protobuf or JSON, with the service name, resource attributes, sampler,
 * compression, timeout and batching the variables say. Prompt and completion text are recorded only with
 * `RUNNEL_TRACE_CONTENT=true`.
 */
import { RunnelError } from '../core/index.js';

/** The samplers of `OTEL_TRACES_SAMPLER` this server honours. */
export const SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const;

/** How spans are exported and sampled. */
export interface TracingConfig {
  /** The OTLP/HTTP traces URL (`…/v1/traces`). */
  url: string;
  protocol: 'http/protobuf' | 'http/json';
  /** Headers of the exporter's requests (`OTEL_EXPORTER_OTLP_HEADERS`): credentials, never logged. */
  headers: Record<string, string>;
  serviceName: string;
  /** `OTEL_RESOURCE_ATTRIBUTES`, decoded. */
  resourceAttributes: Record<string, string>;
  sampler: (typeof SAMPLERS)[number];
  /** The ratio of the `traceidratio` samplers (`OTEL_TRACES_SAMPLER_ARG`). */
  ratio: number;
  /** Record prompts, completions, inputs and outputs on spans (user data: off by default). */
  content: boolean;
  /** `OTEL_EXPORTER_OTLP(_TRACES)_COMPRESSION`. */
  compression: 'gzip' | 'none';
  /** `OTEL_EXPORTER_OTLP(_TRACES)_TIMEOUT`, ms (default 10,000). */
  timeoutMs: number;
  /** `OTEL_BSP_MAX_QUEUE_SIZE` (default 2,048). */
  maxQueueSize: number;
  /** `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` (default 512, at most the queue's size). */
  maxExportBatchSize: number;
  /** `OTEL_BSP_SCHEDULE_DELAY`, ms (default 5,000). */
  scheduleDelayMs: number;
}

/** `k1=v1,k2=v2`, each part percent-decoded (the W3C Baggage form the OTel variables use). */
function keyValues(text: string | undefined, variable: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (text ?? '').split(',')) {
    if (part.trim() === '') continue;
    const at = part.indexOf('=');
    if (at <= 0) throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Invalid configuration:\n- ${variable}: each entry must look like key=value`);
    try {
      out[decodeURIComponent(part.slice(0, at).trim())] = decodeURIComponent(part.slice(at + 1).trim());
    } catch {
      throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Invalid configuration:\n- ${variable}: an entry is not valid percent-encoding`);
    }
  }
  return out;
}

/** An http(s) URL with a host and, if any, a port Node can connect to (`http://:4318` and port 99999 were taken, and every export then failed unheard). */
function validEndpoint(url: string): boolean {
  if (!/^https?:\/\/[^\s/]+/.test(url)) return false;
  try {
    const parsed = new URL(url);
    return parsed.hostname !== '' && (parsed.port === '' || (Number(parsed.port) >= 1 && Number(parsed.port) <= 65535));
  } catch {
    return false;
  }
}

/**
 * The tracing settings in `env`, or undefined when tracing is off. Throws one error naming a bad variable
 * (never echoing a header's value).
 *
 * @example
 * const tracing = loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://jaeger:4318' });
 */
export function loadTracingConfig(env: Record<string, string | undefined>): TracingConfig | undefined {
  const set = (name: string): string | undefined => (env[name] === undefined || env[name]?.trim() === '' ? undefined : env[name]?.trim());
  // Checked with tracing off too: a value that would be refused once tracing is on is a wrong setting now.
  const content = set('RUNNEL_TRACE_CONTENT') ?? 'false';
  if (content !== 'true' && content !== 'false') throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'Invalid configuration:\n- RUNNEL_TRACE_CONTENT: true or false');
  if (set('OTEL_SDK_DISABLED')?.toLowerCase() === 'true' || set('OTEL_TRACES_EXPORTER')?.toLowerCase() === 'none') return undefined;
  const traces = set('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const base = set('OTEL_EXPORTER_OTLP_ENDPOINT');
  // OTLP is the one exporter here (and the default): another (jaeger, zipkin, console) is refused, not taken for OTLP.
  // The variable is a list (the spec's): every entry must be one Runnel has.
  const unsupported = (set('OTEL_TRACES_EXPORTER') ?? '')
    .toLowerCase()
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '' && entry !== 'otlp');
  if (unsupported.length > 0) {
    throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Invalid configuration:\n- OTEL_TRACES_EXPORTER: ${unsupported.map((entry) => `'${entry}'`).join(', ')} is not supported; use otlp (the default) or none`);
  }
  if (traces === undefined && base === undefined) return undefined;
  const problems: string[] = [];
  // The signal's own endpoint is used as given; the base one gets the signal's path (the OTLP spec's rule).
  const url = traces ?? `${(base as string).replace(/\/+$/, '')}/v1/traces`;
  if (!validEndpoint(url)) problems.push(`${traces === undefined ? 'OTEL_EXPORTER_OTLP_ENDPOINT' : 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'}: must be an http:// or https:// URL with a host (and a port from 1 to 65535)`);
  const protocol = set('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? set('OTEL_EXPORTER_OTLP_PROTOCOL') ?? 'http/protobuf';
  if (protocol !== 'http/protobuf' && protocol !== 'http/json') problems.push(`OTEL_EXPORTER_OTLP_PROTOCOL: '${protocol}' is not supported; use http/protobuf or http/json (grpc is not)`);
  const sampler = (set('OTEL_TRACES_SAMPLER') ?? 'parentbased_always_on').toLowerCase();
  if (!(SAMPLERS as readonly string[]).includes(sampler)) problems.push(`OTEL_TRACES_SAMPLER: one of ${SAMPLERS.join(', ')}`);
  const arg = set('OTEL_TRACES_SAMPLER_ARG');
  const ratio = arg === undefined ? 1 : Number(arg);
  if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1) problems.push('OTEL_TRACES_SAMPLER_ARG: a number from 0 to 1');
  const compressionName = set('OTEL_EXPORTER_OTLP_TRACES_COMPRESSION') === undefined ? 'OTEL_EXPORTER_OTLP_COMPRESSION' : 'OTEL_EXPORTER_OTLP_TRACES_COMPRESSION';
  const compression = (set(compressionName) ?? 'none').toLowerCase();
  if (compression !== 'gzip' && compression !== 'none') problems.push(`${compressionName}: gzip or none`);
  // Durations (ms) become Node timers: at most an hour, well inside what a timer takes (2^31 − 1 ms).
  const whole = (name: string, fallback: number, min: number, max: number): number => {
    const value = set(name);
    if (value === undefined) return fallback;
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) {
      problems.push(`${name}: a whole number from ${min} to ${max}`);
      return fallback;
    }
    return n;
  };
  const timeoutMs = whole(set('OTEL_EXPORTER_OTLP_TRACES_TIMEOUT') === undefined ? 'OTEL_EXPORTER_OTLP_TIMEOUT' : 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT', 10_000, 1, 3_600_000);
  const maxQueueSize = whole('OTEL_BSP_MAX_QUEUE_SIZE', 2048, 1, 1_000_000);
  const maxExportBatchSize = whole('OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512, 1, 1_000_000);
  const scheduleDelayMs = whole('OTEL_BSP_SCHEDULE_DELAY', 5000, 0, 3_600_000);
  if (problems.length > 0) throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Invalid configuration:\n${problems.map((problem) => `- ${problem}`).join('\n')}`);
  const resourceAttributes = keyValues(set('OTEL_RESOURCE_ATTRIBUTES'), 'OTEL_RESOURCE_ATTRIBUTES');
  const headers = { ...keyValues(set('OTEL_EXPORTER_OTLP_HEADERS'), 'OTEL_EXPORTER_OTLP_HEADERS'), ...keyValues(set('OTEL_EXPORTER_OTLP_TRACES_HEADERS'), 'OTEL_EXPORTER_OTLP_TRACES_HEADERS') };
  // A decoded line break or other control character would make every export request fail to be built.
  if (Object.entries(headers).some(([key, value]) => [...key + value].some((c) => (c < ' ' && c !== '\t') || c === '\u007f') || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(key))) {
    throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'Invalid configuration:\n- OTEL_EXPORTER_OTLP_HEADERS: a header name or value holds a character HTTP does not allow');
  }
  return {
    url,
    protocol: protocol as TracingConfig['protocol'],
    headers,
    serviceName: set('OTEL_SERVICE_NAME') ?? resourceAttributes['service.name'] ?? 'runnel',
    resourceAttributes,
    sampler: sampler as TracingConfig['sampler'],
    ratio,
    content: content === 'true',
    compression: compression as TracingConfig['compression'],
    timeoutMs,
    maxQueueSize,
    // The SDKs' rule: a batch is never larger than the queue.
    maxExportBatchSize: Math.min(maxExportBatchSize, maxQueueSize),
    scheduleDelayMs,
  };
}
