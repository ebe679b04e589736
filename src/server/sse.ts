/**
 * The one SSE writer of the streaming routes: LangServe's headers and
 * framing (`event: NAME\r\ndata: JSON\r\n\r\n`), backpressure (wait for
 * `drain` or `close`, never buffer without bound, cut a client that reads
 * nothing for `stallMs`), a comment ping, and a clean end after an error.
 *
 * Frames that are ready together go out together: a frame is added to the
 * stream's pending text, and the text is written once the current tick's
 * work is done (`process.nextTick`, after the promise jobs that made the
 * frames), as one HTTP chunk and one system call — or at once when it
 * reaches {@link FLUSH_BYTES}, or when the socket is pushing back. A model's
 * tokens, which arrive one network read at a time, still go out each as it
 * comes; a fast chain's burst of chunks costs one write instead of one each.
 */
import type { ServerResponse } from 'node:http';
import { takenMark } from './socket-progress.js';

/**
 * Headers of every event stream (docs/protocol.md, "Server-sent events"). `connection`
 * is set per request in {@link SseWriter.open}: `keep-alive` unless the
 * client asked to close.
 */
export const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  'x-accel-buffering': 'no',
} as const;

/** Pending text at which a stream writes without waiting for the end of the tick. */
export const FLUSH_BYTES = 16 * 1024;

/** Options of {@link SseWriter}. */
export interface SseOptions {
  /** Comment ping interval (default 15 s). */
  pingMs?: number;
  /** How long to wait for a client that reads nothing before cutting it (default 30 s). */
  stallMs?: number;
  /** Extra response headers (CORS, request id). */
  headers?: Record<string, string>;
}

/**
 * Writes one event stream to a raw response.
 *
 * @example
 * const sse = new SseWriter(reply.raw, { pingMs: 15_000 });
 * sse.open();
 * await sse.send('data', chunk);
 * sse.end();
 */
export class SseWriter {
  private readonly res: ServerResponse;
  private readonly stallMs: number;
  private readonly pingMs: number;
  private readonly headers: Record<string, string>;
  private ping: NodeJS.Timeout | undefined;
  private ended = false;
  /** Frames not yet handed to the socket; written at the end of the tick. */
  private pending = '';
  private flushScheduled = false;
  /** True once anything (the headers at least) went to the socket. */
  private wrote = false;
  /** Frames are kept for {@link end} (see {@link hold}). */
  private held = false;
  /** The wait for the socket to drain, while it pushes back. */
  private draining: Promise<boolean> | undefined;
  private readonly flushLater = (): void => {
    this.flushScheduled = false;
    if (this.held) return;
    if (this.pending !== '') void this.flush();
    else if (!this.wrote && !this.closed) {
      this.wrote = true;
      this.res.flushHeaders();
    }
  };
  /** True when the client stopped reading for longer than `stallMs` and the stream was cut. */
  stalled = false;

  constructor(res: ServerResponse, options: SseOptions = {}) {
    this.res = res;
    this.stallMs = options.stallMs ?? 30_000;
    this.pingMs = options.pingMs ?? 15_000;
    this.headers = options.headers ?? {};
  }

  /** True once the client has gone or the stream has ended. */
  get closed(): boolean {
    return this.ended || this.res.destroyed || this.res.writableEnded;
  }

  /** Sends the headers (with the first frames, when they are ready in the same tick) and starts the ping. */
  open(): void {
    // Node decided keep-alive from the request (HTTP/1.1 without `Connection: close`); forcing it would keep a
    // socket open that the client asked to have closed.
    this.res.writeHead(200, { ...this.headers, ...SSE_HEADERS, connection: this.res.shouldKeepAlive ? 'keep-alive' : 'close' });
    // Headers go out at the end of this tick at the latest, so a client sees the stream open before a slow first token.
    this.scheduleFlush();
    this.ping = setInterval(() => {
      // A ping ends a hold: a stream kept back longer than a ping interval sends what it kept, and stays alive.
      this.held = false;
      // Not while the socket pushes back: a client that reads nothing needs no ping, and its stall timer runs.
      if (this.draining === undefined) void this.write(': ping\r\n\r\n');
    }, this.pingMs);
    this.ping.unref();
  }

