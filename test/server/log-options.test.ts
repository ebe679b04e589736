/**
 * What `npm start`'s logger keeps out of its lines: a secret sent in a query
 * string (`?api_key=…`, which the server refuses) was logged whole with the
 * request's URL.
 */
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { pino, type LoggerOptions } from 'pino';
import { describe, expect, it } from 'vitest';
// `serverLoggerOptions` as an embedder of buildApp takes it: from the package.
import { buildApp, defineChain, lambda, serverLoggerOptions, type ChainSpec } from '../../src/index.js';
import { redactUrlCredentials } from '../../src/observability/index.js';
import { loggedUrl, redactQuery } from '../../src/server/log-options.js';
import { freePort } from '../helpers.js';
import { RedisServer } from '../support/redis-server.js';

/** A stream for the logger, and the lines written to it. */
function logLines(): { lines: string[]; stream: Writable } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { lines, stream };
}

describe('the server logger', () => {
  it('redacts the values of secret-looking query parameters, and only those', () => {
    expect(redactQuery('/joke/invoke')).toBe('/joke/invoke');
    expect(redactQuery('/joke/invoke?api_key=sk-1&x=2')).toBe('/joke/invoke?api_key=[redacted]&x=2');
    expect(redactQuery('/a?access_token=t&Authorization=b&client_secret=c&password=d&limit=10')).toBe('/a?access_token=[redacted]&Authorization=[redacted]&client_secret=[redacted]&password=[redacted]&limit=10');
    expect(redactQuery('/a?api%5Fkey=sk-2&flag')).toBe('/a?api%5Fkey=[redacted]&flag');
    // A security review found `?bearer=` logged as sent.
    expect(redactQuery('/a?bearer=b&sig=s&jwt=j&cookie=c&design=ok')).toBe('/a?bearer=[redacted]&sig=[redacted]&jwt=[redacted]&cookie=[redacted]&design=ok');
    expect(redactQuery('/a?pass=p&pwd=w&code=c&hmac=h&otp=o&private=x&zipcode=1')).toBe('/a?pass=[redacted]&pwd=[redacted]&code=[redacted]&hmac=[redacted]&otp=[redacted]&private=[redacted]&zipcode=1');
  });

  // A probe: on a server without keys a session id is all anyone needs to read that conversation, and the
  // paths that name one were logged as sent.
  it('redacts the conversation ids of paths: a session, an AI SDK chat id, a config hash', async () => {
    expect(loggedUrl('/chat/history/alice-secret-1')).toBe('/chat/history/[redacted]');
    expect(loggedUrl('/chat/ui_stream/chat-9/stream?api_key=k')).toBe('/chat/ui_stream/[redacted]/stream?api_key=[redacted]');
    expect(loggedUrl('/chat/c/N4IgLg/invoke')).toBe('/chat/c/[redacted]/invoke');
    expect(loggedUrl('/joke/invoke?x=1')).toBe('/joke/invoke?x=1');
    // A marker right after another (a review: the first match took the slash the second needed).
    expect(loggedUrl('/history/c/N4Ig/invoke')).toBe('/history/[redacted]/[redacted]/invoke');
    expect(loggedUrl('/c/history/alice-1')).toBe('/c/[redacted]/[redacted]');
    // A marker spelt with percent-escapes reaches the same route (the router decodes it): its id was logged.
    expect(loggedUrl('/chat/%68istory/alice-2')).toBe('/chat/%68istory/[redacted]');
    expect(loggedUrl('/chat/ui%5Fstream/chat-9/stream')).toBe('/chat/ui%5Fstream/[redacted]/stream');
    expect(loggedUrl('/chat/%63/N4IgLg/invoke')).toBe('/chat/%63/[redacted]/invoke');
    expect(loggedUrl('/chat/%zz/history')).toBe('/chat/%zz/history');
    const { lines, stream } = logLines();
    const app = await buildApp({ chains: [defineChain({ path: '/echo', runnable: lambda((x: unknown) => x) })] as ChainSpec<never, unknown>[], logger: { ...serverLoggerOptions('info'), stream } });
    try {
      await app.inject({ method: 'GET', url: '/echo/history/session-canary-4d2' });
      await app.inject({ method: 'GET', url: '/echo/hist%6Fry/session-canary-5e3' });
      const logged = lines.join('');
      expect(logged).toContain('/echo/history/[redacted]');
      expect(logged).not.toContain('session-canary-4d2');
      expect(logged).not.toContain('session-canary-5e3');
    } finally {
      await app.close();
    }
  });

  it("never writes a query string's key to the log, and still logs the request", async () => {
    const { lines, stream } = logLines();
    const app = await buildApp({ chains: [defineChain({ path: '/echo', runnable: lambda((x: unknown) => x) })] as ChainSpec<never, unknown>[], logger: { ...serverLoggerOptions('info'), stream } });
    try {
      await app.inject({ method: 'GET', url: '/healthz?api_key=sk-canary-9c1e&verbose=1' });
      const logged = lines.join('');
      expect(logged).toContain('/healthz?api_key=[redacted]&verbose=1');
      expect(logged).not.toContain('sk-canary-9c1e');
    } finally {
      await app.close();
    }
  });

  it('never writes the credentials of a URL an error message quotes (a chain that failed on a connection string)', async () => {
    const { lines, stream } = logLines();
    const failing = lambda(() => {
      throw new Error('could not reach postgres://runnel:pg-canary-51f@db:5432/runnel nor redis://:redis-canary-77a@cache:6379/0');
    });
    const app = await buildApp({ chains: [defineChain({ path: '/fails', runnable: failing })] as ChainSpec<never, unknown>[], logger: { ...serverLoggerOptions('info'), stream } });
    try {
      expect((await app.inject({ method: 'POST', url: '/fails/invoke', payload: { input: 1 } })).statusCode).toBe(500);
      const logged = lines.join('');
      expect(logged).toContain('postgres://[redacted]@db:5432/runnel');
      expect(logged).toContain('redis://[redacted]@cache:6379/0');
      expect(logged).not.toMatch(/pg-canary-51f|redis-canary-77a/);
      // A password with an unencoded @, and libpq's keyword form (a review).
      expect(redactUrlCredentials('postgres://runnel:p@ss-canary@db:5432/x and host=db password=kw-canary user=runnel')).toBe('postgres://[redacted]@db:5432/x and host=db password=[redacted] user=runnel');
    } finally {
      await app.close();
    }
  });

  // An operator's trial: with REDIS_URL's password wrong, the server's run worker logged ioredis's error whole,
  // and ioredis puts the failed command on it with its arguments — AUTH's is the password.
  it("never writes a Redis command's arguments an error carries (a refused AUTH's are the password)", async () => {
    const locked = new RedisServer(await freePort(), ['--save', '', '--appendonly', 'no', '--requirepass', 'right-password-123']);
    await locked.start();
    const client = new Redis({ port: locked.port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, enableReadyCheck: false });
    client.on('error', () => {});
    try {
      await client.connect();
      const refused = await client.auth('wrong-canary-3e8').then(() => undefined, (error: unknown) => error as Error);
      const nested = new Error('run worker error', { cause: refused });
      expect(JSON.stringify(refused)).toContain('wrong-canary-3e8');
      const { lines, stream } = logLines();
      const log = pino(serverLoggerOptions('info') as LoggerOptions, stream);
      log.error({ err: refused }, 'run worker error');
      log.error({ err: nested }, 'wrapped');
      const logged = lines.join('');
      expect(logged).toContain('WRONGPASS');
      expect(logged).toContain('"name":"auth"');
      expect(logged).not.toContain('wrong-canary-3e8');
    } finally {
      client.disconnect();
      await locked.kill();
    }
  });
});
