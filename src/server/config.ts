/**
 * The server's configuration, from environment variables, validated at
 * start: every bad value is named in one error. README's configuration table
 * lists the same variables.
 */
import { loadTracingConfig, type TracingConfig } from '../observability/config.js';
import { availableParallelism } from 'node:os';
import { isIP } from 'node:net';
import pg from 'pg';
import { z } from 'zod';
import { RunnelError } from '../core/index.js';

const HOUR_MS = 3_600_000;

const integer = (name: string, min: number, fallback: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .optional()
    .transform((value, ctx) => {
      if (value === undefined || value.trim() === '') return fallback;
      // Decimal digits only: Number() took 1e3, 0x1000 and 0b11 as well.
      const n = /^-?\d{1,16}$/.test(value.trim()) ? Number(value.trim()) : Number.NaN;
      if (!Number.isInteger(n) || n < min || n > max) {
        const range = max === Number.MAX_SAFE_INTEGER ? `≥ ${min}` : `from ${min} to ${max}`;
        ctx.addIssue({ code: 'custom', message: `${name} must be a whole number ${range}, got ${JSON.stringify(value)}` });
        return z.NEVER;
      }
      return n;
    });

/** The path of a redis:// URL (its database), or '' when it has none or the URL does not parse. */
function redisUrlPath(url: string): string {
  try {
    return new URL(url).pathname;
  } catch {
    return '';
  }
}

/**
 * Whether ioredis can read a redis:// URL: it parses it with WHATWG URL and percent-decodes its user and
 * password. One it cannot read (a port past 65535, `redis://[host`, a password with `%zz`) threw from the
 * client's constructor, a stack trace instead of the start's one line.
 */
function redisUrlReadable(url: string): boolean {
  try {
    const parsed = new URL(url);
    decodeURIComponent(parsed.username);
    decodeURIComponent(parsed.password);
    return true;
  } catch {
    return false;
  }
}

/**
 * Why node-postgres cannot read a DATABASE_URL, or undefined when it can (its parser, as the pool will run
 * it). One it cannot read started a server whose every query, the docs seed's included, failed "Invalid URL".
 * Never quotes the URL: it holds the password.
 */
function databaseUrlProblem(url: string): string | undefined {
  try {
    new pg.Client({ connectionString: url });
    return undefined;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ERR_INVALID_URL' || error instanceof URIError
      ? 'DATABASE_URL is not a URL node-postgres can read: a port from 1 to 65535, and characters such as # / @ in the user or password percent-encoded'
      : `DATABASE_URL cannot be used: ${(error as Error).message}`;
  }
}

const list = z
  .string()
  .optional()
  .transform((value) => (value ?? '').split(',').map((item) => item.trim()).filter((item) => item !== ''));

/** A host name label: letters, digits, inner hyphens and underscores (Docker's service names have them), 1 to 63. */
const LABEL = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/i;

/**
 * A host pattern as a request's or a webhook URL's host is matched against it: a host name, an IPv4 address,
 * a bracketed IPv6 one (as a URL writes it), or `*.` and a name of at least two labels (`*.com` would allow a
 * whole top-level domain) whose last is not all digits (`*.0.0.1` names IP addresses, which a URL's numeric
 * forms reach: `http://2130706433/` is 127.0.0.1). A scheme or a path can never match a host, so they are refused.
 */
function isHostPattern(entry: string): boolean {
  if (/^\[[0-9a-f:.]+\]$/i.test(entry)) return true;
  const wildcard = entry.startsWith('*.');
  const labels = (wildcard ? entry.slice(2) : entry).split('.');
  return labels.every((label) => LABEL.test(label)) && (!wildcard || (labels.length >= 2 && !/^\d+$/.test(labels.at(-1) as string)));
}

/**
 * An entry of RUNNEL_WEBHOOK_HOSTS: a host pattern, alone (the scheme's default port) or with the one port it
 * may be called on (`hooks.example.com:8443`).
 */
function isWebhookHost(entry: string): boolean {
  const port = /^(.+):(\d{1,5})$/.exec(entry);
  if (port === null) return isHostPattern(entry);
  const n = Number(port[2]);
  return n >= 1 && n <= 65_535 && !port[2]?.startsWith('0') && isHostPattern(port[1] as string);
}

/** proxy-addr's named ranges, which Fastify's trustProxy accepts besides addresses and CIDR ranges. */
const PROXY_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** An IPv4 or IPv6 address, optionally with a `/prefix` (not /0: that is `true` by another name), or one of {@link PROXY_RANGES}. */
function isProxyAddress(item: string): boolean {
  if (PROXY_RANGES.has(item)) return true;
  const [address = '', prefix, ...rest] = item.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  return prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) >= 1 && Number(prefix) <= (family === 4 ? 32 : 128));
}

