/**
 * An ioredis client with bounded behaviour. With ioredis's defaults a
 * command waits out a whole outage (10–70 s measured here): here a command
 * fails after `commandTimeoutMs`, is never queued while disconnected, is
 * never sent twice (one in flight when its connection closes is dropped, not
 * resent on the next), a connection that answers nothing for
 * `stallTimeoutMs` while commands wait is closed, and reconnects back off to
 * at most 2 s.
 */
import type { Socket } from 'node:net';
import { Redis } from 'ioredis';
import { RunnelError } from '../core/index.js';

/** Options of {@link createRedisClient}. */
export interface RedisClientOptions {
  /** Milliseconds a command may take (default 500). */
  commandTimeoutMs?: number;
  /** Milliseconds to wait for the connection at start (default 2,000). */
  connectTimeoutMs?: number;
  /**
   * Milliseconds a connection may answer nothing while commands wait on it before it is closed, and what it
   * held dropped (default 10,000; see {@link closeWhenStalled}).
   */
  stallTimeoutMs?: number;
}

/**
 * Connects to `url` (`redis://host:port/db`).
 *
 * @example
 * const redis = createRedisClient(process.env.REDIS_URL!);
 */
export function createRedisClient(url: string, options: RedisClientOptions = {}): Redis {
  const client = new Redis(url, {
    commandTimeout: options.commandTimeoutMs ?? 500,
    connectTimeout: options.connectTimeoutMs ?? 2_000,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    // A command whose connection closed under it may have run: sent again on the next one it could run twice
    // (a chat turn saved twice). Its caller has had its error (the command timeout) or gets it from the timer.
    autoResendUnfulfilledCommands: false,
    enableReadyCheck: true,
    retryStrategy: (attempt) => Math.min(50 * 2 ** attempt, 2_000),
    lazyConnect: true,
  });
  // Errors surface on the commands that fail; without a listener ioredis would log every reconnect attempt.
  // One is kept: the URL's database refused on connect. ioredis would go on in database 0, among whatever is
  // there, so the client stops instead (at start that stops the server; later — Redis down at start, then up
  // without that database — every command fails as Redis unavailable, and /readyz says not ready).
  // And its credentials refused (WRONGPASS, NOAUTH), noted for the start to stop on; the client goes on trying,
  // as the password may be put right on Redis's side while the server runs.
  client.on('error', (error: { command?: { name?: string } } & Error) => {
    // Whichever command met it: AUTH refused, or no password sent (the ready check's INFO, or the SELECT that
    // follows a refused AUTH — which must not stop the client, as a refused database does).
    if (/^(NOAUTH|WRONGPASS)\b/.test(error.message)) {
      if (!refusals.has(client)) refusals.set(client, error.message);
      return;
    }
    const command = error.command?.name?.toLowerCase();
    if (command !== 'select') return;
    refusals.set(client, error.message);
    client.disconnect();
  });
  coalesceWrites(client);
  closeWhenStalled(client, options.stallTimeoutMs ?? 10_000);
  client.on('ready', () => void measureClockOffset(client));
  return client;
}

const clockOffsets = new WeakMap<Redis, { offset: number; at: number }>();
/** How often a client's clock offset is measured again while in use: clocks drift, and are stepped. */
const CLOCK_REMEASURE_MS = 60_000;

/** Measures (again) how far Redis's clock is ahead of this process's; false when TIME failed. */
export async function measureClockOffset(client: Redis): Promise<boolean> {
  const sent = Date.now();
  try {
    const [seconds, micros] = await client.time();
    const at = Date.now();
    clockOffsets.set(client, { offset: Number(seconds) * 1000 + Number(micros) / 1000 - (sent + at) / 2, at });
    return true;
  } catch {
    return false;
  }
}

/**
 * How far Redis's clock is ahead of this process's, in milliseconds (within half a round trip), measured each
 * time a connection of `client` is ready and again, in the background, when asked a minute after; undefined
 * until first measured, and for clients not made by {@link createRedisClient}. A write can then carry its
 * caller's deadline in Redis's time, and a script refuse it when Redis runs it later than that: its caller
 * was told it failed.
 */
export function redisClockOffset(client: Redis): number | undefined {
  const measured = clockOffsets.get(client);
  if (measured !== undefined && Date.now() - measured.at > CLOCK_REMEASURE_MS) {
    // Once until it answers: the next ask within the minute finds it measured.
    measured.at = Date.now();
    void measureClockOffset(client);
  }
  return measured?.offset;
}

const refusals = new WeakMap<Redis, string>();

/**
 * A command Redis refused because its key holds another type than the command works on (`WRONGTYPE`, also
 * from inside a script): not an outage — Redis answered — but a key changed by something other than Runnel,
 * so `RUNNEL_ERR_STORED_RECORD_INVALID` (`what`: which record), the cause kept for the log. Undefined for any
 * other error.
 *
 * @example
 * const invalid = wrongTypeError(error, 'A stored run');
 */
export function wrongTypeError(error: unknown, what: string): RunnelError | undefined {
  if (!(error instanceof Error) || !/\bWRONGTYPE\b/.test(error.message)) return undefined;
  return new RunnelError('RUNNEL_ERR_STORED_RECORD_INVALID', `${what} is not valid: its Redis key holds another kind of value than Runnel stores there`, { cause: error });
}

