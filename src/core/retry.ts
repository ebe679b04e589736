/**
 * `withRetry()`: runs again after a failure, with exponential backoff and
 * jitter, until an attempt succeeds or the attempts run out. Cancellation is
 * never retried, and the wait between attempts ends at once on abort. A
 * stream is retried only while it has yielded nothing.
 */
import { once, sleep } from './async.js';
import { isAbortError, isRunnelError } from './errors.js';
import { scopeWith } from './config.js';
import { Saves } from './saves.js';
import type { Graph, GraphSpan } from './graph.js';
import type { Run } from './run.js';
import { Runnable } from './runnable.js';
import { wiring } from './wiring.js';
import type { ZodType } from 'zod';

type AnyRunnable = Runnable<never, unknown>;

/** Options of `withRetry`. */
export interface RetryOptions {
  /** Attempts in all, the first included (default 3). */
  stopAfterAttempt?: number;
  /** The wait after the first failure, in ms (default 200); it doubles after each. */
  initialDelayMs?: number;
  /** The longest wait, in ms (default 10,000). */
  maxDelayMs?: number;
  /** Randomise each wait between half and all of it (default true). */
  jitter?: boolean;
  /** Retry only errors this returns true for. By default: every error but the ones marked not retryable. */
  retryIf?: (error: unknown, attempt: number) => boolean;
}

const defaultRetryIf = (error: unknown): boolean => !isRunnelError(error) || error.retryable;

/** A runnable retried on failure; see `Runnable.withRetry`. */
export class RunnableRetry<I, O> extends Runnable<I, O> {
  readonly name = 'RunnableRetry';
  readonly bound: Runnable<I, O>;
  private readonly attempts: number;
  private readonly initialDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly jitter: boolean;
  private readonly retryIf: (error: unknown, attempt: number) => boolean;

  constructor(bound: Runnable<I, O>, options: RetryOptions = {}) {
    super();
    this.bound = bound;
    this.attempts = Math.max(1, Math.floor(options.stopAfterAttempt ?? 3));
    this.initialDelayMs = Math.max(0, options.initialDelayMs ?? 200);
    this.maxDelayMs = Math.max(0, options.maxDelayMs ?? 10_000);
    this.jitter = options.jitter ?? true;
    this.retryIf = options.retryIf ?? defaultRetryIf;
  }

  override get inputSchema(): ZodType {
    return this.bound.inputSchema;
  }

  override get outputSchema(): ZodType {
    return this.bound.outputSchema;
  }

  override _outputSchemaFor(input: ZodType): ZodType {
    return this.bound._outputSchemaFor(input);
  }

  private shouldRetry(error: unknown, attempt: number): boolean {
    return attempt < this.attempts && !isAbortError(error) && this.retryIf(error, attempt);
  }

  /** The wait after failed attempt `attempt`: exponential, capped, with equal jitter. */
  private delay(attempt: number): number {
    const full = Math.min(this.maxDelayMs, this.initialDelayMs * 2 ** (attempt - 1));
    return this.jitter ? full / 2 + Math.random() * (full / 2) : full;
  }

  protected override async _call(input: I, run: Run): Promise<O> {
    for (let attempt = 1; ; attempt++) {
      // A failed attempt keeps no chat turn it saved (the next one saves its own): a succeeded one's go up.
      const saves = new Saves();
      try {
        const output = await this.bound._invokeIn(input, scopeWith(run.child([`retry:attempt:${attempt}`]), { onSave: saves.onSave }));
        saves.passTo(run.scope.onSave);
        return output;
      } catch (error) {
        await saves.takeBack();
        if (!this.shouldRetry(error, attempt)) throw error;
        await sleep(this.delay(attempt), run.signal);
      }
    }
  }

  protected override async *_stream(input: I, run: Run): AsyncGenerator<O> {
    for (let attempt = 1; ; attempt++) {
      let yielded = false;
      const saves = new Saves();
      try {
        for await (const chunk of this.bound._streamIn(once(input), scopeWith(run.child([`retry:attempt:${attempt}`]), { onSave: saves.onSave }), { value: input })) {
          yielded = true;
          yield chunk;
        }
        saves.passTo(run.scope.onSave);
        return;
      } catch (error) {
        await saves.takeBack();
        if (yielded || !this.shouldRetry(error, attempt)) throw error;
        await sleep(this.delay(attempt), run.signal);
      } finally {
        // Stopped by its reader (no error, no end): whoever answers for the run decides.
        saves.passTo(run.scope.onSave);
      }
    }
  }

  override _children(): AnyRunnable[] {
    return [this.bound as AnyRunnable];
  }

  override _graph(graph: Graph): GraphSpan {
    return this.bound._graph(graph);
  }
}

wiring.retry = (bound, options) => new RunnableRetry(bound, options) as AnyRunnable;
