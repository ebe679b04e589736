/**
 * Webhooks of background runs: when a run ends, one POST of its record to
 * the URL given at submission, signed with `RUNNEL_WEBHOOK_SECRET`
 * (`x-runnel-signature: sha256=<hex HMAC of "<timestamp>.<body>">`, the
 * timestamp in `x-runnel-timestamp`), retried with backoff while the
 * receiver fails. Only https URLs on the hosts of `RUNNEL_WEBHOOK_HOSTS` are
 * called — checked at submission and again before each attempt — and
 * redirects are never followed, so a run cannot make the server call
 * anything else (no SSRF through a webhook). A host allowed only by a
 * pattern (`*.example.com`) must resolve to public addresses, checked on the
 * address the connection is made to: whoever runs a name under the pattern
 * cannot point it at the server's own network.
 */
import { createHmac } from 'node:crypto';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { RunnelError, sleep, type Cancellation } from '../core/index.js';

/** Who may be called, and how. */
export interface WebhookPolicy {
  /** Host names (exact, lower case) or `*.example.com` suffix patterns, each maybe with its one port. Empty: webhooks are off. */
  hosts: string[];
  secret: string | undefined;
  /** `http:` allowed too (tests, a receiver on a private network you trust); default only `https:`. */
  allowHttp?: boolean;
  /** How host names are resolved (`dns.lookup`; tests hand in their own). */
  lookup?: typeof dnsLookup;
}

/**
 * Whether a host name matches a list's entry: the same name, or for `*.example.com` a name under it (not
 * `example.com` itself). Both lower case; `RUNNEL_ALLOWED_HOSTS` and `RUNNEL_WEBHOOK_HOSTS` match this way.
 *
 * @example
 * matchesHost('hooks.example.com', '*.example.com'); // true
 * matchesHost('example.com', '*.example.com'); // false
 */
export function matchesHost(name: string, entry: string): boolean {
  return entry.startsWith('*.') ? name.endsWith(entry.slice(1)) && name.length > entry.length - 1 : name === entry;
}

/**
 * The entries that allow `url`'s host on its port: an entry without a port allows the scheme's default port
 * only, one with a port (`hooks.example.com:8443`) the URLs that reach that port, written or by default — a
 * listed host's other services (an admin API, a database) are not reachable by naming their port.
 */
function entriesAllowing(url: URL, patterns: readonly string[]): string[] {
  const host = url.hostname.toLowerCase();
  const port = url.port === '' ? (url.protocol === 'https:' ? '443' : '80') : url.port;
  return patterns.filter((entry) => {
    const at = /:(\d{1,5})$/.exec(entry);
    return at === null ? url.port === '' && matchesHost(host, entry) : port === at[1] && matchesHost(host, entry.slice(0, at.index));
  });
}

/**
 * Addresses a host allowed only by a pattern may not resolve to: this host, private and shared networks,
 * link-local (a cloud's metadata service at 169.254.169.254), benchmarking, documentation, multicast and
 * reserved ranges, IPv4-mapped and NAT64 forms (which reach IPv4 ones).
 */
const NOT_PUBLIC = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12], ['192.0.0.0', 24],
  ['192.0.2.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) NOT_PUBLIC.addSubnet(network, prefix, 'ipv4');
// IPv6: unspecified and loopback, IPv4-compatible (::/96) and translated (::ffff:0:0:0/96) forms, NAT64, discard,
// Teredo and 6to4 (tunnels that reach IPv4 addresses), benchmarking, ORCHIDv2, documentation (both blocks), SRv6
// SIDs, unique-local, link- and site-local, multicast.
for (const [network, prefix] of [
  ['::', 96], ['::ffff:0:0:0', 96], ['64:ff9b::', 96], ['64:ff9b:1::', 48], ['100::', 64], ['2001::', 32], ['2001:2::', 48], ['2001:20::', 28],
  ['2001:db8::', 32], ['2002::', 16], ['3fff::', 20], ['5f00::', 16], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8],
] as const) {
  NOT_PUBLIC.addSubnet(network, prefix, 'ipv6');
}