// Addresses only: with `true` (or /0), Fastify takes the left-most X-Forwarded-For entry, which the client writes
// (nginx appends to it), so any client could pick its own rate-limit bucket; a hop count Fastify 5 silently ignores.
const trustProxy = z
  .string()
  .optional()
  .transform((value, ctx) => {
    const items = (value ?? '').split(',').map((item) => item.trim()).filter((item) => item !== '');
    if (items.length === 1 && items[0]?.toLowerCase() === 'false') return [];
    const bad = items.filter((item) => !isProxyAddress(item));
    if (bad.length > 0) {
      ctx.addIssue({
        code: 'custom',
        message:
          `RUNNEL_TRUST_PROXY must list the proxies' addresses or CIDR ranges (or loopback, linklocal, uniquelocal), comma-separated, got ${bad.map((item) => JSON.stringify(item)).join(', ')}` +
          ' (true and /0 are refused: they would let any client choose its address with X-Forwarded-For; Fastify 5 ignores hop counts)',
      });
      return z.NEVER;
    }
    return items;
  });

const envSchema = z.object({
  PORT: integer('PORT', 0, 8000, 65535),
  // Read by the chat model factory (models/from-env.ts); checked here so a typo fails at start in one line.
  RUNNEL_MODEL: z
    .string()
    .optional()
    .refine((value) => value === undefined || /^(openai|anthropic|fake)(:.*)?$/.test(value.trim()), {
      message: 'RUNNEL_MODEL must be openai:<model>, anthropic:<model> or fake',
    }),
  HOST: z.string().optional().transform((value) => value || '127.0.0.1'),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], { error: (issue) => `one of fatal, error, warn, info, debug, trace, silent; got ${JSON.stringify(issue.input)}` })
    .optional()
    .default('info'),
  RUNNEL_API_KEYS: list,
  RUNNEL_METRICS_KEYS: list,
  // An origin as a browser sends it (scheme, host, port — never a path): one written with a trailing slash is
  // taken without it (it would match no Origin); any other path is refused. `*` allows every origin.
  RUNNEL_CORS_ORIGINS: list
    .transform((origins) => origins.map((origin) => origin.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/\s]+)\/$/i, '$1')))
    .superRefine((origins, context) => {
      const bad = origins.find((origin) => origin !== '*' && !/^[a-z][a-z0-9+.-]*:\/\/[^/\s?#]+$/i.test(origin));
      if (bad !== undefined) {
        context.addIssue({ code: 'custom', message: `each entry an origin as a browser sends it — scheme, host and port only (https://app.example.com, http://localhost:5173) — or * for any; got ${JSON.stringify(bad)}` });
      }
    }),
  RUNNEL_BODY_LIMIT: integer('RUNNEL_BODY_LIMIT', 1024, 1024 * 1024, 1024 ** 3),
  RUNNEL_MAX_BATCH: integer('RUNNEL_MAX_BATCH', 1, 100, 10_000),
  RUNNEL_MAX_STREAMS: integer('RUNNEL_MAX_STREAMS', 1, 1000),
  // 0 is none, as for the rate limit.
  RUNNEL_MAX_STREAMS_PER_KEY: integer('RUNNEL_MAX_STREAMS_PER_KEY', 0, 0),
  RUNNEL_MAX_RUNS_PER_KEY: integer('RUNNEL_MAX_RUNS_PER_KEY', 0, 0),
  RUNNEL_RATE_LIMIT: integer('RUNNEL_RATE_LIMIT', 0, 0),
  RUNNEL_AUTH_FAIL_LIMIT: integer('RUNNEL_AUTH_FAIL_LIMIT', 0, 20),
  RUNNEL_TRUST_PROXY: trustProxy,
  // Durations become Node timers, which take at most 2^31 − 1 ms (about 24.8 days) and fire after 1 ms past
  // that: each has a bound well inside it, and within reason.
  RUNNEL_STREAM_STALL_MS: integer('RUNNEL_STREAM_STALL_MS', 100, 30_000, HOUR_MS),
  RUNNEL_BODY_TIMEOUT_MS: integer('RUNNEL_BODY_TIMEOUT_MS', 100, 30_000, HOUR_MS),
  RUNNEL_SHUTDOWN_GRACE_MS: integer('RUNNEL_SHUTDOWN_GRACE_MS', 0, 5_000, HOUR_MS),
  RUNNEL_PING_MS: integer('RUNNEL_PING_MS', 100, 15_000, HOUR_MS),
  RUNNEL_WORKER_CONCURRENCY: integer('RUNNEL_WORKER_CONCURRENCY', 0, 8, 1_000),
  RUNNEL_WORKER_METRICS_PORT: integer('RUNNEL_WORKER_METRICS_PORT', 0, 0, 65_535),
  RUNNEL_PROCESSES: z
    .string()
    .optional()
    .transform((value, ctx) => {
      const given = value?.trim() ?? '';
      if (given === '') return 1;
      if (given === 'auto') return availableParallelism();
      const n = Number(given);
      if (!/^\d+$/.test(given) || n < 1 || n > 256) {
        ctx.addIssue({ code: 'custom', message: `RUNNEL_PROCESSES must be a whole number from 1 to 256, or auto (one per core), got ${JSON.stringify(value)}` });
        return z.NEVER;
      }
      return n;
    }),
  RUNNEL_RUN_TTL: integer('RUNNEL_RUN_TTL', 60, 86_400, 30 * 86_400),
  RUNNEL_RUN_LOCK_MS: integer('RUNNEL_RUN_LOCK_MS', 1_000, 30_000, HOUR_MS),
  RUNNEL_ALLOWED_HOSTS: list.refine(
    (hosts) => hosts.every((host) => host === '*' || isHostPattern(host)),
    'each entry a host name (runnel.internal), *. and a name of two labels or more (*.example.com), or * for any — no scheme, port or path',
  ),
  RUNNEL_WEBHOOK_HOSTS: list.refine(
    (hosts) => hosts.every(isWebhookHost),
    'each entry a host name (hooks.example.com), an IP address (IPv6 in brackets, as a URL writes it: [::1]), or *. and a name of two labels or more (*.example.com), with a port only for a receiver off the scheme\'s default (hooks.example.com:8443) — no scheme or path',
  ),
  RUNNEL_RUN_NAMESPACE: z.string().regex(/^[\w:-]{1,64}$/, 'letters, digits, _, - and : only').optional().transform((value) => value || 'runnel'),
  // A signing key as long as an API key at least: a short one could be guessed from a signed delivery offline.
  RUNNEL_WEBHOOK_SECRET: z
    .string()
    .refine((value) => value === '' || value.length >= 16, 'at least 16 characters, as an API key (a random string: it signs every delivery)')
    .optional()
    .transform((value) => (value === undefined || value === '' ? undefined : value)),
  RUNNEL_WEBHOOK_ALLOW_HTTP: z.enum(['true', 'false', '']).optional().transform((value) => value === 'true'),
  RUNNEL_SEED_DOCS: z.enum(['true', 'false', '']).optional().transform((value) => value !== 'false'),
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'REDIS_URL must start with redis:// or rediss://')
    // Its path is the database number (ioredis would send SELECT NaN for anything else, and fail at start).
    .refine(redisUrlReadable, 'REDIS_URL is not a URL ioredis can read: a port from 1 to 65535, and characters such as # / @ % in the password percent-encoded')
    .refine((url) => /^\/?(\d{1,5})?$/.test(redisUrlPath(url)), 'the database (the path of REDIS_URL) must be a number, as in redis://host:6379/0')
    .optional(),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'DATABASE_URL must start with postgres:// or postgresql://')
    .superRefine((url, ctx) => {
      const problem = databaseUrlProblem(url);
      if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
    })
    .optional(),
  RUNNEL_DATA_DIR: z.string().optional().transform((value) => value || './.runnel'),
});

