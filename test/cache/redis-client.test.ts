/**
 * The Redis client sends the commands of one turn of the event loop in one
 * write (`coalesceWrites`): counted at the socket, on a Redis of the test's
 * own, before and after that Redis restarts (a new socket), with every reply
 * still the answer to its own command.
 */
import type { Socket } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectServices, createRedisClient } from '../../src/index.js';
import { connectRefusal } from '../../src/cache/redis-client.js';
import { freePort, settleWithin } from '../helpers.js';
import { RedisServer } from '../support/redis-server.js';

let server: RedisServer;
let client: Redis;

beforeAll(async () => {
  server = await RedisServer.scratch();
  client = await server.client();
});
afterAll(async () => {
  client.disconnect();
  await server.kill();
});

/** How many times the client's socket hands data to the system while `work` runs. */
async function socketWrites(work: () => Promise<unknown>): Promise<number> {
  const socket = (client as unknown as { stream: Socket & { _write: (...a: unknown[]) => void; _writev: (...a: unknown[]) => void } }).stream;
  let writes = 0;
  const { _write, _writev } = socket;
  socket._write = function (...args: unknown[]) {
    writes++;
    return _write.apply(this, args);
  };
  socket._writev = function (...args: unknown[]) {
    writes++;
    return _writev.apply(this, args);
  };
  try {
    await work();
  } finally {
    socket._write = _write;
    socket._writev = _writev;
  }
  return writes;
}

/** 50 commands issued in one turn, as 50 requests under way at once issue theirs; their replies, each its own. */
async function burst(tag: string): Promise<void> {
  const keys = Array.from({ length: 50 }, (_, i) => `coalesce:${tag}:${i}`);
  await Promise.all(keys.map((key, i) => client.set(key, String(i), 'EX', 60)));
  expect(await Promise.all(keys.map((key) => client.get(key)))).toEqual(keys.map((_, i) => String(i)));
}

describe('createRedisClient', () => {
  it('sends one turn’s commands in one write, each reply to its own command', async () => {
    // Two turns (the SETs, then the GETs once they have answered): two writes for 100 commands.
    expect(await socketWrites(() => burst('a'))).toBe(2);
    // A command issued in a later turn goes out in that turn's write.
    expect(await socketWrites(async () => {
      await client.set('coalesce:late', 'x');
      await new Promise((resolve) => setImmediate(resolve));
      expect(await client.get('coalesce:late')).toBe('x');
    })).toBe(2);
  });

  it('keeps doing so on the socket of a reconnect', async () => {
    await server.kill();
    await server.start();
    // Commands fail fast while it is down (no offline queue); wait for the client to be back.
    for (let i = 0; i < 100 && client.status !== 'ready'; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(client.status).toBe('ready');
    expect(await socketWrites(() => burst('b'))).toBe(2);
  });
});

describe('a database the Redis does not have', () => {
  it('reached after the start (Redis was down): the client stops rather than write into database 0', async () => {
    const later = new RedisServer(await freePort(), ['--save', '', '--appendonly', 'no', '--databases', '2']);
    const doomed = createRedisClient(`redis://127.0.0.1:${later.port}/5`);
    await doomed.connect().catch(() => undefined);
    await later.start();
    try {
      // It connects by its own retries, and Redis refuses the database.
      await settleWithin(
        (async () => {
          while (connectRefusal(doomed) === undefined) await new Promise((resolve) => setTimeout(resolve, 20));
        })(),
        30_000,
      );
      expect(connectRefusal(doomed)).toMatch(/DB index is out of range/);
      await expect(doomed.set('written', 'into database 0')).rejects.toThrow();
      const probe = await later.client();
      expect(await probe.dbsize()).toBe(0);
      probe.disconnect();
    } finally {
      doomed.disconnect();
      await later.kill();
    }
  }, 60_000);
});

describe('a REDIS_URL with the wrong password', () => {
  // Database 0 needs no SELECT: with it, the server started not ready, as when Redis is down, though a wrong
  // setting stops the start (an operator's trial).
  it('stops the start saying the credentials were refused (it said the database did not exist), without the password', async () => {
    const locked = new RedisServer(await freePort(), ['--save', '', '--appendonly', 'no', '--requirepass', 'right-password-123']);
    await locked.start();
    try {
      for (const database of ['0', '3']) {
        const attempt = connectServices({ redisUrl: `redis://:wrong-password-456@127.0.0.1:${locked.port}/${database}` });
        const error = await attempt.then(() => undefined, (caught: unknown) => caught as Error);
        expect(error?.message).toMatch(/^Redis refused the credentials of REDIS_URL \((WRONGPASS|NOAUTH)/);
        expect(error?.message).not.toContain('wrong-password-456');
      }
    } finally {
      await locked.kill();
    }
  }, 60_000);

  // A review: with no password in REDIS_URL the refusal came on the ready check's INFO (NOAUTH), not on an AUTH,
  // and the server started as when Redis is down.
  it('stops the start when REDIS_URL has no password and Redis wants one', async () => {
    const locked = new RedisServer(await freePort(), ['--save', '', '--appendonly', 'no', '--requirepass', 'right-password-123']);
    await locked.start();
    try {
      const error = await connectServices({ redisUrl: `redis://127.0.0.1:${locked.port}/0` }).then(() => undefined, (caught: unknown) => caught as Error);
      expect(error?.message).toMatch(/^Redis refused the credentials of REDIS_URL \(NOAUTH/);
    } finally {
      await locked.kill();
    }
  }, 60_000);

  // A review: a password refused while running, with a database other than 0, made the SELECT after the AUTH
  // fail too (NOAUTH), which was taken for a refused database: the client stopped for good, and stayed
  // stopped once the password was put right.
  it('goes on trying while Redis refuses its password, and is back once the password is right again', async () => {
    const locked = new RedisServer(await freePort(), ['--save', '', '--appendonly', 'no', '--requirepass', 'first-password-1']);
    await locked.start();
    const admin = new Redis({ port: locked.port, host: '127.0.0.1', password: 'first-password-1' });
    admin.on('error', () => {});
    const client = createRedisClient(`redis://:first-password-1@127.0.0.1:${locked.port}/2`);
    try {
      await client.connect();
      expect(await client.ping()).toBe('PONG');
      await admin.config('SET', 'requirepass', 'second-password-2');
      await admin.auth('second-password-2');
      await admin.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
      while (client.status === 'ready') await new Promise((resolve) => setTimeout(resolve, 50));
      // Refused a few times over (each reconnect), then the password is put back.
      while (connectRefusal(client) === undefined) await new Promise((resolve) => setTimeout(resolve, 50));
      await admin.config('SET', 'requirepass', 'first-password-1');
      let answer = '';
      while (answer !== 'PONG') {
        expect(client.status).not.toBe('end');
        answer = await client.ping().catch(() => '');
        if (answer !== 'PONG') await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      client.disconnect();
      admin.disconnect();
      await locked.kill();
    }
  }, 60_000);
});