/** Whether `address` (an IP address) is on the public internet, as far as a webhook may tell. */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return !NOT_PUBLIC.check(address, 'ipv4');
  // A scoped address (fe80::1%eth0) is link-local whatever its scope; the URL parser takes no scope.
  if (family !== 6 || address.includes('%')) return false;
  // An IPv4-mapped address (::ffff:127.0.0.1) is the IPv4 address it carries. (A BlockList matches IPv4
  // addresses against a rule for the mapped range, so that range cannot be a rule here.) The URL parser
  // writes every spelling of one the same way: ::ffff:7f00:1.
  const mapped = /^\[::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})\]$/.exec(new URL(`http://[${address}]`).hostname);
  if (mapped !== null) {
    const [high, low] = [Number.parseInt(mapped[1] as string, 16), Number.parseInt(mapped[2] as string, 16)];
    return isPublicAddress(`${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`);
  }
  return !NOT_PUBLIC.check(address, 'ipv6');
}

/** A webhook host that resolved to an address it may not be called at. */
class NotPublicAddress extends Error {}

/** `lookup`, refusing a name any of whose addresses is not public (a mixed answer would be tried in turn). */
function publicOnly(lookup: typeof dnsLookup): LookupFunction {
  return (hostname, options, callback) => {
    lookup(hostname, { ...options, all: true }, (error, found) => {
      const addresses = found as unknown as LookupAddress[] | undefined;
      if (error !== null || addresses === undefined) return callback(error ?? new Error(`${hostname} did not resolve`), '', 0);
      const refused = addresses.find((entry) => !isPublicAddress(entry.address)) ?? (addresses.length === 0 ? { address: 'no address' } : undefined);
      if (refused !== undefined) {
        return callback(new NotPublicAddress(`${hostname} resolves to ${refused.address}, not a public address (a host allowed by a pattern of RUNNEL_WEBHOOK_HOSTS must be; list the name itself to allow it)`), '', 0);
      }
      const first = addresses[0] as LookupAddress;
      // Node asks for every address when it races IPv4 and IPv6 (autoSelectFamily), for one otherwise.
      if (options.all === true) (callback as unknown as (error: null, addresses: LookupAddress[]) => void)(null, addresses);
      else callback(null, first.address, first.family);
    });
  };
}

/**
 * The webhook URL, checked against the policy, or `RUNNEL_ERR_WEBHOOK_NOT_ALLOWED`.
 *
 * @example
 * checkWebhookUrl('https://hooks.example.com/runnel', { hosts: ['hooks.example.com'], secret: 's3cret' });
 */
export function checkWebhookUrl(value: unknown, policy: WebhookPolicy): URL {
  const refuse = (why: string): RunnelError =>
    new RunnelError('RUNNEL_ERR_WEBHOOK_NOT_ALLOWED', `webhook ${why}`, { detail: [{ type: 'value_error', loc: ['webhook'], msg: `webhook ${why}` }] });
  if (policy.hosts.length === 0 || policy.secret === undefined || policy.secret === '') throw refuse('is off on this server (RUNNEL_WEBHOOK_HOSTS and RUNNEL_WEBHOOK_SECRET are unset)');
  if (typeof value !== 'string' || value.length > 2048) throw refuse('must be a URL string');
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw refuse('must be a URL');
  }
  if (url.protocol !== 'https:' && !(policy.allowHttp === true && url.protocol === 'http:')) throw refuse('must be an https URL');
  if (url.username !== '' || url.password !== '') throw refuse('must not carry credentials');
  if (entriesAllowing(url, policy.hosts).length === 0) {
    throw refuse(url.port === '' ? `host ${url.hostname} is not in RUNNEL_WEBHOOK_HOSTS` : `host ${url.hostname} on port ${url.port} is not in RUNNEL_WEBHOOK_HOSTS (an entry allows the scheme's default port, or the one it names: ${url.hostname}:${url.port})`);
  }
  return url;
}

