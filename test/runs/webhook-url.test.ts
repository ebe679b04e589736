/**
 * Which webhook URLs a run may name. A security review found that an entry
 * of RUNNEL_WEBHOOK_HOSTS allowed its host on every port: a run could make
 * the server POST its record (input and output, partly the caller's) to
 * any other service of a listed host — an admin API, a database. An entry
 * now allows the scheme's default port, or the one port it names.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { lambda } from '../../src/core/index.js';
import { Redis } from 'ioredis';
import { BullRunQueue, checkWebhookUrl, DeliveryLimiter, deliverWebhook, isPublicAddress, MemoryRunQueue, MemoryRunStore, RedisRunStore, retryAfterMs, type WebhookPolicy } from '../../src/runs/index.js';

const policy = { hosts: ['hooks.example.com', '*.corp.example:8443', '10.0.0.5:8080', '[::1]:9000'], secret: 's3cret-0123456789', allowHttp: true };
const allowed = (url: string): boolean => {
  try {
    checkWebhookUrl(url, policy);
    return true;
  } catch {
    return false;
  }
};

describe('checkWebhookUrl', () => {
  it('calls a listed host on its scheme’s default port, or on the port its entry names', () => {
    for (const url of ['https://hooks.example.com/runs', 'https://hooks.example.com:443/runs', 'http://hooks.example.com:80/', 'https://a.corp.example:8443/x', 'http://10.0.0.5:8080/hook', 'http://[::1]:9000/']) {
      expect(allowed(url), url).toBe(true);
    }
    // An entry naming a default port allows the URLs that reach it, with the port written or not (a review).
    const defaults = { ...policy, hosts: ['a.example.com:443', 'b.example.com:80'] };
    for (const url of ['https://a.example.com/', 'https://a.example.com:443/', 'http://b.example.com/']) expect(() => checkWebhookUrl(url, defaults), url).not.toThrow();
    for (const url of ['http://a.example.com/', 'https://b.example.com/']) expect(() => checkWebhookUrl(url, defaults), url).toThrow();
  });

  it('calls no other port of a listed host, and no port of another', () => {
    for (const url of ['https://hooks.example.com:6379/', 'https://hooks.example.com:8443/', 'https://a.corp.example/x', 'https://a.corp.example:9443/x', 'http://10.0.0.5/hook', 'http://10.0.0.5:8081/', 'http://[::1]/', 'http://127.0.0.1:8080/']) {
      expect(allowed(url), url).toBe(false);
    }
    expect(() => checkWebhookUrl('https://hooks.example.com:6379/', policy)).toThrow(
      'webhook host hooks.example.com on port 6379 is not in RUNNEL_WEBHOOK_HOSTS (an entry allows the scheme\'s default port, or the one it names: hooks.example.com:6379)',
    );
  });
});

/**
 * A host allowed only by a pattern (`*.corp.example`) was called wherever its name pointed: whoever runs a
 * name under the pattern could aim the server's POSTs at its own network (a cloud's metadata service, an
 * admin API on 127.0.0.1). Such a host must now resolve to public addresses, checked on the address the
 * connection is made to; a name listed itself is the operator's word and is called wherever it is.
 */
