/**
 * Which methods each registered path takes, for the answer to a request the
 * router found no route for: a path that exists under other methods is a 405
 * with `allow` (RFC 9110), not a 404. Fed by Fastify's `onRoute` hook into a
 * router of its own of the same kind as Fastify's (find-my-way, the same
 * options), so a path matches here exactly as it would there: parameters,
 * wildcards, percent-encoding, trailing slashes. Read only when a request
 * is not found — nothing on the path of a routed request.
 */
import FindMyWay from 'find-my-way';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A route that only answers 405 for methods its path does not take: it says nothing of what the path takes. */
    refusesMethod?: boolean;
    /** The endpoint `/metrics` counts the route under, where its URL's last fixed part would mislead. */
    endpoint?: string;
  }
}

const noop = (): void => undefined;

/** The methods of every route, in a router of their own. */
export class RouteTable {
  private readonly router: FindMyWay.Instance<FindMyWay.HTTPVersion.V1>;
  private readonly methods = new Set<string>();

  /** `maxParamLength` as Fastify's router has it (connection-limits.ts), so the same paths match. */
  constructor(options: { maxParamLength: number }) {
    this.router = FindMyWay({ maxParamLength: options.maxParamLength });
  }

  /** Records a route (Fastify's `onRoute`): one method or several. A catch-all route (`*`) says nothing of a path. */
  add(method: string | readonly string[], url: string): void {
    if (url === '*' || url === '/*' || url === '') return;
    for (const one of typeof method === 'string' ? [method] : method) {
      const upper = one.toUpperCase();
      // The same method and path twice (a HEAD Fastify added, then one of ours): the first is enough here.
      if (this.router.hasRoute(upper as FindMyWay.HTTPMethod, url)) continue;
      this.router.on(upper as FindMyWay.HTTPMethod, url, noop);
      this.methods.add(upper);
    }
  }

  /**
   * The methods some route takes for `path` (no query string), as an `allow` header; undefined when no route
   * matches. `wildcards: false` counts only routes that name the path, not one whose `*` takes any path (a
   * static folder's, which takes a file that is not there as well).
   */
  allowed(path: string, options: { wildcards?: boolean } = {}): string | undefined {
    const found: string[] = [];
    for (const method of this.methods) {
      const match = this.router.find(method as FindMyWay.HTTPMethod, path);
      if (match !== null && (options.wildcards !== false || match.params['*'] === undefined)) found.push(method);
    }
    if (found.length === 0) return undefined;
    if (found.includes('GET') && !found.includes('HEAD')) found.push('HEAD');
    return found.sort().join(', ');
  }
}
