/**
 * DNS rebinding against a server without API keys: a page on any site
 * points its own name at 127.0.0.1, and its requests to that name are then
 * same-origin to the browser — JSON bodies allowed, answers readable. Checked
 * from Chromium, whose resolver is told that `rebind.test` is 127.0.0.1 (what
 * the attacker's DNS answers once the page has loaded): the keyless server
 * refuses every request naming that host, answers under localhost and IP
 * addresses, and under a name the operator lists in RUNNEL_ALLOWED_HOSTS.
 * With API keys the name does not matter: the page has no key.
 */
import { connect } from 'node:net';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostCheck } from '../../src/server/allowed-hosts.js';
import { loadServerConfig } from '../../src/server/config.js';
import { observed, startServer, type TestServer } from '../support/server.js';

describe('hostCheck', () => {
  const allowed = hostCheck(['runnel.internal', '*.corp.example']);

  it('answers under IP addresses, localhost and listed names; not under any other name', () => {
    for (const host of ['127.0.0.1:8000', '10.0.0.7', '[::1]:8000', '[::ffff:127.0.0.1]', 'localhost:8000', 'LOCALHOST', 'localhost.:8000', 'localhost:', '[fe80::1%eth0]:8000', 'app.localhost:3000', 'runnel.internal:8000', 'a.corp.example', undefined]) {
      expect(allowed(host), String(host)).toBe(true);
    }
    for (const host of ['rebind.test:8000', 'localhost.rebind.test', 'corp.example', 'runnel.internal.evil.test', '127.0.0.1.nip.io', 'evil.test:127.0.0.1', '[localhost]',
      // A probe: the part before a port's junk, or after an address's bracket, was taken for the name.
      '[::1]evil.test', '[::1].evil.test', '127.0.0.1:80@evil.test', 'localhost:1@evil.test', '127.0.0.1:8000:1', 'localhost:80/x', 'evil@app.localhost']) {
      expect(allowed(host), host).toBe(false);
    }
  });

  it('answers a Host it has seen as the first time, past the few it keeps and for a long one', () => {
    const check = hostCheck(['runnel.internal']);
    const hosts = ['rebind.test', 'runnel.internal', '127.0.0.1:8000', `${'a'.repeat(300)}.test`];
    for (let i = 0; i < 200; i++) hosts.push(i % 2 === 0 ? `n${i}.rebind.test` : `10.0.0.${i}:80`);
    for (let round = 0; round < 3; round++) {
      for (const host of hosts) expect(check(host), host).toBe(!/rebind\.test$|a\.test$/.test(host));
    }
  });
});

describe('RUNNEL_ALLOWED_HOSTS', () => {
  it('takes names, *.name and *; refuses a scheme, a port, a path, and a wildcard over digits', () => {
    expect(loadServerConfig({ RUNNEL_ALLOWED_HOSTS: 'Runnel.Internal, *.corp.example' }).allowedHosts).toEqual(['runnel.internal', '*.corp.example']);
    expect(loadServerConfig({ RUNNEL_ALLOWED_HOSTS: '*' }).allowedHosts).toEqual(['*']);
    for (const bad of ['http://runnel.internal', 'runnel.internal:8000', 'runnel.internal/x', '*.com', '*.0.0.1']) {
      expect(() => loadServerConfig({ RUNNEL_ALLOWED_HOSTS: bad }), bad).toThrow(/RUNNEL_ALLOWED_HOSTS/);
    }
    // The same rule keeps webhooks off IP addresses given as a wildcard (http://2130706433/ is 127.0.0.1).
    expect(() => loadServerConfig({ RUNNEL_WEBHOOK_HOSTS: '*.0.0.1' })).toThrow(/RUNNEL_WEBHOOK_HOSTS/);
  });
});

