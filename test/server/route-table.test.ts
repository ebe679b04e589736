/**
 * The table of routes the not-found answer reads: which methods a path takes (a 405's `allow`), and whether
 * a path without its trailing slash is a route (the 404's hint) — where a route whose `*` takes any path
 * names none (a review: the hint would call any path under a catch-all "the route").
 */
import { expect, it } from 'vitest';
import { RouteTable } from '../../src/server/route-table.js';

it('tells the methods of a path, and leaves out catch-all routes when asked for routes that name it', () => {
  const routes = new RouteTable({ maxParamLength: 500 });
  routes.add('GET', '/v1/models/*');
  routes.add(['POST', 'PUT'], '/v1/models/*');
  routes.add('POST', '/:chain/invoke');
  routes.add('GET', '*');
  expect(routes.allowed('/v1/models/gpt-4o')).toBe('GET, HEAD, POST, PUT');
  expect(routes.allowed('/v1/models/gpt-4o', { wildcards: false })).toBeUndefined();
  expect(routes.allowed('/joke/invoke', { wildcards: false })).toBe('POST');
  expect(routes.allowed('/joke/nothing')).toBeUndefined();
});
