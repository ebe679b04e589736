/**
 * The client side of `npm run bench:load`, in its own process so the
 * server's event loop is measured alone: opens N SSE streams to 127.0.0.1,
 * records each one's time to first token, counts frames and errors, and
 * prints one JSON line of results.
 *
 * It shares the machine's cores with the server, so it does as little as a
 * client can: raw TCP sockets, one prepared request per stream, and frames
 * counted by searching the received bytes — no HTTP parser, no decoding.
 *
 * tsx bench/load-client.ts <url> <streams> [overflow]
 */
import { connect, type Socket } from 'node:net';

const [url = '', streamsArg = '1000', overflowArg = '0'] = process.argv.slice(2);
const target = new URL(url);
const streams = Number(streamsArg);
const overflow = Number(overflowArg);

const DATA = Buffer.from('event: data\r\n');
const ERROR = Buffer.from('event: error');
const END = Buffer.from('event: end');

interface Outcome {
  status: number;
  ttftMs: number | undefined;
  frames: number;
  error: string | undefined;
  /** Time from sending the request to its status line. */
  statusMs: number;
}

function requestBytes(topic: string): Buffer {
  const body = JSON.stringify({ input: { topic } });
  return Buffer.from(
    `POST ${target.pathname} HTTP/1.1\r\nHost: ${target.host}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** Counts the occurrences of `needle` in `bytes` that end past `from` (so none is counted twice across chunks). */
function count(bytes: Buffer, needle: Buffer, from: number): number {
  let n = 0;
  for (let at = bytes.indexOf(needle); at !== -1; at = bytes.indexOf(needle, at + needle.length)) if (at + needle.length > from) n++;
  return n;
}

/**
 * Opens one stream. With `untilStatus`, resolves as soon as the status line
 * arrives and closes the socket (the requests past the limit).
 */
function open(topic: string, untilStatus = false): Promise<Outcome> {
  return new Promise((resolve) => {
    const started = performance.now();
    const outcome: Outcome = { status: 0, ttftMs: undefined, frames: 0, error: undefined, statusMs: NaN };
    let tail = Buffer.alloc(0);
    let settled = false;
    const settle = (socket: Socket): void => {
      if (settled) return;
      settled = true;
      if (outcome.status === 200 && outcome.error === undefined && !sawEnd && !untilStatus) outcome.error = 'ended without an end frame';
      socket.destroy();
      resolve(outcome);
    };
    let sawEnd = false;
    const socket = connect({ host: target.hostname, port: Number(target.port) }, () => socket.write(requestBytes(topic)));
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => {
      if (outcome.status === 0) {
        // "HTTP/1.1 200 OK": the status is bytes 9-11 of the first chunk.
        outcome.status = Number(chunk.subarray(9, 12).toString('latin1'));
        outcome.statusMs = performance.now() - started;
        if (untilStatus) return settle(socket);
        if (outcome.status !== 200) outcome.error = `status ${outcome.status}`;
      }
      // The previous chunk's last bytes go in front, for a marker split across two chunks.
      const bytes = tail.length > 0 ? Buffer.concat([tail, chunk]) : chunk;
      const frames = count(bytes, DATA, tail.length);
      if (frames > 0 && outcome.ttftMs === undefined) outcome.ttftMs = performance.now() - started;
      outcome.frames += frames;
      if (count(bytes, ERROR, tail.length) > 0) outcome.error = 'error frame';
      if (count(bytes, END, tail.length) > 0) sawEnd = true;
      tail = Buffer.from(chunk.subarray(Math.max(0, chunk.length - 16)));
    });
    socket.on('error', (error) => {
      outcome.error ??= error.message;
      settle(socket);
    });
    socket.on('close', () => settle(socket));
  });
}

// Streams open over RAMP_MS (default 2 s, 1 every 2 ms), as users arrive, not in one instant.
const rampMs = Number(process.env.BENCH_RAMP_MS ?? 2000);
const outcomes = Array.from(
  { length: streams },
  (_, i) => new Promise<Outcome>((resolve) => setTimeout(() => resolve(open(`load ${i}`)), (i * rampMs) / streams)),
);
// Once every stream has had time to open, ask for more than the limit allows, all at once.
await new Promise((resolve) => setTimeout(resolve, rampMs + 3000));
const extra = await Promise.all(Array.from({ length: overflow }, (_, i) => open(`extra ${i}`, true)));
const done = await Promise.all(outcomes);
const ttft = done.map((o) => o.ttftMs).filter((t): t is number => t !== undefined);
console.log(
  JSON.stringify({
    streams,
    errors: done.filter((o) => o.error !== undefined).length,
    errorKinds: [...new Set(done.map((o) => o.error).filter(Boolean))],
    frames: done.reduce((sum, o) => sum + o.frames, 0),
    overflow: extra.length,
    overflow503: extra.filter((e) => e.status === 503).length,
    ttft,
    overflowMs: extra.map((e) => e.statusMs),
  }),
);