/** The signature header's value for `body` sent at `timestamp` (seconds). */
export function signWebhook(body: string, secret: string, timestamp: number): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/** How a delivery went. */
export interface WebhookDelivery {
  delivered: boolean;
  attempts: number;
  status?: number | undefined;
  /** Why the receiver was not called at all (a host allowed by a pattern that resolved to a private address). */
  refused?: string | undefined;
  /** Why the last attempt got no answer: the error's code (`ECONNREFUSED`, `ENOTFOUND`, a TLS code, `timeout`). */
  error?: string | undefined;
  /** The wait the receiver last asked for (`Retry-After`, ms) when it was longer than a delivery waits: it was not called again. */
  retryAfterMs?: number | undefined;
}

/** The longest `Retry-After` a delivery waits for before its next attempt; a receiver that asks more is not called again. */
export const MAX_RETRY_AFTER_MS = 60_000;

/**
 * A `Retry-After` header's wait in milliseconds: delta-seconds, or an HTTP date (in the past: 0). Undefined
 * when there is none or it cannot be read.
 *
 * @example
 * retryAfterMs('30'); // 30000
 * retryAfterMs('Wed, 21 Oct 2026 07:28:00 GMT', now); // the time from now until then
 */
export function retryAfterMs(value: string | undefined, now: number = Date.now()): number | undefined {
  const text = value?.trim();
  if (text === undefined || text === '') return undefined;
  if (/^\d{1,9}$/.test(text)) return Number(text) * 1000;
  // Only a date as HTTP writes one: `Date.parse` reads much else (`1.5` is a day in 2001).
  const at = /^[A-Za-z]{3}, \d{2} [A-Za-z]{3} \d{4} \d{2}:\d{2}:\d{2} GMT$/.test(text) ? Date.parse(text) : Number.NaN;
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * What the receiver of a run's webhook is sent: the run's record (as the API shows it), the caller that
 * submitted the run and the URL it named. One secret signs every delivery, so a signature alone says only
 * that this server sent it: a receiver checks that `caller` and `webhook_url` are its own — a caller cannot
 * make the server send a signed record of its run, output of its choosing, to someone else's receiver as
 * if it were theirs.
 *
 * @example
 * webhookBody(publicRun(record), record.identity, record.webhook);
 */
export function webhookBody(run: Record<string, unknown>, caller: string, url: string): string {
  return JSON.stringify({ ...run, caller, webhook_url: url });
}

/** The code of a failed attempt's error, never its message (it can quote the URL's query). */
function failureCode(error: unknown): string {
  if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')) return 'timeout';
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{1,64}$/.test(code) ? code : 'error';
}

/** The answer to one attempt: its status, and the wait it asked for before another. */
interface Answer {
  status: number;
  retryAfter: string | undefined;
}

/** One POST; its answer's status and `Retry-After` (the body is not read). */
function post(url: URL, headers: Record<string, string>, body: string, signal: AbortSignal, lookup: LookupFunction | undefined): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    // A connection of its own (no agent): a kept-alive socket would skip the lookup that checks the address.
    const request = send(url, { method: 'POST', headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) }, signal, agent: false, ...(lookup === undefined ? {} : { lookup }) }, (response: IncomingMessage) => {
      const retryAfter = response.headers['retry-after'];
      resolve({ status: response.statusCode ?? 0, retryAfter });
      response.destroy();
    });
    request.on('error', reject);
    request.end(body);
  });
}

/**
 * Posts `body` to `url` until a 2xx answer, at most `attempts` times, waiting
 * `backoffMs`, doubling, between attempts — or the receiver's `Retry-After`
 * when it asks for longer, up to `maxRetryAfterMs` (a receiver that asks for
 * more is not called again). A 3xx counts as a failure (never followed); so
 * does a 4xx other than 408 and 429, without retrying, and a host allowed by
 * a pattern that resolves to an address that is not public. `pause` waits
 * between attempts (a {@link DeliveryLimiter}'s turn gives its place up
 * meanwhile); by default a sleep.
 *
 * @example
 * await deliverWebhook(url, JSON.stringify(record), policy);
 */
