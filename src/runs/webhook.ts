/**
 * Webhooks of background runs: when a run ends, one POST of its record to
 * the URL given at submission, signed with `RUNNEL_WEBHOOK_SECRET`
 * (`x-runnel-signature: sha256=<hex HMAC of "<timestamp>.<body>">`, the
 * timestamp in `x-runnel-timestamp`), retried with backoff while the
 * receiver fails. Only https URLs on the hosts of `RUNNEL_WEBHOOK_HOSTS` are
 * called — checked at submission and again before each attempt — and
 * redirects are never followed, so a run cannot make the server call
 * anything else (no SSRF through a webhook).
 */
import { createHmac } from 'node:crypto';
import { RunnelError, sleep } from '../core/index.js';

/** Who may be called, and how. */
export interface WebhookPolicy {
  /** Host names (exact, lower case) or `*.example.com` suffix patterns, each maybe with its one port. Empty: webhooks are off. */
  hosts: string[];
  secret: string | undefined;
  /** `http:` allowed too (tests, a receiver on a private network you trust); default only `https:`. */
  allowHttp?: boolean;
}

const hostMatches = (host: string, pattern: string): boolean =>
  pattern.startsWith('*.') ? host.endsWith(pattern.slice(1)) && host.length > pattern.length - 1 : host === pattern;

/**
 * Whether `url`'s host is allowed on its port: an entry without a port allows the scheme's default port only,
 * one with a port (`hooks.example.com:8443`) the URLs that reach that port, written or by default — a listed
 * host's other services (an admin API, a database) are not reachable by naming their port.
 */
function hostAllowed(url: URL, patterns: readonly string[]): boolean {
  const host = url.hostname.toLowerCase();
  const port = url.port === '' ? (url.protocol === 'https:' ? '443' : '80') : url.port;
  return patterns.some((entry) => {
    const at = /:(\d{1,5})$/.exec(entry);
    return at === null ? url.port === '' && hostMatches(host, entry) : port === at[1] && hostMatches(host, entry.slice(0, at.index));
  });
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
  if (!hostAllowed(url, policy.hosts)) {
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
}

/**
 * Posts `body` to `url` until a 2xx answer, at most `attempts` times, waiting
 * `backoffMs`, doubling, between attempts. A 3xx counts as a failure (never
 * followed); so does a 4xx other than 408 and 429, without retrying.
 *
 * @example
 * await deliverWebhook(url, JSON.stringify(record), policy);
 */
export async function deliverWebhook(
  target: string,
  body: string,
  policy: WebhookPolicy,
  options: { attempts?: number; backoffMs?: number; timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<WebhookDelivery> {
  const attempts = options.attempts ?? 5;
  let wait = options.backoffMs ?? 1_000;
  let status: number | undefined;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    const url = checkWebhookUrl(target, policy);
    const timestamp = Math.floor(Date.now() / 1000);
    try {
      const response = await fetch(url, {
        method: 'POST',
        redirect: 'manual',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'runnel-webhook',
          'x-runnel-timestamp': String(timestamp),
          'x-runnel-signature': signWebhook(body, policy.secret as string, timestamp),
        },
        body,
        signal: AbortSignal.any([AbortSignal.timeout(options.timeoutMs ?? 10_000), ...(options.signal === undefined ? [] : [options.signal])]),
      });
      status = response.status;
      await response.body?.cancel().catch(() => undefined);
      if (status >= 200 && status < 300) return { delivered: true, attempts: attempt, status };
      if (status >= 300 && status < 500 && status !== 408 && status !== 429) return { delivered: false, attempts: attempt, status };
    } catch {
      status = undefined;
    }
    if (attempt < attempts) {
      await sleep(wait, options.signal);
      wait *= 2;
    }
  }
  return { delivered: false, attempts, status };
}
