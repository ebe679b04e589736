/**
 * A redis-server of a test's own on a spare port, for fault tests: started,
 * killed, frozen and restarted at will.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createRedisClient } from '../../src/index.js';
import type { Redis } from 'ioredis';
import { freePort, settleWithin } from '../helpers.js';

export class RedisServer {
  private child: ChildProcess | undefined;

  /** `args` are redis-server options beyond the port and bind address (persistence, dir). */
  constructor(
    readonly port: number,
    private readonly args: string[],
  ) {}

  /** A started server on a spare port that keeps nothing on disk. */
  static async scratch(): Promise<RedisServer> {
    const server = new RedisServer(await freePort(), ['--save', '', '--appendonly', 'no']);
    await server.start();
    return server;
  }

  /** A connected client of the server's own kind (`createRedisClient`: bounded, commands of a turn in one write). */
  async client(): Promise<Redis> {
    const client = createRedisClient(this.url);
    await client.connect();
    return client;
  }

  get running(): boolean {
    return this.child !== undefined;
  }

  /** Its URL, with the password of a server started with `--requirepass`. */
  get url(): string {
    const at = this.args.indexOf('--requirepass');
    const credentials = at === -1 ? '' : `:${encodeURIComponent(this.args[at + 1] ?? '')}@`;
    return `redis://${credentials}127.0.0.1:${this.port}`;
  }

  /**
   * Starts the server and resolves once it answers PING. Each attempt is a client of its own: one client
   * asked again and again could connect by its own retries between two attempts, and then every later
   * `connect()` refuses ("already connected") before the PING is sent — a start that never ends. The bound
   * is a guard against a hang (a restart replays its append-only file, slower on a loaded machine).
   */
  async start(): Promise<void> {
    this.child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', ...this.args], { stdio: 'ignore' });
    let stopped = false;
    try {
      await settleWithin(
        (async () => {
          while (!stopped) {
            const probe = createRedisClient(this.url);
            try {
              await probe.connect();
              if ((await probe.ping()) === 'PONG') return;
            } catch {
              // Not listening yet.
            } finally {
              probe.disconnect();
            }
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
        })(),
        30_000,
      );
    } finally {
      stopped = true;
    }
  }

  /** SIGKILL, and resolves once the process is gone. */
  async kill(): Promise<void> {
    const child = this.child;
    if (child === undefined) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    this.child = undefined;
  }

  /** Sends a signal (SIGSTOP, SIGCONT) to the running server. */
  signal(name: NodeJS.Signals): void {
    this.child?.kill(name);
  }
}
