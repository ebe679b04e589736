/**
 * Which methods each registered path takes, for the answer to a request the
 * router found no route for: a path that exists under other methods is a 405
 * with `allow` (RFC 9110), not a 404. Fed by Fastify's `onRoute` hook, read
 * only when a request is not found — nothing on the path of a routed request.
 */

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A route that only answers 405 for methods its path does not take: it says nothing of what the path takes. */
    refusesMethod?: boolean;
  }
}

/** A route's URL pattern as a matcher: `:name` is one path segment, `*` the rest of the path. */
function matcher(url: string): RegExp {
  let source = '';
  for (const part of url.split(/(:[A-Za-z0-9_]+|\*)/)) {
    if (part === '*') source += '.*';
    else if (part.startsWith(':')) source += '[^/]+';
    else source += part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${source}$`);
}

/** The methods of every route, grouped by the path's first segment so a lookup tests few patterns. */
export class RouteTable {
  private readonly byFirst = new Map<string, { url: string; test: RegExp; methods: Set<string> }[]>();

  /** Records a route (Fastify's `onRoute`): one method or several. A catch-all route (`*`) says nothing of a path. */
  add(method: string | readonly string[], url: string): void {
    if (url === '*' || url === '/*' || url === '') return;
    const first = firstSegment(url);
    const routes = this.byFirst.get(first) ?? [];
    this.byFirst.set(first, routes);
    let route = routes.find((r) => r.url === url);
    if (route === undefined) routes.push((route = { url, test: matcher(url), methods: new Set() }));
    for (const m of typeof method === 'string' ? [method] : method) route.methods.add(m.toUpperCase());
  }

  /** The methods some route takes for `path` (no query string), as an `allow` header; undefined when no route matches. */
  allowed(path: string): string | undefined {
    const methods = new Set<string>();
    // A pattern whose first segment is a parameter or wildcard can match any path.
    for (const key of [firstSegment(path), '']) {
      for (const route of this.byFirst.get(key) ?? []) if (route.test.test(path)) for (const m of route.methods) methods.add(m);
    }
    if (methods.size === 0) return undefined;
    if (methods.has('GET')) methods.add('HEAD');
    return [...methods].sort().join(', ');
  }
}

/** A path's first segment, or '' when it begins with a parameter or a wildcard (it matches any first segment). */
function firstSegment(path: string): string {
  const segment = path.split('/')[1] ?? '';
  return segment.startsWith(':') || segment.includes('*') ? '' : segment;
}
