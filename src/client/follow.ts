/**
 * Following a background run's log over SSE, and rejoining it when the
 * connection drops: a durable `/stream` (`on_disconnect: "continue"`) and
 * `RemoteRunnable.join` read frames that each carry an id; after a network
 * error, or a body that ends without an `end` or `error` frame, the follower
 * reconnects to `/runs/{run_id}/stream` with `Last-Event-ID` — the server
 * sends exactly the frames after it, so the consumer sees every chunk once.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { isRunnelError, RunnelError } from '../core/index.js';
import { errorFromFrame } from './errors.js';
import { revive } from './revive.js';
import type { SseMessage } from './sse.js';

/** How a durable stream or a join rejoins its run after the connection drops. */
export interface ResumeOptions {
  /** Rejoins in a row that may bring no frame before the stream gives up (default 5; `0` never rejoins). */
  attempts?: number;
  /** The first rejoin is at once; the wait before the next one, doubling after each (default 250 ms). */
  delayMs?: number;
  /** The longest wait between two rejoins (default 5,000 ms). */
  maxDelayMs?: number;
}

/** The defaults of {@link ResumeOptions}. */
export const DEFAULT_RESUME: Required<ResumeOptions> = { attempts: 5, delayMs: 250, maxDelayMs: 5_000 };

/** Where a followed run stands: its id (once known) and the id of the last frame received. */
export interface RunCursor {
  runId?: string;
  lastEventId?: string;
}

/**
 * A run's output chunks, as they come. `lastEventId` is the id of the last
 * frame received before the `end` or `error` frame: a stream that has given
 * up can be joined again after it.
 *
 * @example
 * const chunks = joke.join(runId, { lastEventId });
 * for await (const token of chunks) process.stdout.write(token);
 */
export interface RunStream<T> extends AsyncGenerator<T> {
  readonly runId: string | undefined;
  readonly lastEventId: string | undefined;
}

/** A generator with the cursor's fields readable on it. */
export function runStream<T>(generator: AsyncGenerator<T>, cursor: RunCursor): RunStream<T> {
  return Object.defineProperties(generator, {
    runId: { get: () => cursor.runId, enumerable: true },
    lastEventId: { get: () => cursor.lastEventId, enumerable: true },
  }) as RunStream<T>;
}

/** What {@link followRun} needs from the client. */
export interface FollowOptions {
  /** Opens the first connection (`rejoin` false) or a rejoin (the cursor then has the run id); throws the client's errors. */
  connect: (cursor: Readonly<RunCursor>, rejoin: boolean) => Promise<AsyncIterable<SseMessage>>;
  resume: Required<ResumeOptions>;
  /** The call's signal (the caller's and the client's timeout): once it fired, nothing is retried. */
  signal: AbortSignal | undefined;
  /** The error for a failure while reading or waiting: aborted, timed out, or the connection broke. */
  failure: (error: unknown) => RunnelError;
  /** The stream's URL, for messages. */
  where: string;
  /** Hears the run's id once the server names it (a durable stream's `metadata` frame). */
  onRunId?: (runId: string) => void;
}

function runIdOf(data: string): string | undefined {
  try {
    const runId = (JSON.parse(data) as { run_id?: unknown } | null)?.run_id;
    return typeof runId === 'string' && runId !== '' ? runId : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The revived `data` payloads of a run's frames, from the cursor on; updates
 * the cursor as frames arrive. An `error` frame throws its error; `end` ends.
 */
export async function* followRun(cursor: RunCursor, options: FollowOptions): AsyncGenerator<unknown> {
  const { resume, signal } = options;
  let failures = 0;
  // A data frame without an id cannot be resumed after: a rejoin could send it again.
  let unmarked = false;
  for (let rejoin = false; ; rejoin = true) {
    let cause: unknown;
    let messages: AsyncIterator<SseMessage> | undefined;
    try {
      messages = (await options.connect(cursor, rejoin))[Symbol.asyncIterator]();
    } catch (error) {
      if (signal?.aborted === true || cursor.runId === undefined || !isRunnelError(error) || !error.retryable) throw error;
      cause = error;
    }
    if (messages !== undefined) {
      try {
        for (;;) {
          let step: IteratorResult<SseMessage>;
          try {
            step = await messages.next();
          } catch (error) {
            if (signal?.aborted === true) throw options.failure(error);
            cause = error;
            break;
          }
          if (step.done === true) break;
          const message = step.value;
          if (message.id === undefined) unmarked ||= message.event === 'data';
          else {
            // The cursor stays before the end (or error) frame: joining after it replays that frame, not nothing.
            if (message.event !== 'end' && message.event !== 'error') cursor.lastEventId = message.id;
            failures = 0;
          }
          // Only a durable stream's metadata (it has an id) names a run that can be rejoined.
          if (message.event === 'metadata' && message.id !== undefined) {
            if (cursor.runId === undefined) {
              cursor.runId = runIdOf(message.data);
              if (cursor.runId !== undefined) options.onRunId?.(cursor.runId);
            }
          }
          else if (message.event === 'error') throw errorFromFrame(message.data);
          else if (message.event === 'end') return;
          else if (message.event === 'data' && message.data !== '') yield revive(JSON.parse(message.data));
        }
      } finally {
        await messages.return?.();
      }
    }
    if (cursor.runId === undefined || unmarked || failures >= resume.attempts) {
      const rejoinable = cursor.runId !== undefined && !unmarked;
      throw new RunnelError(
        'RUNNEL_ERR_PROVIDER_UNAVAILABLE',
        rejoinable
          ? `${options.where} broke off${failures > 0 ? ` and ${failures} rejoins brought nothing` : ''}; run ${cursor.runId} goes on: join it after ${cursor.lastEventId ?? 'its start'}`
          : `${options.where} broke off the stream`,
        { cause, detail: rejoinable ? { run_id: cursor.runId, last_event_id: cursor.lastEventId ?? null } : undefined },
      );
    }
    failures += 1;
    const wait = failures === 1 ? 0 : Math.min(resume.maxDelayMs, resume.delayMs * 2 ** (failures - 2));
    try {
      await sleep(wait, undefined, { signal });
    } catch (error) {
      throw options.failure(error);
    }
  }
}