/**
 * Every `RUNNEL_*` variable Runnel reads: the server's settings above, tracing's content flag, the cluster's
 * mark on the processes it starts, and the four docker-compose reads (the published port, nginx's subnet,
 * the proxies in front of nginx, the stop grace). Any other is a typo or a setting of another version: it
 * changes nothing, and the server says so at start.
 */
export const RUNNEL_SETTINGS: ReadonlySet<string> = new Set([
  ...Object.keys(envSchema.shape).filter((name) => name.startsWith('RUNNEL_')),
  'RUNNEL_TRACE_CONTENT',
  'RUNNEL_CLUSTER_PROCESS',
  'RUNNEL_PORT',
  'RUNNEL_EDGE_SUBNET',
  'RUNNEL_FRONT_PROXIES',
  'RUNNEL_STOP_GRACE_PERIOD',
]);

/** An API key and the identity it stands for. */
export interface ApiKey {
  name: string;
  key: string;
}

/** The server's settings. */
export interface ServerConfig {
  port: number;
  host: string;
  logLevel: string;
  /** Empty: no authentication. */
  apiKeys: ApiKey[];
  /**
   * Names of the API keys that may read `/metrics` (`*`: every key). With keys on and none named, no key may:
   * the series add up every caller's traffic, so reading them is an operator's right, not every caller's.
   */
  metricsKeys: string[];
  /** Empty: no cross-origin access. */
  corsOrigins: string[];
  bodyLimit: number;
  maxBatch: number;
  maxStreams: number;
  /** Streams one caller may hold open at once (0 or at least `maxStreams`: no share of its own). */
  maxStreamsPerKey: number;
  /** Background runs one caller may have pending or running at once, across replicas; 0 is no limit. */
  maxRunsPerKey: number;
  /** Requests per minute per caller; 0 is no limit. */
  rateLimit: number;
  /** Failed authentications per minute per client address before the address is refused for the rest of the minute; 0 is no limit. */
  authFailLimit: number;
  /** Addresses or CIDR ranges of the proxies whose X-Forwarded-For is believed (Fastify's trustProxy); empty: none. */
  trustProxy: string[];
  /** How long a stream may wait for a client that reads nothing before it is cut. */
  streamStallMs: number;
  /** How long a request (headers and body) may take to arrive before it is answered 408 and its connection closed. */
  bodyTimeoutMs: number;
  /** How long open streams may run on after SIGTERM before they get a final frame. */
  shutdownGraceMs: number;
  /** Interval of the SSE comment ping. */
  pingMs: number;
  /** Background runs this process executes at once (0: none here, separate `npm run worker` processes do). */
  workerConcurrency: number;
  /** A worker process's own `/metrics` port (`RUNNEL_WORKER_METRICS_PORT`; 0: none). The HTTP server ignores it. */
  workerMetricsPort: number;
  /** Server processes on this machine (`RUNNEL_PROCESSES`; `auto`: one per core): more than one needs Redis and Postgres. */
  processes: number;
  /** Seconds a run's record and event log are kept. */
  runTtlSeconds: number;
  /** A worker's lock on a run; a run whose worker died is ended `RUNNEL_ERR_RUN_LOST` within about 1.5× this. */
  runLockMs: number;
  /** The Redis key prefix of run records and the BullMQ queue: one per deployment (default `runnel`). */
  runNamespace: string;
  /**
   * Names a server without API keys answers under, besides IP addresses and `localhost` (exact names,
   * `*.example.com`, or `*` for any); with keys, every name is answered.
   */
  allowedHosts: string[];
  /** Hosts run webhooks may call (exact names or `*.example.com`); empty: webhooks off. */
  webhookHosts: string[];
  /** The key webhook deliveries are signed with; unset: webhooks off. */
  webhookSecret?: string | undefined;
  /** Webhooks to http: URLs too (a receiver on a network you trust); default https only. */
  webhookAllowHttp: boolean;
  /** Whether the shipped `docs` collection holds Runnel's own README and docs/ beside the users' (`RUNNEL_SEED_DOCS`, default true). */
  seedDocs: boolean;
  /** Redis for history and the response cache; memory without it. */
  redisUrl?: string | undefined;
  /** Postgres with pgvector for vectors; PGlite in `dataDir` without it. */
  databaseUrl?: string | undefined;
  dataDir: string;
  /** OpenTelemetry tracing, from the standard `OTEL_*` variables; undefined: off. */
  tracing: TracingConfig | undefined;
}