export async function deliverWebhook(
  target: string,
  body: string,
  policy: WebhookPolicy,
  options: {
    attempts?: number;
    backoffMs?: number;
    timeoutMs?: number;
    maxRetryAfterMs?: number;
    signal?: AbortSignal;
    id?: string;
    pause?: (ms: number, signal?: Cancellation) => Promise<void>;
  } = {},
): Promise<WebhookDelivery> {
  const attempts = options.attempts ?? 5;
  const pause = options.pause ?? sleep;
  let wait = options.backoffMs ?? 1_000;
  let status: number | undefined;
  let failure: string | undefined;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    const url = checkWebhookUrl(target, policy);
    // A host the operator named (or an IP address) is called wherever it is; one a pattern allows, only in public.
    const named = entriesAllowing(url, policy.hosts).some((entry) => !entry.startsWith('*.'));
    const timestamp = Math.floor(Date.now() / 1000);
    let asked: number | undefined;
    try {
      const answer = await post(
        url,
        {
          'content-type': 'application/json',
          'user-agent': 'runnel-webhook',
          'x-runnel-timestamp': String(timestamp),
          'x-runnel-signature': signWebhook(body, policy.secret as string, timestamp),
          // The same on every attempt: a receiver that got an attempt whose answer was lost takes the retry once.
          ...(options.id === undefined ? {} : { 'x-runnel-webhook-id': options.id }),
        },
        body,
        AbortSignal.any([AbortSignal.timeout(options.timeoutMs ?? 10_000), ...(options.signal === undefined ? [] : [options.signal])]),
        named ? (policy.lookup as LookupFunction | undefined) : publicOnly(policy.lookup ?? dnsLookup),
      );
      status = answer.status;
      failure = undefined;
      if (status >= 200 && status < 300) return { delivered: true, attempts: attempt, status };
      if (status >= 300 && status < 500 && status !== 408 && status !== 429) return { delivered: false, attempts: attempt, status };
      // A receiver that is busy may say for how long (a 429 or a 503, as a rule): it is not called again sooner.
      asked = retryAfterMs(answer.retryAfter);
      if (asked !== undefined && asked > (options.maxRetryAfterMs ?? MAX_RETRY_AFTER_MS)) return { delivered: false, attempts: attempt, status, retryAfterMs: asked };
    } catch (error) {
      if (error instanceof NotPublicAddress) return { delivered: false, attempts: attempt, refused: error.message };
      status = undefined;
      failure = failureCode(error);
    }
    if (attempt < attempts) {
      await pause(Math.max(wait, asked ?? 0), options.signal);
      wait *= 2;
    }
  }
  return { delivered: false, attempts, status, ...(failure === undefined ? {} : { error: failure }) };
}

/**
 * How many webhook deliveries a process makes at once, and how many it keeps waiting: each attempt holds a
 * socket for up to its timeout (10 s), and a caller could end thousands of runs a minute. A caller has a
 * share of the turns under way, and the callers waiting take turns, so one caller's silent receiver does not
 * hold up the others' deliveries. Between its attempts a delivery gives its turn up and waits in the waiting
 * room. Past the waiting room — or past a caller's own share of it — a delivery is dropped (and logged).
 */
export interface DeliveryLimits {
  /** Deliveries under way at once (default 32). */
  concurrent: number;
  /** Deliveries one caller may have under way at once (default 8). */
  concurrentPerCaller: number;
  /** Deliveries waiting for a turn, or for their next attempt (default 2,000). */
  queued: number;
  /** Deliveries one caller may have under way or waiting (default 200). */
  perCaller: number;
}

export const DEFAULT_DELIVERY_LIMITS: DeliveryLimits = { concurrent: 32, concurrentPerCaller: 8, queued: 2_000, perCaller: 200 };

/** One caller's deliveries: under way, held (under way or waiting), and the turns it waits for. */
interface CallerDeliveries {
  active: number;
  held: number;
  waiting: (() => void)[];
}

/** What a delivery under way is handed with its turn. */
export interface DeliveryTurn {
  /** Waits `ms` (a retry's backoff) with the turn given up meanwhile, then waits for the caller's next turn. */
  pause(ms: number, signal?: Cancellation): Promise<void>;
}

