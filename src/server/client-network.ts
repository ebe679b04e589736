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
  const groups = groupsOf(bare);
  // IPv4-mapped, however written (`::ffff:203.0.113.7`, `::ffff:cb00:7107`): the IPv4 client it is.
  if (groups.slice(0, 5).every((group) => group === 0) && groups[5] === 0xffff) {
    const [high = 0, low = 0] = groups.slice(6);
    return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;
  }
  return `${groups
    .slice(0, 4)
    .map((group) => group.toString(16))
    .join(':')}::/64`;
}

/** The eight 16-bit groups of a valid IPv6 address: an IPv4 tail is two, and `::` as many zeros as are left out. */
function groupsOf(address: string): number[] {
  let text = address;
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4 !== null) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const all = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return all.map((group) => Number.parseInt(group, 16));
}