/** The defaults: no auth, no CORS, 1 MiB bodies, batches of 100, 1,000 streams. */
export const DEFAULT_SERVER_CONFIG: ServerConfig = {
  port: 8000,
  host: '127.0.0.1',
  logLevel: 'info',
  apiKeys: [],
  metricsKeys: [],
  corsOrigins: [],
  bodyLimit: 1024 * 1024,
  maxBatch: 100,
  maxStreams: 1000,
  maxStreamsPerKey: 0,
  maxRunsPerKey: 0,
  rateLimit: 0,
  authFailLimit: 20,
  trustProxy: [],
  streamStallMs: 30_000,
  bodyTimeoutMs: 30_000,
  shutdownGraceMs: 5_000,
  pingMs: 15_000,
  workerConcurrency: 8,
  workerMetricsPort: 0,
  processes: 1,
  runTtlSeconds: 86_400,
  runLockMs: 30_000,
  runNamespace: 'runnel',
  allowedHosts: [],
  webhookHosts: [],
  webhookAllowHttp: false,
  seedDocs: true,
  dataDir: './.runnel',
  tracing: undefined,
};

/** `name:key` entries, or bare keys (named `key1`, `key2`, ... after their position). */
function parseKeys(entries: string[]): (ApiKey & { bare: boolean })[] {
  return entries.map((entry, index) => {
    // Spaces around the colon are the list's, not the key's (HTTP strips them from a header, so a key that kept
    // one never matched) nor the name's (`bob ` was another identity than `bob`).
    const colon = entry.indexOf(':');
    if (colon >= 0) return { name: entry.slice(0, colon).trim(), key: entry.slice(colon + 1).trim(), bare: false };
    return { name: `key${index + 1}`, key: entry, bare: true };
  });
}