describe('a page whose name is rebound to this machine', () => {
  let browser: Browser;
  const servers: TestServer[] = [];

  beforeAll(async () => {
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
        '--host-resolver-rules=MAP rebind.test 127.0.0.1',
      ],
    });
  });
  afterAll(async () => {
    await browser?.close();
    for (const server of servers) await server.close();
  });

  async function serve(config: Parameters<typeof startServer>[0]): Promise<number> {
    const server = await startServer(config);
    servers.push(server);
    return Number(new URL(server.url).port);
  }

  /** Loads `origin`'s health page (answered under any name), then runs the page's same-origin requests. */
  async function fromPage(origin: string, headers: Record<string, string> = {}): Promise<{ invoke: [number, unknown]; schema: number }> {
    const page = await browser.newPage();
    try {
      await page.goto(`${origin}/healthz`);
      return await page.evaluate(async (extra) => {
        const invoke = await fetch('/echo/invoke', { method: 'POST', headers: { 'content-type': 'application/json', ...extra }, body: JSON.stringify({ input: { name: 'rebound' } }) });
        const schema = await fetch('/echo/input_schema', { headers: extra });
        return { invoke: [invoke.status, await invoke.json()] as [number, unknown], schema: schema.status };
      }, headers);
    } finally {
      await page.close();
    }
  }

  it('without keys: refused under the rebound name, nothing runs; answered under localhost and 127.0.0.1', async () => {
    const port = await serve({});
    const before = observed.configs.length;
    const rebound = await fromPage(`http://rebind.test:${port}`);
    expect(rebound.invoke[0]).toBe(403);
    expect(rebound.invoke[1]).toMatchObject({ code: 'RUNNEL_ERR_HOST_NOT_ALLOWED', message: expect.stringContaining('"rebind.test"') });
    expect(rebound.schema).toBe(403);
    expect(observed.configs.length).toBe(before);
    for (const origin of [`http://localhost:${port}`, `http://127.0.0.1:${port}`]) {
      expect((await fromPage(origin)).invoke).toEqual([200, expect.objectContaining({ output: 'hello rebound' })]);
    }
  });

  it('without keys, the name listed in RUNNEL_ALLOWED_HOSTS is answered', async () => {
    const port = await serve({ allowedHosts: ['rebind.test'] });
    expect((await fromPage(`http://rebind.test:${port}`)).invoke).toEqual([200, expect.objectContaining({ output: 'hello rebound' })]);
  });

  it('with keys, any name is answered, and the page without a key gets nothing', async () => {
    const port = await serve({ apiKeys: [{ name: 'ada', key: 'ada-key-0123456789abcdef' }] });
    const page = await fromPage(`http://rebind.test:${port}`);
    expect(page.invoke[0]).toBe(401);
    expect((await fromPage(`http://rebind.test:${port}`, { authorization: 'Bearer ada-key-0123456789abcdef' })).invoke[0]).toBe(200);
  });

  /** What the server answers `request`, written on a socket of its own. */
  const raw = (port: number, request: string): Promise<string> =>
    new Promise<string>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => socket.write(request));
      let data = '';
      socket.on('data', (chunk) => (data += chunk.toString()));
      socket.on('end', () => resolve(data));
      socket.on('close', () => resolve(data));
      socket.on('error', reject);
    });

  it('a malformed Host (an address with a name after it) is refused on the wire, not read as its address', async () => {
    const port = await serve({});
    for (const host of ['[::1]evil.test', `127.0.0.1:${port}@evil.test`]) {
      const answer = await raw(port, `GET /echo/input_schema HTTP/1.1\r\nhost: ${host}\r\nconnection: close\r\n\r\n`);
      expect(answer, host).toMatch(/^HTTP\/1\.1 403 /);
      expect(answer, host).toContain('RUNNEL_ERR_HOST_NOT_ALLOWED');
    }
    expect(await raw(port, `GET /echo/input_schema HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nconnection: close\r\n\r\n`)).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('an HTTP/1.0 request without a Host is answered (a browser always sends one)', async () => {
    const port = await serve({});
    expect(await raw(port, 'GET /echo/input_schema HTTP/1.0\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
  });

  // A trial: Node refused it with an empty 400 of its own, before any of the server's code ran.
  it('an HTTP/1.1 request without a Host gets a 400 that says so, in the error shape', async () => {
    const port = await serve({});
    const answer = await raw(port, 'GET /echo/input_schema HTTP/1.1\r\nconnection: close\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toMatch(/content-type: application\/json/i);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({ code: 'RUNNEL_ERR_BAD_REQUEST', message: 'An HTTP/1.1 request needs a Host header' });
  });
});
