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

  constructor(
    private readonly store: RunStore,
    private readonly runId: string,
  ) {}

  push(frame: Omit<RunFrame, 'id'>): void {
    this.pending.push(frame);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      const batch = this.pending;
      this.pending = [];
      this.flushing = this.flushing.then(() => this.store.append(this.runId, batch).then(() => undefined));
    });
  }

  /** Everything pushed so far, written. */
  async drain(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    await this.flushing;
    if (batch.length > 0) await this.store.append(this.runId, batch);
  }
}

/**
 * Runs `record` on `runnable`, writing its frames and outcome to `store`.
 *
 * @example
 * await executeRun({ record, runnable: chain.runnable, store, signal });
 */
export async function executeRun(options: { record: RunRecord; runnable: Runnable<never, unknown>; store: RunStore; signal: AbortSignal; log?: (error: unknown) => void }): Promise<RunRecord | undefined> {
  const { record, runnable, store, signal } = options;
  const runId = record.run_id;
  const writer = new FrameWriter(store, runId);
  let usage: UsageMetadata | undefined;
  const config: RunnableConfig = { ...(record.config as RunnableConfig), signal, onUsage: (spent) => (usage = addUsage(usage, spent as UsageMetadata)) };
  await store.update(runId, { status: 'running' });
  writer.push({ event: 'metadata', data: { run_id: runId } });
  try {
    let output: unknown;
    let first = true;
    if (record.kind === 'stream_events') {
      for await (const event of runnable.streamEvents(record.input as never, config, (record.filters ?? {}) as EventFilters)) {
        writer.push({ event: 'data', data: event });
        if (event.run_id === runId && event.event.endsWith('_end')) output = (event.data as { output?: unknown }).output;
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
    return await store.update(runId, { status: 'success', output: JSON.parse(JSON.stringify(output ?? null)) as unknown, usage });
  } catch (error) {
    const reason = signal.aborted ? (signal.reason as unknown) : error;
    const cancelled = isRunnelError(reason, 'RUNNEL_ERR_RUN_CANCELLED');
    const failure = runError(cancelled ? reason : reason instanceof RunnelError ? reason : error);
    if (failure.code === 'RUNNEL_ERR_INTERNAL') options.log?.(error);
    writer.push({ event: 'error', data: failure });
    await writer.drain();
    return await store.update(runId, { status: cancelled ? 'cancelled' : 'error', error: { code: failure.code, message: failure.message }, usage });
  }
}