/**
 * What is wrong with the keys, quoting names but never a key. Two keys under one name would be one identity
 * (one chat history, one rate limit); one key under two names would answer to the first name only.
 */
function keyProblems(keys: readonly (ApiKey & { bare: boolean })[]): string[] {
  // A short "key" usually means the entries are not what they seem (a key split at a colon): say only that, and
  // which entries by position (a newcomer's probe: with several keys, it did not say which). Not by name: the
  // "name" of a key split at a colon is part of the key.
  const short = keys.map((k, i) => (k.key.length < 16 ? i : -1)).filter((i) => i >= 0);
  if (short.length > 0) return [`every key must be at least 16 characters: ${short.map((i) => `entry ${i + 1}`).join(' and ')} ${short.length === 1 ? 'is' : 'are'} shorter`];
  const problems: string[] = [];
  const unnamed = keys.map((k, i) => (k.name === '' ? i : -1)).filter((i) => i >= 0);
  if (unnamed.length > 0) problems.push(`${unnamed.map((i) => `entry ${i + 1}`).join(' and ')}: a name before the colon is empty (write name:key, or the key alone)`);
  // A header cannot carry such a key whole: its callers would get 401 whatever they sent.
  const unsendable = keys.map((k, i) => (/[\s\p{Cc}]/u.test(k.key) ? i : -1)).filter((i) => i >= 0);
  if (unsendable.length > 0) problems.push(`${unsendable.map((i) => `entry ${i + 1}`).join(' and ')}: a key holds no space or control character (a header could not carry it)`);
  const entry = (i: number) => `entry ${i + 1}${keys[i]?.bare ? ` (a bare key, named "${keys[i]?.name}" after its position)` : ''}`;
  const groups = (by: (k: ApiKey) => string) => {
    const seen = new Map<string, number[]>();
    keys.forEach((k, i) => seen.set(by(k), [...(seen.get(by(k)) ?? []), i]));
    return [...seen.values()].filter((indexes) => indexes.length > 1);
  };
  for (const indexes of groups((k) => k.name)) {
    problems.push(`the name "${keys[indexes[0] ?? 0]?.name}" is used by ${indexes.map(entry).join(' and ')}: every key needs its own name, or its callers share one identity and one chat history`);
  }
  for (const indexes of groups((k) => k.key)) {
    problems.push(`${indexes.map(entry).join(' and ')} are the same key: list each key once, under one name`);
  }
  if (keys.some((k) => k.name === 'anonymous')) problems.push('the name "anonymous" is reserved for callers without a key');
  return problems;
}