  /**
   * Sends one frame: `true` when the socket took it at once, otherwise a
   * promise that resolves once it drained (true) or the client went (false).
   */
  send(event: string, data?: unknown, id?: string, json?: string): boolean | Promise<boolean> {
    // A frame of a durable run carries its id: a client that reconnects sends it back as Last-Event-ID.
    const body = json ?? (data === undefined ? undefined : JSON.stringify(data));
    // One template a frame (not a head and a frame made of it: one string fewer at every frame).
    if (id === undefined) return this.write(body === undefined ? `event: ${event}\r\n\r\n` : `event: ${event}\r\ndata: ${body}\r\n\r\n`);
    return this.write(body === undefined ? `id: ${id}\r\nevent: ${event}\r\n\r\n` : `id: ${id}\r\nevent: ${event}\r\ndata: ${body}\r\n\r\n`);
  }

  /**
   * Sends text already framed in another SSE dialect (the AI SDK's `data:` parts, OpenAI's chunks); the
   * same backpressure as {@link send}. Empty text sends nothing.
   */
  sendRaw(text: string): boolean | Promise<boolean> {
    return text === '' ? !this.closed : this.write(text);
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    process.nextTick(this.flushLater);
  }

  /**
   * Keeps what is sent from now on (and what waits for the end of this tick) for {@link end}, up to
   * {@link FLUSH_BYTES} and until the next ping: a stream whose last frame is a moment away (a durable run's,
   * once its record is written) ends in one write instead of two.
   */
  hold(): void {
    this.held = true;
  }

  private write(frame: string): boolean | Promise<boolean> {
    // Within a tick whose flush is already due, the socket cannot have changed but by this writer: only the
    // batch's size is checked (the state was, at the tick's first frame).
    if (this.flushScheduled && !this.ended && this.pending.length < FLUSH_BYTES) {
      this.pending += frame;
      return true;
    }
    if (this.closed) return false;
    this.pending += frame;
    if (this.held && this.pending.length < FLUSH_BYTES) return true;
    // A socket that pushes back, or a full batch: write now, and let the caller wait for the drain.
    if (this.pending.length >= FLUSH_BYTES || this.res.writableNeedDrain) return this.flush();
    this.scheduleFlush();
    return true;
  }

  /** Writes the pending frames: `true` when the socket took them, else a promise as {@link send} answers. */
  private flush(): boolean | Promise<boolean> {
    const text = this.pending;
    this.pending = '';
    if (this.closed) return false;
    this.wrote = true;
    if (this.res.write(text)) return true;
    // Respect backpressure: wait for drain or close; a client that reads nothing is cut after stallMs. One
    // wait, one stall timer, however many writes meet the full socket (a probe: a ping each added its own).
    this.draining ??= new Promise<boolean>((resolve) => {
      const done = (ok: boolean): void => {
        clearTimeout(timer);
        this.res.off('drain', onDrain);
        this.res.off('close', onClose);
        this.draining = undefined;
        resolve(ok);
      };
      const onDrain = (): void => done(true);
      const onClose = (): void => done(false);
      // The stall counts from the client's last progress, not from the write: a client that keeps reading a
      // large frame is not cut (a probe's was, the frame not drained within the stall). Progress shows when the
      // kernel takes another part of the write (see takenMark). Looked at every quarter of the stall (25 ms to
      // 1 s); a client that reads nothing is cut after stallMs exactly.
      const socket = this.res.socket;
      const step = Math.max(25, Math.min(1_000, Math.floor(this.stallMs / 4)));
      let mark = socket === null ? 0 : takenMark(socket);
      let idle = 0;
      let timer: NodeJS.Timeout | undefined;
      const arm = (): void => {
        const wait = Math.min(step, this.stallMs - idle);
        timer = setTimeout(() => {
          const now = socket === null ? mark : takenMark(socket);
          if (now !== mark) {
            mark = now;
            idle = 0;
          } else idle += wait;
          if (idle < this.stallMs) return arm();
          this.stalled = true;
          this.res.destroy();
          done(false);
        }, wait);
      };
      arm();
      this.res.once('drain', onDrain);
      this.res.once('close', onClose);
    });
    return this.draining;
  }

  /** Ends the stream (after an `end` or `error` frame): the pending frames and the end go out in one write. */
  end(): void {
    if (this.ping !== undefined) clearInterval(this.ping);
    if (this.ended) return;
    this.ended = true;
    const text = this.pending;
    this.pending = '';
    if (!this.res.destroyed && !this.res.writableEnded) {
      if (text === '') this.res.end();
      else this.res.end(text);
    }
  }
}
