/**
 * `npm run history:move`: a deployment with its own `RUNNEL_RUN_NAMESPACE` kept its conversations under
 * `runnel:history` before they moved under its namespace; the script moves them there, on a Redis of the
 * test's own (the shared one holds other tests' histories under that prefix).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisServer } from '../support/redis-server.js';

const root = new URL('../../', import.meta.url).pathname;
let server: RedisServer;
let redis: Redis;

beforeAll(async () => {
  server = await RedisServer.scratch();
  redis = await server.client();
});
afterAll(async () => {
  redis.disconnect();
  await server.kill();
});

const move = (args: string[], env: Record<string, string> = {}) =>
  promisify(execFile)(process.execPath, ['--import', 'tsx', 'scripts/move-history.ts', ...args], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', REDIS_URL: server.url, ...env },
  });

describe('npm run history:move', () => {
  it('moves the old conversations under the namespace with their TTL, never over one there already; a dry run moves nothing', async () => {
    await redis.rpush('runnel:history:ada:s1', '{"type":"human","content":"one"}');
    await redis.expire('runnel:history:ada:s1', 3600);
    await redis.rpush('runnel:history:bob:s2', '{"type":"human","content":"old"}');
    await redis.rpush('team-a:history:bob:s2', '{"type":"human","content":"new"}');
    await redis.set('runnel:cache:x', 'cached');
    await redis.set('runnel:history:not-a-list', 'x');

    const dry = await move(['--dry-run'], { RUNNEL_RUN_NAMESPACE: 'team-a' });
    expect(dry.stdout).toContain('would move 1 conversations to team-a:history; 2 left');
    expect(await redis.exists('runnel:history:ada:s1')).toBe(1);

    const done = await move(['--namespace', 'team-a']);
    expect(done.stdout).toContain('moved 1 conversations to team-a:history; 2 left');
    expect(await redis.lrange('team-a:history:ada:s1', 0, -1)).toEqual(['{"type":"human","content":"one"}']);
    expect(await redis.ttl('team-a:history:ada:s1')).toBeGreaterThan(3000);
    expect(await redis.exists('runnel:history:ada:s1')).toBe(0);
    // The one already there is not overwritten; the old one stays for the operator to look at.
    expect(await redis.lrange('team-a:history:bob:s2', 0, -1)).toEqual(['{"type":"human","content":"new"}']);
    expect(await redis.exists('runnel:history:bob:s2')).toBe(1);
    expect(await redis.get('runnel:cache:x')).toBe('cached');
  });

  it('refuses a namespace RUNNEL_RUN_NAMESPACE would refuse, and needs REDIS_URL', async () => {
    await expect(move(['--namespace', 'bad name'])).rejects.toMatchObject({ code: 2 });
    await expect(move([], { REDIS_URL: '' })).rejects.toMatchObject({ code: 2 });
    await expect(move(['--namespace', 'runnel:history'])).rejects.toMatchObject({ code: 2 });
  });

  // A newcomer's probe: `--help`, or a mistyped option, threw parseArgs's TypeError with its stack trace.
  it('answers --help with its usage, and a mistyped option with the option and the usage, exit 2, no stack', async () => {
    const usage = 'usage: REDIS_URL=redis://… npm run history:move -- [--namespace NAME] [--dry-run]';
    const help = await move(['--help']);
    expect(help.stdout).toBe(`${usage}\n`);
    const typo = await move(['--namesapce', 'team-a']).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(typo?.code).toBe(2);
    expect(typo?.stderr).toBe(`history:move: Unknown option '--namesapce'\n${usage}\n`);
  });
});