/** Whether `origin` (a request's `Origin`) is one `RUNNEL_CORS_ORIGINS` lists, or any when it lists `*`. */
export function originListed(corsOrigins: readonly string[], origin: unknown): origin is string {
  return typeof origin === 'string' && (corsOrigins.includes(origin) || corsOrigins.includes('*'));
}

/**
 * What is wrong with the names of the keys that may read `/metrics`: each must be a configured key's name
 * (a typo would lock the scraper out, or name a key added later by someone who did not mean it), or `*`.
 */
export function metricsKeyProblems(apiKeys: readonly ApiKey[], metricsKeys: readonly string[]): string[] {
  const names = new Set(apiKeys.map((k) => k.name));
  const unknown = metricsKeys.map((name, index) => ({ name, index })).filter(({ name }) => name !== '*' && !names.has(name));
  if (unknown.length === 0) return [];
  // An entry is quoted only when it cannot be a key (shorter than any): writing a key where its name goes is
  // an easy mistake, and the message goes to the logs. A key of this server is said to be one, by its name.
  const said = ({ name, index }: { name: string; index: number }): string => {
    const owner = apiKeys.find((k) => k.key === name);
    if (owner !== undefined) return `entry ${index + 1} is the key named ${JSON.stringify(owner.name)} itself, not its name`;
    return name.length < 16 ? JSON.stringify(name) : `entry ${index + 1} (not quoted: it may be a key)`;
  };
  if (apiKeys.length === 0) return [`names keys (${unknown.map(said).join(', ')}), but RUNNEL_API_KEYS is not set: without keys /metrics is open like every route`];
  return [
    `${unknown.map(said).join(', ')}: ${unknown.length === 1 ? 'not the name' : 'not names'} of a key in RUNNEL_API_KEYS (${[...names].map((name) => JSON.stringify(name)).join(', ')})`,
  ];
}

/**
 * Reads the server's settings from `env`, or throws one error naming every
 * bad variable (never echoing an API key).
 *
 * @example
 * const config = loadServerConfig(process.env);
 */