/**
 * Runs deliveries within {@link DeliveryLimits}: `run(caller, work)` starts `work` when a turn is free —
 * callers in turn, each caller's in the order asked; undefined (and `work` never runs) when it does not fit.
 * A delivery that pauses between attempts (`turn.pause`) stays in its caller's share and in the waiting room,
 * and comes back first in its caller's line.
 *
 * @example
 * const limiter = new DeliveryLimiter();
 * const done = limiter.run(record.identity, (turn) => deliverWebhook(url, body, policy, { pause: turn.pause }));
 */
export class DeliveryLimiter {
  private active = 0;
  /** Waiting for a turn, or pausing between attempts. */
  private waiting = 0;
  /** Callers with deliveries; the order is the turn (a caller that starts one goes to the back). */
  private readonly callers = new Map<string, CallerDeliveries>();

  private readonly limits: DeliveryLimits;

  constructor(limits: DeliveryLimits = DEFAULT_DELIVERY_LIMITS) {
    // At least one under way, at once and per caller: with none, every delivery would wait forever.
    this.limits = { ...limits, concurrent: Math.max(1, limits.concurrent || 1), concurrentPerCaller: Math.max(1, limits.concurrentPerCaller || 1) };
  }

  run<T>(caller: string, work: (turn: DeliveryTurn) => Promise<T>): Promise<T> | undefined {
    let mine = this.callers.get(caller);
    if (mine !== undefined && mine.held >= this.limits.perCaller) return undefined;
    const now = this.free(mine);
    if (!now && this.waiting >= this.limits.queued) return undefined;
    if (mine === undefined) this.callers.set(caller, (mine = { active: 0, held: 0, waiting: [] }));
    const own = mine;
    own.held++;
    let turn: Promise<void>;
    if (now) {
      this.take(own);
      turn = Promise.resolve();
    } else {
      this.waiting++;
      turn = new Promise<void>((resolve) => own.waiting.push(resolve));
    }
    const pause = async (ms: number, signal?: Cancellation): Promise<void> => {
      this.active--;
      own.active--;
      this.waiting++;
      this.next();
      try {
        await sleep(ms, signal);
      } catch (error) {
        // Called off: the delivery ends at once, so it takes its place back whatever the limits say.
        this.waiting--;
        this.active++;
        own.active++;
        throw error;
      }
      if (this.free(own)) {
        this.waiting--;
        this.take(own);
      } else {
        await new Promise<void>((resolve) => own.waiting.unshift(resolve));
      }
    };
    return turn.then(() => work({ pause })).finally(() => {
      this.active--;
      own.active--;
      own.held--;
      // The caller whose delivery ended goes to the back of the turn (and out, with nothing left).
      if (this.callers.get(caller) === own) {
        this.callers.delete(caller);
        if (own.held > 0) this.callers.set(caller, own);
      }
      this.next();
    });
  }

  /** Whether a turn is free for the caller now. */
  private free(own: CallerDeliveries | undefined): boolean {
    return this.active < this.limits.concurrent && (own?.active ?? 0) < this.limits.concurrentPerCaller;
  }

  private take(own: CallerDeliveries): void {
    this.active++;
    own.active++;
  }

  /** Gives the free turns to the callers waiting, one each in turn. */
  private next(): void {
    while (this.active < this.limits.concurrent && this.waiting > 0) {
      let given = false;
      for (const [caller, deliveries] of this.callers) {
        if (deliveries.waiting.length === 0 || deliveries.active >= this.limits.concurrentPerCaller) continue;
        const start = deliveries.waiting.shift() as () => void;
        this.waiting--;
        this.take(deliveries);
        // To the back of the turn.
        this.callers.delete(caller);
        this.callers.set(caller, deliveries);
        start();
        given = true;
        break;
      }
      if (!given) return;
    }
  }

  /** Deliveries under way, and waiting (for a turn, or for their next attempt). */
  get size(): { active: number; waiting: number } {
    return { active: this.active, waiting: this.waiting };
  }
}
