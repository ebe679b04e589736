/**
 * The client side of `npm run bench:load`, in its own process so the
 * server's event loop is measured alone: opens N SSE streams at once to
 * 127.0.0.1, records each one's time to first token, counts errors, and
 * prints one JSON line of results.
 *
 * tsx bench/load-client.ts <url> <streams> [overflow]
 */
import { Agent, request } from 'node:http';

const [url = '', streamsArg = '1000', overflowArg = '0'] = process.argv.slice(2);
const streams = Number(streamsArg);
const overflow = Number(overflowArg);
const agent = new Agent({ keepAlive: false, maxSockets: Infinity });

interface Outcome {
  ttftMs: number | undefined;
  frames: number;
  error: string | undefined;
}

function open(body: string): Promise<Outcome> {
  return new Promise((resolve) => {
    const started = performance.now();
    const outcome: Outcome = { ttftMs: undefined, frames: 0, error: undefined };
    const req = request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      if (res.statusCode !== 200) {
        outcome.error = `status ${res.statusCode}`;
        res.resume();
        res.on('end', () => resolve(outcome));
        return;
      }
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        const frames = chunk.split('event: data').length - 1;
        if (frames > 0 && outcome.ttftMs === undefined) outcome.ttftMs = performance.now() - started;
        outcome.frames += frames;
        if (chunk.includes('event: error')) outcome.error = 'error frame';
      });
      res.on('end', () => resolve(outcome));
      res.on('error', (error) => {
        outcome.error = error.message;
        resolve(outcome);
      });
    });
    req.on('error', (error) => {
      outcome.error = error.message;
      resolve(outcome);
    });
    req.end(body);
  });
}

/** Requests past the limit: how fast the 503 comes. */
function overflowRequest(body: string): Promise<{ status: number; ms: number }> {
  return new Promise((resolve) => {
    const started = performance.now();
    const req = request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0, ms: performance.now() - started });
      res.destroy();
    });
    req.on('error', () => resolve({ status: 0, ms: performance.now() - started }));
    req.end(body);
  });
}

const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
};

// Streams open over RAMP_MS (default 2 s, 1 every 2 ms), as users arrive, not in one instant.
const rampMs = Number(process.env.BENCH_RAMP_MS ?? 2000);
const outcomes = Array.from(
  { length: streams },
  (_, i) => new Promise<Outcome>((resolve) => setTimeout(() => resolve(open(JSON.stringify({ input: { topic: `load ${i}` } }))), (i * rampMs) / streams)),
);
// Once every stream has had time to open, ask for more than the limit allows.
await new Promise((resolve) => setTimeout(resolve, rampMs + 3000));
const extra = await Promise.all(Array.from({ length: overflow }, (_, i) => overflowRequest(JSON.stringify({ input: { topic: `extra ${i}` } }))));
const done = await Promise.all(outcomes);
const ttft = done.map((o) => o.ttftMs).filter((t): t is number => t !== undefined);
console.log(
  JSON.stringify({
    streams,
    errors: done.filter((o) => o.error !== undefined).length,
    errorKinds: [...new Set(done.map((o) => o.error).filter(Boolean))],
    frames: done.reduce((sum, o) => sum + o.frames, 0),
    ttftP50: percentile(ttft, 50),
    ttftP99: percentile(ttft, 99),
    overflow: extra.length,
    overflow503: extra.filter((e) => e.status === 503).length,
    overflowP50: percentile(extra.map((e) => e.ms), 50),
    overflowMax: Math.max(...extra.map((e) => e.ms)),
    ttft,
    overflowMs: extra.map((e) => e.ms),
  }),
);
