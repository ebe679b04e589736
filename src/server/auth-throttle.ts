/**
 * Failed authentications per client address. After `limit` failures within a
 * window (which starts at an address's first failure), the address is
 * refused for the rest of the window — with a right key too: otherwise the
 * one guess answered with something other than 429 would be the right key.
 * Memory is bounded: at most `capacity` addresses are remembered, and the
 * one whose last failure is oldest is forgotten first.
 */

/** Options of {@link AuthThrottle}. */
export interface AuthThrottleOptions {
  /** Failures an address may have per window; the next request is refused. */
  limit: number;
  /** Default 60,000 (a minute). */
  windowMs?: number;
  /** Most addresses remembered at once (default 10,000). */
  capacity?: number;
  /** The clock (default `Date.now`). */
  now?: () => number;
}

interface Window {
  failures: number;
  endsAt: number;
}

/**
 * Counts failed authentications per address and says how long one must wait.
 *
 * @example
 * const throttle = new AuthThrottle({ limit: 20 });
 * if (throttle.blockedFor(request.ip) > 0) refuse();
 * else if (!authenticated) throttle.fail(request.ip);
 */
export class AuthThrottle {
  private readonly windows = new Map<string, Window>();
  private readonly limit: number;
  private readonly windowMs: number;
  private readonly capacity: number;
  private readonly now: () => number;

  constructor(options: AuthThrottleOptions) {
    this.limit = options.limit;
    this.windowMs = options.windowMs ?? 60_000;
    this.capacity = options.capacity ?? 10_000;
    this.now = options.now ?? Date.now;
  }

  /** How many addresses are remembered (never more than the capacity). */
  get size(): number {
    return this.windows.size;
  }

  /** Milliseconds until `address` may try again; 0 when it may now. */
  blockedFor(address: string): number {
    const window = this.windows.get(address);
    if (window === undefined) return 0;
    const left = window.endsAt - this.now();
    if (left <= 0) {
      this.windows.delete(address);
      return 0;
    }
    return window.failures >= this.limit ? left : 0;
  }

  /** Counts one failed authentication from `address`. */
  fail(address: string): void {
    const now = this.now();
    const current = this.windows.get(address);
    const window = current !== undefined && current.endsAt > now ? current : { failures: 0, endsAt: now + this.windowMs };
    window.failures += 1;
    // Re-inserted, so the Map's order is the order of last failures, oldest first.
    this.windows.delete(address);
    this.windows.set(address, window);
    for (const oldest of this.windows.keys()) {
      if (this.windows.size <= this.capacity) break;
      this.windows.delete(oldest);
    }
  }
}
