/**
 * The client of `npm run bench:soak`, on raw TCP sockets like
 * bench/load-client.ts (the client shares the machine's two cores with the
 * server, so it does as little as a client can):
 *
 * - `KeepAliveClient`: one keep-alive connection that POSTs JSON, one request
 *   at a time, reading each answer by its Content-Length;
 * - `openStream`: one SSE stream on its own connection (`Connection: close`),
 *   read to its `end` frame — or cut by the client as soon as the response's
 *   head arrives, or after the first `data` frame.
 */
import { connect, type Socket } from 'node:net';

/** Where the server listens. */
export interface Target {
  host: string;
  port: number;
}

const HEAD_END = Buffer.from('\r\n\r\n');
const DATA = Buffer.from('event: data\r\n');
const END = Buffer.from('event: end');
const ERROR = Buffer.from('event: error');

function request(target: Target, path: string, body: string, connection: 'keep-alive' | 'close'): Buffer {
  return Buffer.from(
    `POST ${path} HTTP/1.1\r\nHost: ${target.host}:${target.port}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: ${connection}\r\n\r\n${body}`,
  );
}

/** An answer: its status and body. */
export interface Answer {
  status: number;
  body: string;
}

/** One keep-alive connection; reconnects when the server closes it. */
export class KeepAliveClient {
  private socket: Socket | undefined;
  private buffer: Buffer = Buffer.alloc(0);
  private pending: { resolve: (answer: Answer) => void; reject: (error: Error) => void } | undefined;

  constructor(private readonly target: Target) {}

  private open(): Socket {
    const socket = connect({ host: this.target.host, port: this.target.port });
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => {
      this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
      this.parse();
    });
    const gone = (error?: Error): void => {
      if (this.socket === socket) this.socket = undefined;
      this.buffer = Buffer.alloc(0);
      const pending = this.pending;
      this.pending = undefined;
      pending?.reject(error ?? new Error('connection closed'));
    };
    socket.on('error', gone);
    socket.on('close', () => gone());
    return socket;
  }

  private parse(): void {
    const headEnd = this.buffer.indexOf(HEAD_END);
    if (headEnd === -1 || this.pending === undefined) return;
    const head = this.buffer.subarray(0, headEnd).toString('latin1');
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? NaN);
    if (Number.isNaN(length)) {
      this.pending.reject(new Error('an answer without content-length'));
      this.socket?.destroy();
      return;
    }
    const end = headEnd + HEAD_END.length + length;
    if (this.buffer.length < end) return;
    const answer = { status: Number(head.slice(9, 12)), body: this.buffer.subarray(headEnd + HEAD_END.length, end).toString('utf8') };
    this.buffer = this.buffer.subarray(end);
    const pending = this.pending;
    this.pending = undefined;
    pending.resolve(answer);
  }

  /** POSTs `body` to `path` and resolves with the answer. */
  post(path: string, body: string): Promise<Answer> {
    this.socket ??= this.open();
    const socket = this.socket;
    return new Promise<Answer>((resolve, reject) => {
      this.pending = { resolve, reject };
      socket.write(request(this.target, path, body, 'keep-alive'));
    });
  }

  close(): void {
    this.socket?.destroy();
  }
}

/** How a stream went. */
export interface StreamOutcome {
  status: number;
  frames: number;
  /** It ended with an `end` frame. */
  ended: boolean;
  /** It carried an `error` frame. */
  failed: boolean;
}

/** Counts the occurrences of `needle` in `bytes` that end past `from`. */
function count(bytes: Buffer, needle: Buffer, from: number): number {
  let n = 0;
  for (let at = bytes.indexOf(needle); at !== -1; at = bytes.indexOf(needle, at + needle.length)) if (at + needle.length > from) n++;
  return n;
}

/** When the client closes a stream: never (it reads to the end), at the response's head, or after the first `data` frame. */
export type Cut = 'none' | 'head' | 'data';

/** Opens one SSE stream, read to its end or cut as `cut` says. */
export function openStream(target: Target, path: string, body: string, cut: Cut): Promise<StreamOutcome> {
  return new Promise((resolve) => {
    const outcome: StreamOutcome = { status: 0, frames: 0, ended: false, failed: false };
    let tail = Buffer.alloc(0);
    const socket = connect({ host: target.host, port: target.port }, () => socket.write(request(target, path, body, 'close')));
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => {
      if (outcome.status === 0) {
        outcome.status = Number(chunk.subarray(9, 12).toString('latin1'));
        if (cut === 'head') return void socket.destroy();
      }
      // The previous chunk's last bytes go in front, for a marker split across two chunks.
      const bytes = tail.length > 0 ? Buffer.concat([tail, chunk]) : chunk;
      outcome.frames += count(bytes, DATA, tail.length);
      if (count(bytes, END, tail.length) > 0) outcome.ended = true;
      if (count(bytes, ERROR, tail.length) > 0) outcome.failed = true;
      tail = Buffer.from(chunk.subarray(Math.max(0, chunk.length - 16)));
      if (cut === 'data' && outcome.frames > 0) socket.destroy();
    });
    socket.on('error', () => socket.destroy());
    socket.on('close', () => resolve(outcome));
  });
}