/**
 * Redis's refusal of the database `client`'s URL names (`ERR DB index is out of range`), or of its
 * credentials (`WRONGPASS …`, `NOAUTH …`), if it refused them.
 */
export function connectRefusal(client: Redis): string | undefined {
  return refusals.get(client);
}

const coalescing = new WeakSet<Socket>();
/** Node's own, taken at load: a test's fake timers must not hold a client's commands back. */
const immediate = setImmediate;

/**
 * Makes `client` send the commands of one turn of the event loop in one write: ioredis writes each command to
 * its socket at once, a system call each (about 15 µs of CPU on this project's machines, more than most
 * commands cost Redis), where many requests under way at once issue theirs in the same turn. The first write
 * of a turn corks the socket and the turn's end (`setImmediate`) uncorks it: order is kept, and a command
 * waits at most for the turn to finish (one written in a `setImmediate` callback, for the next turn). Applied
 * again on every reconnect (a new socket).
 */
export function coalesceWrites(client: Redis): void {
  const patch = (): void => {
    const socket = (client as unknown as { stream?: Socket }).stream;
    if (socket === undefined || coalescing.has(socket)) return;
    coalescing.add(socket);
    const write = socket.write;
    let corked = false;
    const uncork = (): void => {
      corked = false;
      socket.uncork();
    };
    socket.write = function (this: Socket, ...args: unknown[]): boolean {
      if (!corked) {
        corked = true;
        socket.cork();
        immediate(uncork);
      }
      return (write as (...a: unknown[]) => boolean).apply(this, args);
    } as Socket['write'];
  };
  client.on('connect', patch);
  patch();
}

/** What of ioredis's inside {@link closeWhenStalled} reads: its socket, and the queue it resends from. */
interface ClientInternals {
  stream?: Socket;
  prevCommandQueue?: unknown;
}

/**
 * Closes `client`'s connection once it has answered nothing for `stallMs` while commands wait on it (Redis
 * frozen, a silent network), and drops what that connection held. Every command has timed out for its caller
 * by then, but ioredis keeps each, with its arguments, until its answer comes: a frozen Redis or a partition
 * held every command sent to it for as long as it lasted (a probe: 8 MB for 4,000 chat turns; TCP gives a
 * silent peer up only after 15 minutes and more). Once the connection is closed, new commands are refused
 * unsent until one answers again, so the hold is what `stallMs` of traffic sends.
 *
 * ioredis's own `socketTimeout` is not used: it resends what the closed connection held, and in 5.11 the
 * timer of a connection that closed cuts the next one (ioredis #2147). This looks at the client's current
 * socket each time. What the closed socket had passed to the kernel may still reach Redis and run when it
 * wakes, once: a caller that wrote must undo in a way that holds in either order (the history's writes do).
 */
function closeWhenStalled(client: Redis, stallMs: number): void {
  const internals = client as unknown as ClientInternals;
  let watched: Socket | undefined;
  let bytesRead = 0;
  /** When a check first found commands waiting on `watched` with nothing read since; undefined when none wait. */
  let since: number | undefined;
  const check = (): void => {
    const socket = internals.stream;
    if (socket === undefined || socket.destroyed || client.commandQueue.length === 0) {
      since = undefined;
      return;
    }
    if (since === undefined || socket !== watched || socket.bytesRead !== bytesRead) {
      watched = socket;
      bytesRead = socket.bytesRead;
      since = Date.now();
      return;
    }
    if (Date.now() - since < stallMs) return;
    // Looked again once the loop has read the sockets: after this process itself was held up past stallMs
    // (timers run before sockets are read), Redis's answer may be waiting in the kernel.
    setImmediate(() => {
      if (internals.stream === socket && socket.bytesRead === bytesRead && client.commandQueue.length > 0) socket.destroy();
    });
  };
  // Watched while a connection is up: no timer for a client that is down, or ended.
  let timer: NodeJS.Timeout | undefined;
  client.on('connect', () => {
    timer ??= setInterval(check, Math.max(10, Math.floor(stallMs / 4)));
    timer.unref();
  });
  client.on('close', () => {
    clearInterval(timer);
    timer = undefined;
    // The closed connection's commands are not resent (autoResendUnfulfilledCommands), but ioredis keeps them
    // until a connection is made, or ready: for the whole outage while Redis stays frozen or out of reach.
    // Those still waiting for their timeout fail now.
    const error = new Error('Connection is closed before Redis answered');
    for (let item = client.commandQueue.shift(); item !== undefined; item = client.commandQueue.shift()) item.command.reject(error);
    internals.prevCommandQueue = undefined;
  });
}

/**
 * True when `error` (or its cause) is the client refusing a command it never sent: not connected (Redis down,
 * reconnecting; no command is queued while disconnected). Such a write cannot land later, unlike one that timed
 * out or whose connection closed under it.
 *
 * @example
 * if (!neverSent(error)) undoLater(); // the write may still be carried out
 */
export function neverSent(error: unknown): boolean {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 3; cause = cause.cause, depth++) {
    if (cause.message.startsWith("Stream isn't writeable")) return true;
  }
  return false;
}
