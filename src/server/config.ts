/**
 * The server's configuration, from environment variables, validated at
 * start: every bad value is named in one error. README's configuration table
 * lists the same variables.
 */
import { z } from 'zod';
import { RunnelError } from '../core/index.js';

const integer = (name: string, min: number, fallback: number) =>
  z
    .string()
    .optional()
    .transform((value, ctx) => {
      if (value === undefined || value.trim() === '') return fallback;
      const n = Number(value);
      if (!Number.isInteger(n) || n < min) {
        ctx.addIssue({ code: 'custom', message: `${name} must be a whole number ≥ ${min}, got ${JSON.stringify(value)}` });
        return z.NEVER;
      }
      return n;
    });

const list = z
  .string()
  .optional()
  .transform((value) => (value ?? '').split(',').map((item) => item.trim()).filter((item) => item !== ''));

const envSchema = z.object({
  PORT: integer('PORT', 0, 8000),
  HOST: z.string().optional().transform((value) => value || '0.0.0.0'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).optional().default('info'),
  RUNNEL_API_KEYS: list,
  RUNNEL_CORS_ORIGINS: list,
  RUNNEL_BODY_LIMIT: integer('RUNNEL_BODY_LIMIT', 1024, 1024 * 1024),
  RUNNEL_MAX_BATCH: integer('RUNNEL_MAX_BATCH', 1, 100),
  RUNNEL_MAX_STREAMS: integer('RUNNEL_MAX_STREAMS', 1, 1000),
  RUNNEL_RATE_LIMIT: integer('RUNNEL_RATE_LIMIT', 0, 0),
  RUNNEL_STREAM_STALL_MS: integer('RUNNEL_STREAM_STALL_MS', 100, 30_000),
  RUNNEL_SHUTDOWN_GRACE_MS: integer('RUNNEL_SHUTDOWN_GRACE_MS', 0, 5_000),
  RUNNEL_PING_MS: integer('RUNNEL_PING_MS', 100, 15_000),
  REDIS_URL: z.string().regex(/^rediss?:\/\//, 'REDIS_URL must start with redis:// or rediss://').optional(),
  DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, 'DATABASE_URL must start with postgres:// or postgresql://').optional(),
  RUNNEL_DATA_DIR: z.string().optional().transform((value) => value || './.runnel'),
});

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
  /** Empty: no cross-origin access. */
  corsOrigins: string[];
  bodyLimit: number;
  maxBatch: number;
  maxStreams: number;
  /** Requests per minute per caller; 0 is no limit. */
  rateLimit: number;
  /** How long a stream may wait for a client that reads nothing before it is cut. */
  streamStallMs: number;
  /** How long open streams may run on after SIGTERM before they get a final frame. */
  shutdownGraceMs: number;
  /** Interval of the SSE comment ping. */
  pingMs: number;
  /** Redis for history and the response cache; memory without it. */
  redisUrl?: string | undefined;
  /** Postgres with pgvector for vectors; PGlite in `dataDir` without it. */
  databaseUrl?: string | undefined;
  dataDir: string;
}

/** The defaults: no auth, no CORS, 1 MiB bodies, batches of 100, 1,000 streams. */
export const DEFAULT_SERVER_CONFIG: ServerConfig = {
  port: 8000,
  host: '0.0.0.0',
  logLevel: 'info',
  apiKeys: [],
  corsOrigins: [],
  bodyLimit: 1024 * 1024,
  maxBatch: 100,
  maxStreams: 1000,
  rateLimit: 0,
  streamStallMs: 30_000,
  shutdownGraceMs: 5_000,
  pingMs: 15_000,
  dataDir: './.runnel',
};

/** `name:key` entries, or bare keys (named `key1`, `key2`, ...). */
function parseKeys(entries: string[]): ApiKey[] {
  return entries.map((entry, index) => {
    const colon = entry.indexOf(':');
    if (colon > 0) return { name: entry.slice(0, colon), key: entry.slice(colon + 1) };
    return { name: `key${index + 1}`, key: entry };
  });
}

/**
 * Reads the server's settings from `env`, or throws one error naming every
 * bad variable (never echoing an API key).
 *
 * @example
 * const config = loadServerConfig(process.env);
 */
export function loadServerConfig(env: Record<string, string | undefined>): ServerConfig {
  const result = envSchema.safeParse(env);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => `- ${issue.path.join('.') || 'env'}: ${issue.message}`);
    throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Invalid configuration:\n${problems.join('\n')}`);
  }
  const e = result.data;
  const apiKeys = parseKeys(e.RUNNEL_API_KEYS);
  if (apiKeys.some((k) => k.key.length < 16)) {
    throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'Invalid configuration:\n- RUNNEL_API_KEYS: every key must be at least 16 characters');
  }
  return {
    port: e.PORT,
    host: e.HOST,
    logLevel: e.LOG_LEVEL,
    apiKeys,
    corsOrigins: e.RUNNEL_CORS_ORIGINS,
    bodyLimit: e.RUNNEL_BODY_LIMIT,
    maxBatch: e.RUNNEL_MAX_BATCH,
    maxStreams: e.RUNNEL_MAX_STREAMS,
    rateLimit: e.RUNNEL_RATE_LIMIT,
    streamStallMs: e.RUNNEL_STREAM_STALL_MS,
    shutdownGraceMs: e.RUNNEL_SHUTDOWN_GRACE_MS,
    pingMs: e.RUNNEL_PING_MS,
    redisUrl: e.REDIS_URL,
    databaseUrl: e.DATABASE_URL,
    dataDir: e.RUNNEL_DATA_DIR,
  };
}
