/**
 * Two Runnel processes on one Redis and one Postgres, behind Debian's nginx
 * running the repository's deploy/nginx.conf (the upstream and the port
 * rewritten for the test): a conversation continues on whichever replica
 * answers, and SSE frames come through the proxy as they are written.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, scanKeys, stopProcesses, waitForProcess } from '../helpers.js';
import { startNginx, type Nginx } from '../support/nginx.js';

const root = new URL('../../', import.meta.url).pathname;
const DATABASE_URL = process.env.RUNNEL_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/runnel_test';
const session = `replicas-${process.pid}-${Date.now()}`;
const children: ChildProcess[] = [];
const logs: string[] = [];
let proxy = '';
let nginx: Nginx | undefined;
const replicas: string[] = [];

function start(command: string, args: string[], env: Record<string, string>): ChildProcess {
  const child = spawn(command, args, { cwd: root, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.on('data', (chunk: Buffer) => logs.push(chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => logs.push(chunk.toString()));
  children.push(child);
  return child;
}

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'runnel-replicas-'));
  const ports = [await freePort(), await freePort()];
  const starting = ports.map((port, i) => {
    const child = start(process.execPath, ['--import', 'tsx', 'src/server/main.ts'], {
      PORT: String(port),
      HOST: '127.0.0.1',
      REDIS_URL: 'redis://127.0.0.1:6379',
      DATABASE_URL,
      RUNNEL_DATA_DIR: join(dir, `data-${i}`),
      LOG_LEVEL: 'warn',
    });
    replicas.push(`http://127.0.0.1:${port}`);
    return waitForProcess(`http://127.0.0.1:${port}/readyz`, child, logs);
  });
  await Promise.all(starting);

  nginx = await startNginx({
    upstreams: ports.map((port) => `127.0.0.1:${port}`),
    // Runnel also sends `X-Accel-Buffering: no`; ignoring it here leaves the config alone in charge of SSE.
    edit: (conf) => conf.replace('proxy_pass http://runnel;', 'proxy_pass http://runnel;\n        proxy_ignore_headers X-Accel-Buffering;'),
  });
  expect(nginx.conf).toContain('proxy_ignore_headers X-Accel-Buffering;');
  proxy = nginx.url;
}, 180_000);

afterAll(async () => {
  await nginx?.close();
  await stopProcesses(children);
  const redis = new Redis('redis://127.0.0.1:6379');
  const keys = await scanKeys(redis, `runnel:history:*:${session}`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
}, 30_000);

const chat = async (base: string, message: string): Promise<string> => {
  const res = await fetch(`${base}/chat/invoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ input: { message }, config: { configurable: { session_id: session } } }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { output: string }).output;
};

describe('two replicas behind nginx', () => {
  it('warns at start that without API keys every caller is anonymous', async () => {
    // Waits for the line itself: a replica may answer /readyz before its stdout has reached this process.
    const warned = () => logs.join('').split('every caller is \\"anonymous\\"').length - 1 >= replicas.length;
    await new Promise<void>((resolve) => {
      const check = () => {
        if (!warned()) return;
        for (const child of children) child.stdout?.off('data', check);
        resolve();
      };
      for (const child of children) child.stdout?.on('data', check);
      check();
    });
    expect(logs.join('')).toMatch(/"level":40,.*RUNNEL_API_KEYS is not set/);
  });

  it('continues a conversation on whichever replica answers', async () => {
    const [a, b] = replicas as [string, string];
    expect(await chat(a, 'My favourite colour is teal.')).toMatch(/first message/);
    expect(await chat(b, 'What is my favourite colour?')).toContain('My favourite colour is teal.');
    expect(await chat(proxy, 'And again?')).toContain('(2 messages from you)');
    const history = (await (await fetch(`${proxy}/chat/history/${session}`)).json()) as { messages: { type: string }[] };
    expect(history.messages).toHaveLength(6);
  });

  it('passes SSE frames through as they are written, not buffered to the end', async () => {
    // Each read of the socket that brings data frames counts once: buffered, the whole stream would come in one or two.
    const reads = await new Promise<string[]>((resolve, reject) => {
      const chunks: string[] = [];
      const req = request(
        `${proxy}/joke/stream`,
        { method: 'POST', headers: { 'content-type': 'application/json', 'cache-control': 'no-cache' } },
        (res) => {
          expect(res.statusCode).toBe(200);
          expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => chunks.push(chunk));
          res.on('end', () => resolve(chunks));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify({ input: { topic: `proxies ${session}` } }));
    });
    const withData = reads.filter((chunk) => chunk.includes('event: data'));
    expect(withData.length).toBeGreaterThanOrEqual(5);
    expect(reads.join('')).toMatch(/event: end/);
    // The first read came before the stream ended: it holds no end frame.
    expect(withData[0]).not.toMatch(/event: end/);
  });
});