describe('deliverWebhook and the addresses a pattern allows', () => {
  let receiver: Server;
  let port: number;
  const received: { signature: string | undefined; body: string }[] = [];
  // The names' answers: what a resolver of the pattern's zone says (no test may depend on real DNS).
  const answers: Record<string, { address: string; family: number }[]> = {
    'hooks.corp.example': [{ address: '127.0.0.1', family: 4 }],
    'mixed.corp.example': [{ address: '93.184.216.34', family: 4 }, { address: '10.1.2.3', family: 4 }],
    'mapped.corp.example': [{ address: '::ffff:127.0.0.1', family: 6 }],
  };
  const lookup = ((hostname: string, options: unknown, callback: (error: Error | null, addresses: unknown, family?: number) => void) => {
    const found = answers[hostname];
    if (found === undefined) return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), undefined);
    if ((options as { all?: boolean }).all === true) return callback(null, found);
    return callback(null, found[0]?.address, found[0]?.family);
  }) as unknown as WebhookPolicy['lookup'];

  beforeAll(async () => {
    receiver = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString()));
      request.on('end', () => {
        received.push({ signature: request.headers['x-runnel-signature'] as string | undefined, body });
        response.end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    port = (receiver.address() as AddressInfo).port;
  });
  afterAll(async () => new Promise<void>((resolve) => receiver.close(() => resolve())));

  it('refuses a host a pattern allows when it resolves to a private address, and never connects', async () => {
    received.length = 0;
    const patterned: WebhookPolicy = { hosts: [`*.corp.example:${port}`], secret: 's3cret-0123456789', allowHttp: true, lookup };
    for (const name of ['hooks', 'mixed', 'mapped']) {
      const delivery = await deliverWebhook(`http://${name}.corp.example:${port}/runs`, '{"run_id":"r1"}', patterned, { attempts: 3, backoffMs: 1 });
      expect(delivery, name).toMatchObject({ delivered: false, attempts: 1, refused: expect.stringContaining(`${name}.corp.example resolves to`) });
    }
    expect(received).toEqual([]);
    // A name that does not resolve is retried like a receiver that is down, not refused.
    // Its log says why (a probe: every failure without an answer read "last status none").
    expect(await deliverWebhook(`http://gone.corp.example:${port}/`, '{}', patterned, { attempts: 2, backoffMs: 1 })).toEqual({ delivered: false, attempts: 2, status: undefined, error: 'ENOTFOUND' });
  });

  it('calls a host the operator listed by name wherever it resolves, signed', async () => {
    received.length = 0;
    const named: WebhookPolicy = { hosts: [`hooks.corp.example:${port}`], secret: 's3cret-0123456789', allowHttp: true, lookup };
    const delivery = await deliverWebhook(`http://hooks.corp.example:${port}/runs`, '{"run_id":"r2"}', named, { attempts: 1 });
    expect(delivery).toEqual({ delivered: true, attempts: 1, status: 200 });
    expect(received).toEqual([{ signature: expect.stringMatching(/^sha256=[0-9a-f]{64}$/), body: '{"run_id":"r2"}' }]);
  });

  it('tells public addresses from the others', () => {
    for (const address of ['93.184.216.34', '1.1.1.1', '2606:4700:4700::1111', '::ffff:93.184.216.34']) expect(isPublicAddress(address), address).toBe(true);
    const others = ['127.0.0.1', '10.0.0.5', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '224.0.0.1', '::1', '::', 'fd00::1', 'fe80::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '0:0:0:0:0:ffff:a00:1', '::FFFF:192.168.0.1', '64:ff9b::7f00:1', 'localhost'];
    // Forms that reach IPv4 through a tunnel or translation (IPv4-compatible, SIIT, 6to4, Teredo), site-local, 6to4
    // relays, and a scoped link-local address (which the URL parser refuses: it threw, in a resolver's callback).
    others.push('::7f00:1', '::ffff:0:7f00:1', '2002:7f00:1::', '2001::1', 'fec0::1', '192.88.99.1', 'fe80::1%lo');
    // Special-purpose IPv6 blocks a probe found taken for public: benchmarking, ORCHIDv2, the second documentation block, SRv6.
    others.push('2001:2::1', '2001:20::1', '3fff::1', '5f00::1');
    for (const address of others) expect(isPublicAddress(address), address).toBe(false);
  });
});

/**
 * A probe: deliveries had no bound. One key ended 4,000 runs naming a receiver that never answers, and the
 * server held 3,847 sockets at once for a minute — a few times that and it runs out of descriptors and
 * stops taking connections. Deliveries now take turns within a process's limits.
 */