export function loadServerConfig(env: Record<string, string | undefined>): ServerConfig {
  // An empty variable is an unset one (compose passes `${X:-}` for every variable the host may leave out).
  const result = envSchema.safeParse(Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined && value.trim() !== '')));
  if (!result.success) {
    const problems = result.error.issues.map((issue) => `- ${issue.path.join('.') || 'env'}: ${issue.message}`);
    throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Invalid configuration:\n${problems.join('\n')}`);
  }
  const e = result.data;
  const parsedKeys = parseKeys(e.RUNNEL_API_KEYS);
  const problems = keyProblems(parsedKeys);
  if (problems.length > 0) {
    throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Invalid configuration:\n${problems.map((problem) => `- RUNNEL_API_KEYS: ${problem}`).join('\n')}`);
  }
  const apiKeys = parsedKeys.map(({ name, key }) => ({ name, key }));
  const metricsProblems = metricsKeyProblems(apiKeys, e.RUNNEL_METRICS_KEYS);
  if (metricsProblems.length > 0) {
    throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Invalid configuration:\n${metricsProblems.map((problem) => `- RUNNEL_METRICS_KEYS: ${problem}`).join('\n')}`);
  }
  if (e.RUNNEL_PROCESSES > 1 && (e.REDIS_URL === undefined || e.DATABASE_URL === undefined)) {
    const missing = [e.REDIS_URL === undefined ? 'REDIS_URL' : undefined, e.DATABASE_URL === undefined ? 'DATABASE_URL' : undefined].filter((name) => name !== undefined);
    throw new RunnelError(
      'RUNNEL_ERR_INVALID_ARGUMENT',
      `Invalid configuration:\n- RUNNEL_PROCESSES: ${e.RUNNEL_PROCESSES} processes need ${missing.join(' and ')}: ` +
        'the processes share chat histories, runs and the cache through Redis and vectors through Postgres (PGlite is one process\'s database)',
    );
  }
  return {
    port: e.PORT,
    host: e.HOST,
    logLevel: e.LOG_LEVEL,
    apiKeys,
    metricsKeys: e.RUNNEL_METRICS_KEYS,
    corsOrigins: e.RUNNEL_CORS_ORIGINS,
    bodyLimit: e.RUNNEL_BODY_LIMIT,
    maxBatch: e.RUNNEL_MAX_BATCH,
    maxStreams: e.RUNNEL_MAX_STREAMS,
    maxStreamsPerKey: e.RUNNEL_MAX_STREAMS_PER_KEY,
    maxRunsPerKey: e.RUNNEL_MAX_RUNS_PER_KEY,
    rateLimit: e.RUNNEL_RATE_LIMIT,
    authFailLimit: e.RUNNEL_AUTH_FAIL_LIMIT,
    trustProxy: e.RUNNEL_TRUST_PROXY,
    streamStallMs: e.RUNNEL_STREAM_STALL_MS,
    bodyTimeoutMs: e.RUNNEL_BODY_TIMEOUT_MS,
    shutdownGraceMs: e.RUNNEL_SHUTDOWN_GRACE_MS,
    pingMs: e.RUNNEL_PING_MS,
    workerConcurrency: e.RUNNEL_WORKER_CONCURRENCY,
    workerMetricsPort: e.RUNNEL_WORKER_METRICS_PORT,
    processes: e.RUNNEL_PROCESSES,
    runTtlSeconds: e.RUNNEL_RUN_TTL,
    runLockMs: e.RUNNEL_RUN_LOCK_MS,
    runNamespace: e.RUNNEL_RUN_NAMESPACE,
    allowedHosts: e.RUNNEL_ALLOWED_HOSTS.map((host) => host.toLowerCase()),
    webhookHosts: e.RUNNEL_WEBHOOK_HOSTS.map((host) => host.toLowerCase()),
    webhookSecret: e.RUNNEL_WEBHOOK_SECRET,
    webhookAllowHttp: e.RUNNEL_WEBHOOK_ALLOW_HTTP,
    seedDocs: e.RUNNEL_SEED_DOCS,
    redisUrl: e.REDIS_URL,
    databaseUrl: e.DATABASE_URL,
    dataDir: e.RUNNEL_DATA_DIR,
    tracing: loadTracingConfig(env),
  };
}
