/**
 * The client a per-address limit counts: an IPv4 address as it is, an IPv6
 * address by its /64. One IPv6 host commonly holds a whole /64 and may pick
 * any address in it (privacy addresses rotate on their own), so limits keyed
 * on whole IPv6 addresses — the auth throttle, the keyless rate limit — let
 * one client take 2^64 fresh budgets, and flush the throttle's memory of
 * others as it went.
 */
import { isIPv6 } from 'node:net';

/**
 * `203.0.113.7` → `203.0.113.7`; `2001:db8:1:2::a`, `2001:db8:1:2:ffff::1` → `2001:db8:1:2::/64`; an
 * IPv4-mapped IPv6 address (`::ffff:203.0.113.7`) → its IPv4 address. Anything else (not an address) is
 * returned as it is.
 *
 * @example
 * throttle.fail(clientNetwork(request.ip));
 */
export function clientNetwork(ip: string): string {
  if (!ip.includes(':')) return ip;
  const bare = ip.split('%')[0] as string;
  if (!isIPv6(bare)) return ip;
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(bare);
  if (mapped !== null) return mapped[1] as string;
  const [head = '', tail] = bare.split('::');
  const left = head === '' ? [] : head.split(':');
  // An address written with '::' leaves out as many zero groups as it needs (an IPv4 tail, two groups, is
  // past the first four and never read).
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? left : [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${groups
    .slice(0, 4)
    .map((group) => Number.parseInt(group, 16).toString(16))
    .join(':')}::/64`;
}
