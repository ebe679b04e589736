/**
 * Executes one stored run: marks it running, streams its chain and appends
 * every frame to its log as `/stream` (or `/stream_events`) would send it,
 * then records the output or the error. Cancellation and shutdown arrive as
 * the signal; a cancelled run ends `cancelled` with an `error` frame saying
 * so. A run is executed at most once: its log is what its clients read.
 */
import { addUsage, type UsageMetadata } from '../messages/index.js';
import { concat, isRunnelError, RunnelError, type EventFilters, type Runnable, type RunnableConfig } from '../core/index.js';
import type { RunFrame, RunRecord, RunStore } from './store.js';

/** What a chain failure looks like in a run's record and its `error` frame. */
export function runError(error: unknown): { status_code: number; code: string; message: string } {
  if (isRunnelError(error)) return { status_code: error.statusCode, code: error.code, message: error.code === 'RUNNEL_ERR_INTERNAL' ? 'Internal Server Error' : error.message };
  return { status_code: 500, code: 'RUNNEL_ERR_INTERNAL', message: 'Internal Server Error' };
}

/** Frames are written in batches: everything a chain yields within one tick goes in one round trip. */
class FrameWriter {
  private pending: Omit<RunFrame, 'id'>[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private scheduled = false;
  /** The first write that failed (Redis down): the run then fails, and later writes still try. */
  private failure: unknown;

  constructor(
    private readonly store: RunStore,
    private readonly runId: string,
    /** Hears the first failed write: the run is then stopped, not streamed on into a log nobody can read. */
    private readonly onFailure: (error: unknown) => void = () => {},
  ) {}

  push(frame: Omit<RunFrame, 'id'>): void {
    this.pending.push(frame);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      const batch = this.pending;
      this.pending = [];
      this.flushing = this.flushing.then(() =>
        this.store.append(this.runId, batch).then(
          () => undefined,
          (error: unknown) => {
            if (this.failure === undefined) this.onFailure(error);
            this.failure ??= error;
          },
        ),
      );
    });
  }

  /** Everything pushed so far, written; throws the first write that failed. */
  async drain(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    await this.flushing;
    if (batch.length > 0) await this.store.append(this.runId, batch);
    if (this.failure !== undefined) {
      const failure = this.failure;
      this.failure = undefined;
      throw failure;
    }
  }
}

/**
 * Runs `record` on `runnable`, writing its frames and outcome to `store`.
 *
 * @example
 * await executeRun({ record, runnable: chain.runnable, store, signal });
 */
export async function executeRun(options: { record: RunRecord; runnable: Runnable<never, unknown>; store: RunStore; signal: AbortSignal; log?: (error: unknown) => void }): Promise<RunRecord | undefined> {
  const { record, runnable, store } = options;
  const runId = record.run_id;
  // The run stops when it is cancelled or shut down (the caller's signal), or when its log cannot be written.
  const controller = new AbortController();
  const forward = (): void => controller.abort(options.signal.reason);
  if (options.signal.aborted) forward();
  else options.signal.addEventListener('abort', forward, { once: true });
  const signal = controller.signal;
  const writer = new FrameWriter(store, runId, (error) =>
    controller.abort(new RunnelError('RUNNEL_ERR_REDIS_UNAVAILABLE', 'Redis was unavailable while the run was under way', { cause: error })),
  );
  let usage: UsageMetadata | undefined;
  const config: RunnableConfig = { ...(record.config as RunnableConfig), signal, onUsage: (spent) => (usage = addUsage(usage, spent as UsageMetadata)) };
  let output: unknown;
  try {
    await store.update(runId, { status: 'running' });
    writer.push({ event: 'metadata', data: { run_id: runId } });
    let first = true;
    if (record.kind === 'stream_events') {
      for await (const event of runnable.streamEvents(record.input as never, config, (record.filters ?? {}) as EventFilters)) {
        writer.push({ event: 'data', data: event });
        if (event.parent_ids.length === 0 && event.event.endsWith('_end')) output = (event.data as { output?: unknown }).output;
      }
    } else {
      for await (const chunk of runnable.stream(record.input as never, config)) {
        output = first ? chunk : concat(output, chunk);
        first = false;
        writer.push({ event: 'data', data: chunk });
      }
    }
    // A step that ends "normally" when aborted (a model SDK) must not turn a cancelled run into a success.
    signal.throwIfAborted();
    writer.push({ event: 'end' });
    await writer.drain();
  } catch (error) {
    const reason = signal.aborted ? (signal.reason as unknown) : error;
    const cancelled = isRunnelError(reason, 'RUNNEL_ERR_RUN_CANCELLED');
    const failure = runError(cancelled ? reason : reason instanceof RunnelError ? reason : error);
    if (failure.code === 'RUNNEL_ERR_INTERNAL') options.log?.(error);
    writer.push({ event: 'error', data: failure });
    await writer.drain();
    return store.update(runId, { status: cancelled ? 'cancelled' : 'error', error: { code: failure.code, message: failure.message }, usage });
  } finally {
    options.signal.removeEventListener('abort', forward);
  }
  return store.update(runId, { status: 'success', output: JSON.parse(JSON.stringify(output ?? null)) as unknown, error: undefined, usage });
}