describe('DeliveryLimiter', () => {
  const gate = () => {
    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    return { open, opened };
  };

  it('runs so many at once, the rest in turn, and drops what does not fit: past the waiting room, or past a caller\'s share', async () => {
    const limiter = new DeliveryLimiter({ concurrent: 2, concurrentPerCaller: 2, queued: 2, perCaller: 3 });
    const started: string[] = [];
    const gates = new Map<string, ReturnType<typeof gate>>();
    const work = (name: string) => () => {
      started.push(name);
      const g = gate();
      gates.set(name, g);
      return g.opened.then(() => name);
    };
    const a1 = limiter.run('ada', work('a1'));
    const a2 = limiter.run('ada', work('a2'));
    const b1 = limiter.run('bob', work('b1'));
    const a3 = limiter.run('ada', work('a3'));
    // Ada's fourth is past her share (3); Cy's finds the waiting room (2) full.
    expect(limiter.run('ada', work('a4'))).toBeUndefined();
    expect(limiter.run('cy', work('c1'))).toBeUndefined();
    await Promise.resolve();
    expect(started).toEqual(['a1', 'a2']);
    expect(limiter.size).toEqual({ active: 2, waiting: 2 });
    gates.get('a1')?.open();
    expect(await a1).toBe('a1');
    await new Promise((resolve) => setImmediate(resolve));
    expect(started).toEqual(['a1', 'a2', 'b1']);
    gates.get('a2')?.open();
    gates.get('b1')?.open();
    await Promise.all([a2, b1]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(started).toEqual(['a1', 'a2', 'b1', 'a3']);
    gates.get('a3')?.open();
    expect(await a3).toBe('a3');
    expect(limiter.size).toEqual({ active: 0, waiting: 0 });
    // Freed: a caller's share and the slots come back, a failed delivery's too.
    expect(await limiter.run('ada', () => Promise.reject(new Error('down')))?.catch((error: Error) => error.message)).toBe('down');
    expect(limiter.size).toEqual({ active: 0, waiting: 0 });
    const again = limiter.run('ada', async () => 'again');
    expect(await again).toBe('again');
  });
});

// A review: a caller's share was of the waiting room only, so one caller's silent receiver (65 s a delivery,
// through its retries) held every turn under way, and the others waited minutes behind it.
it('gives a caller so many turns at once, and the callers waiting turns in turn', async () => {
  const limiter = new DeliveryLimiter({ concurrent: 2, concurrentPerCaller: 1, queued: 10, perCaller: 10 });
  const started: string[] = [];
  const release = new Map<string, () => void>();
  const work = (name: string) => () => {
    started.push(name);
    return new Promise<void>((resolve) => release.set(name, resolve));
  };
  const settle = () => new Promise((resolve) => setImmediate(resolve));
  const all = ['a1', 'a2', 'a3', 'b1', 'b2'].map((name) => limiter.run(name[0] as string, work(name)));
  await settle();
  // Ada has one under way, her others wait; Bob gets the second turn.
  expect(started).toEqual(['a1', 'b1']);
  for (const name of ['a1', 'b1', 'a2', 'b2', 'a3']) {
    release.get(name)?.();
    await settle();
  }
  expect(started).toEqual(['a1', 'b1', 'a2', 'b2', 'a3']);
  await Promise.all(all);
  expect(limiter.size).toEqual({ active: 0, waiting: 0 });
});

describe('a queue\'s deliveries within their limits', () => {
  it('makes one at a time here, logs what it drops, and what it leaves undelivered when it stops', async () => {
    const held: ServerResponse[] = [];
    const receiver = createServer((_request, response) => void held.push(response));
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const port = (receiver.address() as AddressInfo).port;
    const logged: string[] = [];
    const queue = new MemoryRunQueue({
      store: new MemoryRunStore(),
      chains: new Map([['/noop', lambda((input: unknown) => input)]]) as never,
      concurrency: 4,
      webhooks: { hosts: [`127.0.0.1:${port}`], secret: 's3cret-0123456789', allowHttp: true, attempts: 1, limits: { concurrent: 1, queued: 1 }, pastGraceMs: 0 },
      log: (_error, message) => void logged.push(message),
    });
    const now = new Date().toISOString();
    const ids = ['r1', 'r2', 'r3', 'r4'];
    for (const id of ids) {
      await queue.submit({ run_id: id, chain: '/noop', kind: 'run', identity: 'ada', status: 'pending', input: 1, config: {}, webhook: `http://127.0.0.1:${port}/hook`, created_at: now, updated_at: now });
    }
    // Every run ends; one delivery reaches the receiver, one waits its turn, the other two are dropped: logged
    // once (a flood of them is a line a minute).
    for (;;) {
      const records = await Promise.all(ids.map((id) => queue.store.get(id)));
      if (records.every((record) => record?.status === 'success') && held.length === 1 && logged.length === 1) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(logged).toEqual(['a webhook was not sent: too many deliveries under way (for its caller, or in this process)']);
    // Stopping with one under way and one waiting, the queue says what it leaves undelivered.
    await queue.close(50);
    expect(logged[1]).toBe('stopping with 1 webhook deliveries under way and 1 waiting: they are not delivered');
    receiver.closeAllConnections();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
  });
});

// A probe: a run the grace ended (cancelled as shutting down) started its delivery once the grace was spent,
// and the stopping queue gave deliveries only what was left of the grace — none: its webhook never came.
describe('a stopping queue and the webhooks of the runs its grace ended', () => {
  for (const kind of ['memory', 'redis'] as const) {
    it(`delivers them after the grace (${kind === 'memory' ? 'in-process queue' : 'BullMQ'})`, async () => {
      const received: string[] = [];
      const receiver = createServer((request, response) => {
        let body = '';
        request.on('data', (chunk: Buffer) => (body += chunk.toString()));
        // A receiver that takes its time: a delivery counts once answered, and the queue must wait for it.
        request.on('end', () =>
          setTimeout(() => {
            received.push(body);
            response.writeHead(200).end();
          }, 500),
        );
      });
      await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
      const port = (receiver.address() as AddressInfo).port;
      let started!: () => void;
      const running = new Promise<void>((resolve) => (started = resolve));
      // Never ends by itself: only the abort at the end of the grace does.
      const forever = lambda((_input: unknown, config) => {
        started();
        return new Promise((_resolve, reject) => config.signal?.addEventListener('abort', () => reject(config.signal?.reason)));
      });
      const namespace = `runnel-test-${randomUUID()}`;
      const redis = kind === 'redis' ? new Redis('redis://127.0.0.1:6379') : undefined;
      const options = {
        chains: new Map([['/forever', forever]]) as never,
        concurrency: 2,
        // Past the grace a delivery may take as long as this test needs (the default is 2 s): what is asserted
        // is that it is waited for, not how fast it is.
        webhooks: { hosts: [`127.0.0.1:${port}`], secret: 's3cret-0123456789', allowHttp: true, attempts: 1, pastGraceMs: 120_000 },
      };
      const queue =
        redis === undefined
          ? new MemoryRunQueue({ store: new MemoryRunStore(), ...options })
          : new BullRunQueue({ connection: redis, prefix: `${namespace}:bull`, store: new RedisRunStore({ client: redis, namespace: `${namespace}:runs` }), ...options });
      try {
        const now = new Date().toISOString();
        const record = { run_id: randomUUID(), chain: '/forever', identity: 'ada', status: 'pending' as const, input: 1, config: {}, webhook: `http://127.0.0.1:${port}/hook`, created_at: now, updated_at: now };
        // Queued on the in-process queue; on BullMQ a durable stream's run, executed here (a queued one's worker
        // close waits 2 s more of its own, which hid this there).
        const ran = kind === 'memory' ? queue.submit({ ...record, kind: 'run' }) : queue.runHere({ ...record, kind: 'stream' }, { frame: () => undefined }).catch(() => undefined);
        await running;
        await queue.close(50);
        await ran;
        expect(received).toHaveLength(1);
        expect(JSON.parse(received[0] as string)).toMatchObject({ status: 'error', error: { code: 'RUNNEL_ERR_SHUTTING_DOWN' } });
      } finally {
        await new Promise<void>((resolve) => receiver.close(() => resolve()));
        if (redis !== undefined) {
          for await (const keys of redis.scanStream({ match: `${namespace}:*`, count: 1000 }) as AsyncIterable<string[]>) if (keys.length > 0) await redis.unlink(...keys);
          redis.disconnect();
        }
      }
    }, 60_000);
  }
});

/**
 * A probe: a receiver's `Retry-After` was ignored — a 429 asking for 30 s was called again after the fixed
 * backoff (1 s, 2 s, …), and one asking for an hour four more times within a minute. And a delivery held its
 * turn through its backoff sleeps, so a few receivers that failed kept every other caller's deliveries waiting.
 */
describe('a receiver that asks to wait, and the turns of deliveries between attempts', () => {
  it('reads Retry-After as seconds or an HTTP date, and nothing else', () => {
    const now = Date.parse('2026-12-04T12:00:00Z');
    expect(retryAfterMs('30', now)).toBe(30_000);
    expect(retryAfterMs(' 0 ', now)).toBe(0);
    expect(retryAfterMs('Fri, 04 Dec 2026 12:00:45 GMT', now)).toBe(45_000);
    expect(retryAfterMs('Fri, 04 Dec 2026 11:00:00 GMT', now)).toBe(0);
    for (const text of [undefined, '', '1.5', '-3', 'soon', '2026-12-04T12:00:45Z', '99999999999']) expect(retryAfterMs(text, now), String(text)).toBeUndefined();
  });

  it('waits as long as the receiver asks between attempts, and does not call again one that asks more than a delivery waits', async () => {
    const script: { status: number; retryAfter?: string }[] = [];
    let calls = 0;
    const receiver = createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        calls++;
        const answer = script.shift() ?? { status: 200 };
        response.writeHead(answer.status, answer.retryAfter === undefined ? {} : { 'retry-after': answer.retryAfter });
        response.end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const port = (receiver.address() as AddressInfo).port;
    const hooks: WebhookPolicy = { hosts: [`127.0.0.1:${port}`], secret: 's3cret-0123456789', allowHttp: true };
    const pauses: number[] = [];
    const pause = async (ms: number) => void pauses.push(ms);
    try {
      // A 429 asking 30 s, a 503 asking 2 s (less than the backoff by then: the backoff wins), a 500 saying nothing.
      script.push({ status: 429, retryAfter: '30' }, { status: 503, retryAfter: '2' }, { status: 500 });
      const delivered = await deliverWebhook(`http://127.0.0.1:${port}/hook`, '{"run_id":"r1"}', hooks, { attempts: 5, backoffMs: 3_000, pause });
      expect(delivered).toEqual({ delivered: true, attempts: 4, status: 200 });
      expect(pauses).toEqual([30_000, 6_000, 12_000]);
      // Asked for an hour: the delivery ends there, and says what it was asked.
      calls = 0;
      pauses.length = 0;
      script.push({ status: 503, retryAfter: '3600' });
      expect(await deliverWebhook(`http://127.0.0.1:${port}/hook`, '{"run_id":"r2"}', hooks, { attempts: 5, backoffMs: 1, pause })).toEqual({ delivered: false, attempts: 1, status: 503, retryAfterMs: 3_600_000 });
      expect([calls, pauses]).toEqual([1, []]);
    } finally {
      await new Promise<void>((resolve) => receiver.close(() => resolve()));
    }
  });

  it('gives a delivery\'s turn to the others while it waits between attempts, and puts it first in its caller\'s line after', async () => {
    const limiter = new DeliveryLimiter({ concurrent: 1, concurrentPerCaller: 1, queued: 10, perCaller: 10 });
    const log: string[] = [];
    let openB!: () => void;
    const a1 = limiter.run('ada', async (turn) => {
      log.push('a1');
      await turn.pause(0);
      log.push('a1 again');
    });
    const a2 = limiter.run('ada', async () => void log.push('a2'));
    const b1 = limiter.run('bob', async () => {
      log.push('b1');
      await new Promise<void>((resolve) => (openB = resolve));
    });
    // a1 pauses: a2 and then b1 take the one turn; a1's pause ends while b1 holds it (a timer of 0 ms fires
    // before one of 20 ms set later), and a1 waits for a turn again.
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(log).toEqual(['a1', 'a2', 'b1']);
    expect(limiter.size).toEqual({ active: 1, waiting: 1 });
    // Ada's next delivery lines up behind the one that waited between attempts.
    const a3 = limiter.run('ada', async () => void log.push('a3'));
    openB();
    await Promise.all([a1, a2, b1, a3]);
    expect(log).toEqual(['a1', 'a2', 'b1', 'a1 again', 'a3']);
    expect(limiter.size).toEqual({ active: 0, waiting: 0 });
  });

  it('lets a delivery called off during its pause end at once, and counts it out', async () => {
    const limiter = new DeliveryLimiter({ concurrent: 1, concurrentPerCaller: 1, queued: 10, perCaller: 10 });
    const stop = new AbortController();
    const paused = limiter.run('ada', async (turn) => turn.pause(60_000, stop.signal));
    await new Promise((resolve) => setImmediate(resolve));
    expect(limiter.size).toEqual({ active: 0, waiting: 1 });
    stop.abort();
    await expect(paused).rejects.toThrow();
    expect(limiter.size).toEqual({ active: 0, waiting: 0 });
    expect(await limiter.run('ada', async () => 'next')).toBe('next');
  });
});

// A review: a server's shutdown closes its queue with the grace, then the app's own close with none; the
// in-process queue did all of its closing twice — waiting for the deliveries again (a receiver that never
// answered held the shutdown 2 s longer) and closing its store twice.
describe('closing the in-process queue twice', () => {
  it('closes once', async () => {
    const store = new MemoryRunStore();
    const closed = vi.spyOn(store, 'close');
    const queue = new MemoryRunQueue({ store, chains: new Map() as never, concurrency: 1 });
    await queue.close(10);
    await queue.close(0);
    expect(closed).toHaveBeenCalledTimes(1);
  });
});
