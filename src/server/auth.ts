/**
 * API keys: `authorization: Bearer <key>` or `x-api-key: <key>` (both only when they agree), compared in
 * constant time against every configured key (no early exit, so timing says
 * nothing about which key or how much of it matched).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { RunnelError } from '../core/index.js';
import type { AuthThrottle } from './auth-throttle.js';
import type { ApiKey, ServerConfig } from './config.js';

const digest = (value: string): Buffer => createHash('sha256').update(value, 'utf8').digest();

/** Checks presented credentials against the configured keys. */
export class KeyRing {
  private readonly keys: { name: string; digest: Buffer }[];

  constructor(keys: readonly ApiKey[]) {
    this.keys = keys.map((k) => ({ name: k.name, digest: digest(k.key) }));
  }

  get enabled(): boolean {
    return this.keys.length > 0;
  }

  /** The identity of the key in the request's headers, or undefined. */
  identify(headers: Readonly<Record<string, string | string[] | undefined>>): string | undefined {
    const authorization = headers.authorization;
    const bearer = typeof authorization === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1] : undefined;
    const header = headers['x-api-key'];
    const apiKey = typeof header === 'string' ? header.trim() : undefined;
    // Two different keys say two identities: neither is taken (a proxy adding its own key beside the client's
    // would otherwise decide silently which one the request runs as).
    if (bearer !== undefined && apiKey !== undefined && apiKey !== '' && apiKey !== bearer) return undefined;
    const presented = bearer ?? apiKey;
    if (presented === undefined || presented === '') return undefined;
    const candidate = digest(presented);
    let match: string | undefined;
    for (const key of this.keys) {
      if (timingSafeEqual(candidate, key.digest) && match === undefined) match = key.name;
    }
    return match;
  }
}

/**
 * Why key `identity` may not read `/metrics`, or undefined when it may: with keys on, only the keys
 * `RUNNEL_METRICS_KEYS` names (or `*`, every key) — the series add up every caller's traffic.
 *
 * @example
 * metricsRefusal({ metricsKeys: ['prometheus'] }, 'ada'); // 'The key "ada" may not read /metrics: …'
 */
export function metricsRefusal(config: Pick<ServerConfig, 'metricsKeys'>, identity: string): string | undefined {
  if (config.metricsKeys.includes('*') || config.metricsKeys.includes(identity)) return undefined;
  return `The key "${identity}" may not read /metrics: only the keys named in RUNNEL_METRICS_KEYS may (the series add up every caller's traffic)`;
}

/** What a request's key says: whose it is, or why the request is refused and the headers that go with that. */
export type KeyCheck = { identity: string; refusal?: undefined } | { identity?: undefined; refusal: RunnelError; headers: Record<string, string> };

/**
 * The key rule of every route that needs a key (the server's, a worker's `/metrics`): a client network over its
 * failed authentications is refused (429) before its key is looked at, right or wrong; a key presented and wrong
 * counts as a guess, none at all does not (a page's first requests, before it asks for a key, locked the right
 * key out of a few tabs); either is a 401.
 *
 * @example
 * const checked = checkKey(keys, throttle, clientNetwork(request.ip), request.headers);
 * if (checked.refusal !== undefined) throw checked.refusal;
 */
export function checkKey(keys: KeyRing, throttle: AuthThrottle | undefined, network: string, headers: Readonly<Record<string, string | string[] | undefined>>): KeyCheck {
  const waitMs = throttle?.blockedFor(network) ?? 0;
  if (waitMs > 0) {
    const seconds = Math.ceil(waitMs / 1000);
    return { refusal: new RunnelError('RUNNEL_ERR_RATE_LIMITED', `Too many failed authentications from this address; retry in ${seconds} s`), headers: { 'retry-after': String(seconds) } };
  }
  const identity = keys.identify(headers);
  if (identity !== undefined) return { identity };
  if (headers.authorization !== undefined || headers['x-api-key'] !== undefined) throttle?.fail(network);
  return { refusal: new RunnelError('RUNNEL_ERR_UNAUTHORIZED', 'Missing or invalid API key (send authorization: Bearer <key> or x-api-key)'), headers: { 'www-authenticate': 'Bearer' } };
}
