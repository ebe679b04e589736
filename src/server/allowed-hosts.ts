/**
 * DNS rebinding. A server without API keys trusts whoever reaches it, and a
 * page on any site can reach one on the developer's machine: it points its
 * own name at 127.0.0.1, and its requests are then same-origin to the
 * browser, JSON bodies and read answers included. What gives it away is the
 * `Host` header, which carries the page's name. So a server without keys
 * answers only under names that cannot be rebound — IP addresses,
 * `localhost` and `*.localhost` — and those the operator lists in
 * `RUNNEL_ALLOWED_HOSTS`, as development servers (Vite, webpack's) do.
 */
import { isIP } from 'node:net';
import { matchesHost } from '../runs/index.js';

/**
 * The name in a Host header: lower case, without its port or one trailing dot; an IPv6 address keeps its
 * brackets. Undefined when the header is no host with an optional port (`[::1]evil.test`,
 * `127.0.0.1:80@evil.test`, which a browser never sends).
 */
function hostOf(header: string): string | undefined {
  // An IPv6 address may carry a zone (`[fe80::1%eth0]`); a port may be empty (RFC 7230: `port = *DIGIT`).
  const match = /^(\[[0-9a-f:.]+(?:%[\w.-]+)?\]|[^\s[\]:/@?#%]+)(?::\d{0,5})?$/.exec(header.trim().toLowerCase());
  if (match === null) return undefined;
  const name = match[1] as string;
  return name.endsWith('.') ? name.slice(0, -1) : name;
}

/** The name in a Host header as {@link hostOf} reads it, or the header itself when it is none (for messages). */
export function hostName(header: string): string {
  return hostOf(header) ?? header.trim();
}

/** Whether a host name cannot be a rebound one: an IP address, `localhost` or a name under it (RFC 6761). */
function unrebindable(name: string): boolean {
  if (name.startsWith('[') && name.endsWith(']')) return isIP(name.slice(1, -1)) === 6;
  return isIP(name) === 4 || name === 'localhost' || name.endsWith('.localhost');
}

/**
 * A check of Host headers for a server without keys: true when the request may be served. A request
 * without a Host (HTTP/1.0; a browser always sends one) is served.
 *
 * @example
 * const allowed = hostCheck(['runnel.internal']);
 * allowed('127.0.0.1:8000'); // true
 * allowed('attacker.example:8000'); // false
 */
export function hostCheck(allowed: readonly string[]): (header: string | undefined) => boolean {
  const decide = (header: string): boolean => {
    const name = hostOf(header);
    // A malformed Host names nothing: only `*` (any name) lets it through.
    if (name === undefined) return allowed.includes('*');
    return unrebindable(name) || allowed.some((entry) => matchesHost(name, entry));
  };
  // A server hears a few Host values, each at every request: their answers are kept (the headers are the
  // clients', so a bounded few of short ones), which spares the parse on the hot path.
  const known = new Map<string, boolean>();
  return (header) => {
    if (header === undefined) return true;
    const answer = known.get(header);
    if (answer !== undefined) return answer;
    const decided = decide(header);
    if (header.length <= 255) {
      if (known.size >= 64) known.clear();
      known.set(header, decided);
    }
    return decided;
  };
}
