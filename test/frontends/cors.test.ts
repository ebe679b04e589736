/**
 * A page on another origin (listed in RUNNEL_CORS_ORIGINS) may call the frontends' routes with the
 * clients it would use: the preflight allows every header the real `openai` SDK sends, and what an
 * `EventSource` sends when it resumes.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawExchange } from '../helpers.js';
import { startServer, type TestServer } from '../support/server.js';

const ORIGIN = 'http://app.example';

describe('CORS for browser clients', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ corsOrigins: [ORIGIN] });
  });
  afterAll(async () => {
    await server.close();
  });

  const preflight = (path: string, method: string, headers: string[]) =>
    fetch(`${server.url}${path}`, { method: 'OPTIONS', headers: { origin: ORIGIN, 'access-control-request-method': method, 'access-control-request-headers': headers.join(',') } });

  it('allows every header the openai SDK sends from a page', async () => {
    // The headers the real SDK puts on a chat completion (its fetch captured; nothing is sent).
    let sent: Headers | undefined;
    const client = new OpenAI({
      baseURL: `${server.url}/v1`,
      apiKey: 'key',
      // A probe: a client made with its organization and project (as OpenAI's docs show) failed its preflight.
      organization: 'org-runnel',
      project: 'proj-runnel',
      dangerouslyAllowBrowser: true,
      maxRetries: 0,
      fetch: async (_url, init) => {
        sent = new Headers(init?.headers);
        return new Response(JSON.stringify({ id: 'x', object: 'chat.completion', created: 0, model: 'm', choices: [] }), { headers: { 'content-type': 'application/json' } });
      },
    });
    await client.chat.completions.create({ model: 'joke', messages: [{ role: 'user', content: 'hi' }] });
    const names = [...(sent as Headers).keys()].filter((name) => !['accept', 'content-length', 'user-agent'].includes(name));
    expect(names).toEqual(expect.arrayContaining(['authorization', 'content-type', 'x-stainless-lang', 'openai-organization', 'openai-project']));
    const res = await preflight('/v1/chat/completions', 'POST', names);
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    const allowed = (res.headers.get('access-control-allow-headers') ?? '').toLowerCase().split(/\s*,\s*/);
    for (const name of names) expect(allowed).toContain(name);
  });

  it('grants the origin on refusals too, so a page reads the 401 instead of a failed fetch', async () => {
    const guarded = await startServer({ corsOrigins: [ORIGIN], apiKeys: [{ name: 'ada', key: 'ada-key-0123456789abcdef' }] });
    try {
      for (const path of ['/v1/chat/completions', '/joke/stream']) {
        const res = await fetch(`${guarded.url}${path}`, { method: 'POST', headers: { origin: ORIGIN, 'content-type': 'application/json', authorization: 'Bearer wrong-key-0123456789' }, body: '{}' });
        expect(res.status).toBe(401);
        expect(res.headers.get('access-control-allow-origin')).toBe(ORIGIN);
        expect(res.headers.get('access-control-expose-headers')?.toLowerCase()).toContain('retry-after');
      }
    } finally {
      await guarded.close();
    }
  });

  // A probe: the rate limit's headers were sent but not exposed, so a page could not see how many it had left.
  it("exposes the rate limit's headers to a page", async () => {
    const limited = await startServer({ corsOrigins: [ORIGIN], rateLimit: 100 });
    try {
      const res = await fetch(`${limited.url}/joke/invoke`, { method: 'POST', headers: { origin: ORIGIN, 'content-type': 'application/json' }, body: '{"input": {"topic": "cats"}}' });
      expect(res.headers.get('x-ratelimit-remaining')).toBe('99');
      const exposed = (res.headers.get('access-control-expose-headers') ?? '').toLowerCase().split(/\s*,\s*/);
      // x-should-retry: the openai SDK in a page reads it to leave a failure that will not pass unretried.
      for (const name of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'retry-after', 'x-should-retry']) expect(exposed).toContain(name);
    } finally {
      await limited.close();
    }
  });

  it('allows an EventSource’s Last-Event-ID and a no-cache request', async () => {
    const res = await preflight('/joke/runs/r/stream', 'GET', ['last-event-id', 'cache-control', 'authorization']);
    const allowed = (res.headers.get('access-control-allow-headers') ?? '').toLowerCase();
    for (const name of ['last-event-id', 'cache-control', 'authorization']) expect(allowed).toContain(name);
  });

  // A review: the grant of what Node's parser refuses was read from anywhere in the bytes it failed in, so a
  // refused request had the origin of one pipelined before it; and only http(s) origins were read.
  it("grants a parser's refusal its own request's listed origin, of any scheme, and no earlier request's", async () => {
    const extension = 'chrome-extension://abcdefghijklmnop';
    const listed = await startServer({ corsOrigins: [ORIGIN, extension] });
    try {
      const port = new URL(listed.url).port;
      const heads = (received: string): string[] => received.split(/(?=HTTP\/1\.1 \d{3} )/).map((answer) => answer.split('\r\n\r\n')[0] ?? '');
      const overflow = heads(await rawExchange(port, `GET /joke/input_schema HTTP/1.1\r\nhost: 127.0.0.1\r\norigin: ${extension}\r\nx-filler: ${'x'.repeat(20_000)}\r\n\r\n`));
      expect(overflow[0]).toMatch(/^HTTP\/1\.1 431 /);
      expect(overflow[0]).toContain(`access-control-allow-origin: ${extension}\r\n`);
      const first = `GET /joke/input_schema HTTP/1.1\r\nhost: 127.0.0.1\r\norigin: ${ORIGIN}\r\n\r\n`;
      for (const refused of [`GET /joke/input_schema HTTP/1.1\r\nhost: 127.0.0.1\r\norigin: http://elsewhere.example\r\nbad header\r\n\r\n`, `GET /joke/input schema HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n`]) {
        const answers = heads(await rawExchange(port, first + refused));
        expect(answers.map((head) => head.slice(0, 12)), refused).toEqual(['HTTP/1.1 200', 'HTTP/1.1 400']);
        expect(answers[0]).toContain(`access-control-allow-origin: ${ORIGIN}`);
        expect(answers[1], refused).not.toContain('access-control-allow-origin');
      }
    } finally {
      await listed.close();
    }
  });
});
