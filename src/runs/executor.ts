/**
 * Executes one stored run: marks it running, streams its chain and appends
 * every frame to its log as `/stream` (or `/stream_events`) would send it,
 * then records the output or the error. Cancellation and shutdown arrive as
 * the signal; a cancelled run ends `cancelled` with an `error` frame saying
 * so. A run is executed at most once: its log is what its clients read.
 */
import { addUsage, type UsageMetadata } from '../messages/index.js';
import { CancelToken, concat, isRunnelError, onAbort, RunnelError, type Cancellation, type EventCallback, type EventFilters, type Runnable, type RunnableConfig } from '../core/index.js';
import { isLastFrame, type RunFrame, type RunRecord, type RunStore } from './store.js';

/** What a chain failure looks like in a run's record and its `error` frame. */
export function runError(error: unknown): { status_code: number; code: string; message: string } {
  if (isRunnelError(error)) return { status_code: error.statusCode, code: error.code, message: error.code === 'RUNNEL_ERR_INTERNAL' ? 'Internal Server Error' : error.message };
  return { status_code: 500, code: 'RUNNEL_ERR_INTERNAL', message: 'Internal Server Error' };
}

/** Frames are written in batches: everything a chain yields within one tick goes in one round trip. */
class FrameWriter {
  private pending: RunFrame[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private scheduled = false;
  /** The first write that failed (Redis down): the run then fails, and later writes still try. */
  private failure: unknown;

  constructor(
    private readonly store: RunStore,
    private readonly runId: string,
    /** Hears the first failed write: the run is then stopped, not streamed on into a log nobody can read. */
    private readonly onFailure: (error: unknown) => void,
    /** The next frame id (ids are made here, so a frame can reach a local reader before it is written). */
    private readonly nextId: () => string,
    /** A reader in this process: each frame, with its id, as soon as it is made. */
    private readonly onFrame: ((frame: RunFrame) => void) | undefined,
  ) {}

  /** Queues a frame for the log and hands it to the local reader — the last one only once the record says so. */
  push(event: RunFrame['event'], data?: unknown): RunFrame {
    // Serialised once here: the log and the local reader both take this JSON.
    const frame: RunFrame = { id: this.nextId(), event, data, json: data === undefined ? undefined : JSON.stringify(data) };
    this.pending.push(frame);
    if (!isLastFrame(frame)) this.onFrame?.(frame);
    if (this.scheduled) return frame;
    this.scheduled = true;
    process.nextTick(() => {
      this.scheduled = false;
      const batch = this.pending;
      // `end()` took them already (a run that ends in the tick it made its frames): nothing to write.
      if (batch.length === 0) return;
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
    return frame;
  }

  /** The last frame to the local reader, once the run's record has ended. */
  deliver(frame: RunFrame): void {
    this.onFrame?.(frame);
  }

  /**
   * Everything pushed so far, written, and the record ended with `patch` — the last batch and the record in
   * one round trip. Throws the first write that failed (before ending anything).
   */
  async end(patch: Partial<RunRecord>, base: RunRecord | undefined, local: boolean): Promise<RunRecord | undefined> {
    const batch = this.pending;
    this.pending = [];
    await this.flushing;
    if (this.failure !== undefined) {
      const failure = this.failure;
      this.failure = undefined;
      throw failure;
    }
    return this.store.end(this.runId, batch, patch, base, { local });
  }
}

/**
 * Runs `record` on `runnable`, writing its frames and outcome to `store`.
 *
 * @example
 * await executeRun({ record, runnable: chain.runnable, store, signal });
 */
export async function executeRun(options: {
  record: RunRecord;
  runnable: Runnable<never, unknown>;
  store: RunStore;
  signal: Cancellation;
  log?: (error: unknown) => void;
  /** A reader in this process (the durable stream's own client): frames as they are made, before they are written. */
  onFrame?: (frame: RunFrame) => void;
  /** The run executes outside the queue: its heartbeat is forgotten as it ends. */
  local?: boolean;
  /** Tracing: a run-event callback for the trace the run was submitted in (its `__traceparent`). */
  trace?: (traceparent: string | undefined) => EventCallback;
}): Promise<RunRecord | undefined> {
  const { record, runnable, store } = options;
  const local = options.local === true;
  const runId = record.run_id;
  // The run stops when it is cancelled or shut down (the caller's signal), or when its log cannot be written.
  // A CancelToken: the chain's steps listen to it without an AbortSignal's EventTarget (one is made only for an SDK).
  const controller = new CancelToken();
  const stopForwarding = onAbort(options.signal, () => controller.abort(options.signal.reason));
  if (options.signal.aborted) controller.abort(options.signal.reason);
  const signal = controller;
  const writer = new FrameWriter(
    store,
    runId,
    (error) => controller.abort(new RunnelError('RUNNEL_ERR_REDIS_UNAVAILABLE', 'Redis was unavailable while the run was under way', { cause: error })),
    store.frameIds(Date.now()),
    options.onFrame,
  );
  let usage: UsageMetadata | undefined;
  const stored = record.config as RunnableConfig;
  // The trace goes on from the request that submitted the run, in whichever process runs it.
  const traceparent = stored.metadata?.__traceparent;
  const callbacks = options.trace === undefined ? {} : { callbacks: [options.trace(typeof traceparent === 'string' ? traceparent : undefined)] };
  const config: RunnableConfig = { ...stored, ...callbacks, signal, onUsage: (spent) => (usage = addUsage(usage, spent as UsageMetadata)) };
  let output: unknown;
  let base: RunRecord | undefined = record;
  try {
    // A run stored as running (executed where it was submitted) needs no second write to say so.
    // A queued run: marked running unless its cancel came first (one step in the store).
    if (record.status !== 'running') {
      const started = await store.start(runId, record);
      if (started.cancelled) throw new RunnelError('RUNNEL_ERR_RUN_CANCELLED', 'The run was cancelled');
      // Ended meanwhile, gone, or another worker's: nothing to run, and nothing to say about it.
      if (!started.started) return undefined;
      base = started.record;
    }
    writer.push('metadata', { run_id: runId });
    let first = true;
    if (record.kind === 'stream_events') {
      for await (const event of runnable.streamEvents(record.input as never, config, (record.filters ?? {}) as EventFilters)) {
        writer.push('data', event);
        if (event.parent_ids.length === 0 && event.event.endsWith('_end')) output = (event.data as { output?: unknown }).output;
      }
    } else {
      for await (const chunk of runnable.stream(record.input as never, config)) {
        output = first ? chunk : concat(output, chunk);
        first = false;
        writer.push('data', chunk);
      }
    }
    // A step that ends "normally" when aborted (a model SDK) must not turn a cancelled run into a success.
    signal.throwIfAborted();
    const last = writer.push('end');
    const ended = await writer.end({ status: 'success', output: JSON.parse(JSON.stringify(output ?? null)) as unknown, error: undefined, usage }, base, local);
    writer.deliver(last);
    return ended;
  } catch (error) {
    const reason = signal.aborted ? (signal.reason as unknown) : error;
    const cancelled = isRunnelError(reason, 'RUNNEL_ERR_RUN_CANCELLED');
    const failure = runError(cancelled ? reason : reason instanceof RunnelError ? reason : error);
    if (failure.code === 'RUNNEL_ERR_INTERNAL') options.log?.(error);
    const frame = writer.push('error', failure);
    const ended = await writer.end({ status: cancelled ? 'cancelled' : 'error', error: { code: failure.code, message: failure.message }, usage }, base, local);
    writer.deliver(frame);
    return ended;
  } finally {
    stopForwarding();
  }
}
