/**
 * Executes one stored run: marks it running, streams its chain and appends
 * every frame to its log as `/stream` (or `/stream_events`) would send it,
 * then records the output or the error. Cancellation and shutdown arrive as
 * the signal; a cancelled run ends `cancelled` with an `error` frame saying
 * so. A run is executed at most once: its log is what its clients read.
 */
import { addUsage, type UsageMetadata } from '../messages/index.js';
import { providerFailure } from '../models/errors.js';
import { CancelToken, ChunkSum, isRunnelError, onAbort, RunnelError, Saves, type Cancellation, type EventCallback, type EventFilters, type Runnable, type RunnableConfig } from '../core/index.js';
import { eventFilter, runTypeOf } from '../core/events.js';
import { publicErrors } from './public-errors.js';
import { isLastFrame, RunEnded, runConfig, TERMINAL, type RunFrame, type RunRecord, type RunStore } from './store.js';

/** What a chain failure looks like in a run's record and its `error` frame. */
export function runError(error: unknown): { status_code: number; code: string; message: string } {
  if (isRunnelError(error)) return { status_code: error.statusCode, code: error.code, message: error.code === 'RUNNEL_ERR_INTERNAL' ? 'Internal Server Error' : error.message };
  return { status_code: 500, code: 'RUNNEL_ERR_INTERNAL', message: 'Internal Server Error' };
}

/** What counts a run's model calls and tokens where the process is watched (its `/metrics`). */
export type RunMeter = Pick<RunnableConfig, 'onUsage' | 'onModelCall'>;

/** A reader of a run in the process that executes it (a durable stream's own client). */
export interface RunReader {
  /** Each frame, with its id, as soon as it is made (before it is written); the last one once the record has ended. */
  frame(frame: RunFrame): void;
  /** The run made its last frame and its end is being written: what the reader still has to send may wait for it. */
  ending?(): void;
}

/**
 * A run executed here whose record could not be stored (the write that carried it failed): nothing of it is
 * known elsewhere, and nothing is left to end. Its cause is the store's error.
 */
export class RunNotStored extends Error {
  constructor(cause: unknown) {
    super('The run could not be stored', { cause });
  }
}

/**
 * Frames are written in batches: everything a chain yields within one tick goes in one round trip. A run
 * whose record is not stored yet has it stored by its first write, and its frames reach the reader only then
 * (a client that rejoins after any frame it saw finds the run, on any replica).
 */
class FrameWriter {
  private pending: RunFrame[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private scheduled = false;
  /**
   * The first write that failed (Redis down): the run then fails, and the writes queued behind it are not
   * made — each would wait out its own timeout (a token a tick, Redis frozen: seconds before the client heard
   * why), and the log would have a gap where the failed write was.
   */
  private failure: unknown;
  /** The record, until a write takes it to the store. */
  private unstored: RunRecord | undefined;
  /** Frames for the reader, waiting for the record to be stored. */
  private held: RunFrame[] | undefined;
  /** Why the write that carried the record failed: then nothing more is written. */
  private notStored: unknown;
  /** The run was ended elsewhere while it ran (a sweep took it for lost): nothing more is written, or heard. */
  private endedElsewhere = false;
  /** The id of the last frame written to the log. */
  private lastWritten: string | undefined;

  constructor(
    private readonly store: RunStore,
    private readonly runId: string,
    /** Hears the first failed write: the run is then stopped, not streamed on into a log nobody can read. */
    private readonly onFailure: (error: unknown) => void,
    /** The next frame id (ids are made here, so a frame can reach a local reader before it is written). */
    private readonly nextId: () => string,
    /** A reader in this process: each frame, with its id, as soon as it is made. */
    private readonly reader: RunReader | undefined,
    /** The run's record when it is not stored yet. */
    unstored: RunRecord | undefined,
  ) {
    this.unstored = unstored;
    this.held = unstored === undefined ? undefined : [];
  }

  /** Queues a frame for the log and hands it to the local reader — the last one only once the record says so. */
  push(event: RunFrame['event'], data?: unknown): RunFrame {
    // Serialised once here: the log and the local reader both take this JSON.
    const frame: RunFrame = { id: this.nextId(), event, data, json: data === undefined ? undefined : JSON.stringify(data) };
    this.pending.push(frame);
    // Once the run has ended elsewhere, its reader hears no more of this execution: only the log's end.
    if (!isLastFrame(frame) && !this.endedElsewhere) {
      if (this.held !== undefined) this.held.push(frame);
      else this.reader?.frame(frame);
    }
    if (this.scheduled) return frame;
    this.scheduled = true;
    process.nextTick(() => {
      this.scheduled = false;
      const batch = this.pending;
      // `end()` took them already (a run that ends in the tick it made its frames): nothing to write.
      if (batch.length === 0) return;
      this.pending = [];
      const create = this.takeRecord();
      this.flushing = this.flushing.then(() => {
        if (this.notStored !== undefined || this.endedElsewhere || this.failure !== undefined) return undefined;
        return this.store.append(this.runId, batch, { create }).then(
          () => {
            this.lastWritten = batch[batch.length - 1]?.id;
            if (create !== undefined) this.stored();
          },
          (error: unknown) => {
            if (error instanceof RunEnded) this.endedElsewhere = true;
            if (create !== undefined) this.notStored = error;
            if (this.failure === undefined) this.onFailure(error);
            this.failure ??= error;
          },
        );
      });
    });
    return frame;
  }

  /**
   * The last frame to the local reader, once the run's record has ended: its own — or, when the run was ended
   * elsewhere first, the end its log holds, so the reader hears what any client that joins the run hears.
   */
  async deliver(frame: RunFrame): Promise<void> {
    if (this.reader === undefined) return;
    if (this.endedElsewhere) {
      try {
        // The log's end follows the last frame this execution wrote; a read gives a page of the log at a time.
        let cursor = this.lastWritten;
        for (let pages = 0; pages < 1_000; pages++) {
          const page = await this.store.frames(this.runId, cursor);
          if (page.length === 0) break;
          frame = page.findLast(isLastFrame) ?? frame;
          cursor = page[page.length - 1]?.id;
        }
      } catch {
        // The store is unavailable again: the reader gets this execution's own last frame.
      }
    }
    this.reader.frame(frame);
  }

  /** The record, for the write about to be made (which then stores it). */
  private takeRecord(): RunRecord | undefined {
    const record = this.unstored;
    this.unstored = undefined;
    return record;
  }

  /** The record is stored: the frames held for the reader go to it, and the next ones as they come. */
  private stored(): void {
    const held = this.held ?? [];
    this.held = undefined;
    for (const frame of held) this.reader?.frame(frame);
  }

  /**
   * Everything pushed so far, written, and the record ended with `patch` — the last batch and the record in
   * one round trip (a run that ends before its first write: stored, written and ended in that one). Throws the
   * first write that failed (before ending anything); {@link RunNotStored} when the record could not be stored.
   * Resolves undefined when the run was ended elsewhere meanwhile (a sweep took it for lost), which wrote its
   * end, told its followers and its webhook.
   */
  async end(patch: Partial<RunRecord>, base: RunRecord | undefined, forget: boolean): Promise<RunRecord | undefined> {
    this.reader?.ending?.();
    const batch = this.pending;
    this.pending = [];
    await this.flushing;
    if (this.notStored !== undefined) throw new RunNotStored(this.notStored);
    // Ended elsewhere: its record says how, and its log has its end; nothing of this execution's is added
    // (its heartbeat goes, as its last write would have taken it).
    if (this.endedElsewhere) {
      if (forget) await this.store.forget(this.runId).catch(() => undefined);
      return undefined;
    }
    if (this.failure !== undefined) {
      const failure = this.failure;
      this.failure = undefined;
      throw failure;
    }
    const create = this.takeRecord();
    try {
      const ended = await this.store.end(this.runId, batch, patch, base, { local: forget, create });
      if (create !== undefined) this.stored();
      return ended;
    } catch (error) {
      if (error instanceof RunEnded) {
        this.endedElsewhere = true;
        return undefined;
      }
      if (create === undefined) throw error;
      this.notStored = error;
      throw new RunNotStored(error);
    }
  }
}

/**
 * Runs `record` on `runnable`, writing its frames and outcome to `store`. Resolves with the ended record —
 * or undefined when there was nothing to run (ended, gone, another worker's), or when the run was ended
 * elsewhere while it ran: then it stops, and its reader hears the end the run's log holds.
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
  /** Hears a model provider's failure under the run: its safe fields (`providerFailure`) and the run id. */
  warn?: (fields: Record<string, unknown>, message: string) => void;
  /** A reader in this process (the durable stream's own client): frames as they are made, before they are written. */
  reader?: RunReader;
  /**
   * The run executes outside the queue: its heartbeat is forgotten as it ends; and its record (status
   * `running`) is not stored yet — its first write stores it, so the chain starts without waiting for the
   * store, and a run that ends within its first tick is one write. Resolves, or throws {@link RunNotStored}.
   */
  local?: boolean;
  /** Tracing: a run-event callback for the trace the run was submitted in (its `__traceparent` and `__tracestate`). */
  trace?: (traceparent: string | undefined, tracestate: string | undefined) => EventCallback;
  /** Hears the run's model calls and tokens beside its record (this process's `/metrics`). */
  meter?: RunMeter;
  /**
   * The end about to be written, stamped (`updated_at`) by the caller, who can then tell this execution's end
   * from another's when the write's outcome was unknown (the queue's `OwnEnds`).
   */
  ending?: (patch: Partial<RunRecord>) => Partial<RunRecord>;
}): Promise<RunRecord | undefined> {
  const { record, runnable, store } = options;
  const local = options.local === true;
  const ending = options.ending ?? ((patch: Partial<RunRecord>) => patch);
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
    (error) =>
      controller.abort(
        error instanceof RunEnded
          ? // Ended elsewhere (taken for lost): nobody hears the rest of it, and its model calls are stopped.
            new RunnelError('RUNNEL_ERR_RUN_LOST', 'The run was ended elsewhere while it ran')
          : new RunnelError('RUNNEL_ERR_REDIS_UNAVAILABLE', 'Redis was unavailable while the run was under way', { cause: error }),
      ),
    // A queued run may be executed again (redelivered): its ids start from now, after any earlier execution's.
    // A run executed here once (a durable stream) starts from 1: `1-0`, `1-1`… — 13 bytes fewer on every frame
    // sent and logged than a millisecond count. (Anything written to its log from elsewhere — the sweep's
    // `error` frame — gets an id after its last frame, whatever this process's clock says.)
    store.frameIds(local ? 1 : Date.now()),
    options.reader,
    local ? record : undefined,
  );
  let usage: UsageMetadata | undefined;
  const stored = runConfig(record.config) as RunnableConfig;
  // The trace goes on from the request that submitted the run, in whichever process runs it.
  const { __traceparent: traceparent, __tracestate: tracestate } = stored.metadata ?? {};
  const callbacks =
    options.trace === undefined ? {} : { callbacks: [options.trace(typeof traceparent === 'string' ? traceparent : undefined, typeof tracestate === 'string' ? tracestate : undefined)] };
  // The last model call's finish reason goes in the log's `end` (the AI SDK's `finish` says `length` from it)
  // and in the record (a background run's caller learns its answer was cut).
  let finishReason: string | undefined;
  // A run that ends other than in success (failed, cancelled, its end unwritten) keeps no chat turn a step saved.
  const saves = new Saves();
  const config: RunnableConfig = {
    ...stored,
    ...callbacks,
    signal,
    onSave: saves.onSave,
    onUsage: (spent, model) => {
      usage = addUsage(usage, spent as UsageMetadata);
      options.meter?.onUsage?.(spent, model);
    },
    onModelCall: (call) => {
      if (call.finishReason !== undefined) finishReason = call.finishReason;
      options.meter?.onModelCall?.(call);
    },
  };
  let output: unknown;
  let base: RunRecord | undefined = record;
  // The success end is being written: a write of it that fails here (timed out) may still have run, and then the
  // run succeeded and keeps its turn (see `takeBackUnlessSucceeded`).
  let endingSuccess: Partial<RunRecord> | undefined;
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
    if (record.kind === 'stream_events') {
      // Filtered here, not by the chain: the root run's end (the output `/invoke` gives, which the record keeps)
      // is read whether or not the filters let its event through to the log.
      const accept = eventFilter(record.filters as EventFilters | undefined);
      for await (const event of publicErrors('stream_events', runnable.streamEvents(record.input as never, config))) {
        if (event.parent_ids.length === 0 && event.event.endsWith('_end')) output = (event.data as { output?: unknown }).output;
        if (accept === undefined || accept(event, runTypeOf(event))) writer.push('data', event);
      }
    } else {
      // Added up as they come (ChunkSum: message chunks in one pass once it ends; a concat per chunk re-read a tool
      // call's arguments so far at every token).
      const chunks = new ChunkSum<unknown>();
      for await (const chunk of runnable.stream(record.input as never, config)) {
        chunks.push(chunk);
        writer.push('data', chunk ?? null);
      }
      output = chunks.value();
    }
    // A step that ends "normally" when aborted (a model SDK) must not turn a cancelled run into a success.
    signal.throwIfAborted();
    const last = writer.push('end', finishReason === undefined ? undefined : { finish_reason: finishReason });
    // The output as JSON gives it back (a string is that already: a chain's text is not copied twice over).
    endingSuccess = ending({ status: 'success', output: typeof output === 'string' ? output : (JSON.parse(JSON.stringify(output ?? null)) as unknown), error: undefined, usage, ...(finishReason === undefined ? {} : { finish_reason: finishReason }) });
    const ended = await writer.end(endingSuccess, base, true);
    // Ended elsewhere first (a cancel, a sweep: no record, or theirs): the run's end is not this success, and its
    // turn goes too.
    if (ended?.status !== 'success') await saves.takeBack();
    await writer.deliver(last);
    return ended;
  } catch (error) {
    // (A run never stored was refused to its client, whatever its write did: its turn goes.)
    if (endingSuccess === undefined || error instanceof RunNotStored) await saves.takeBack();
    // Never stored: there is no record to end, and nobody who could have seen a frame.
    if (error instanceof RunNotStored) throw error;
    const reason = signal.aborted ? (signal.reason as unknown) : error;
    const cancelled = isRunnelError(reason, 'RUNNEL_ERR_RUN_CANCELLED');
    const failure = runError(cancelled ? reason : reason instanceof RunnelError ? reason : error);
    if (failure.code === 'RUNNEL_ERR_INTERNAL') options.log?.(error);
    else if (!signal.aborted) {
      const provider = providerFailure(error);
      if (provider !== undefined) options.warn?.({ ...provider, runId }, 'model provider failed');
    }
    const frame = writer.push('error', failure);
    let ended: RunRecord | undefined;
    try {
      ended = await writer.end(ending({ status: cancelled ? 'cancelled' : 'error', error: { code: failure.code, message: failure.message }, usage }), base, true);
    } catch (endError) {
      // Neither end known: the turn stays until the record says how the run ended (the store answering again).
      if (endingSuccess !== undefined) void takeBackUnlessSucceeded(store, runId, endingSuccess, saves);
      throw endError;
    }
    // This error ended the run: its turn goes. Found ended elsewhere: perhaps by the success whose write failed here.
    if (endingSuccess !== undefined) await (ended === undefined ? takeBackUnlessSucceeded(store, runId, endingSuccess, saves) : saves.takeBack());
    await writer.deliver(frame);
    return ended;
  } finally {
    stopForwarding();
  }
}

/**
 * Takes back a run's saves unless its record says it succeeded — ended by its own success write, which failed on
 * this side but ran (a cancel or a sweep ends a run otherwise; another execution's success has another stamp). Settles
 * once the store answered the first time; while it does not answer it is asked again, every second for about a
 * minute, and then the saves are taken back.
 */
async function takeBackUnlessSucceeded(store: RunStore, runId: string, success: Partial<RunRecord>, saves: Saves): Promise<void> {
  /** True once decided (kept, or taken back). */
  const decide = async (): Promise<boolean> => {
    let record: RunRecord | undefined;
    try {
      record = await store.get(runId);
    } catch {
      return false;
    }
    // Its own success: stamped as its write was, when the caller stamps ends (another execution of a redelivered
    // job saved a turn of its own).
    if (record?.status === 'success' && (success.updated_at === undefined || record.updated_at === success.updated_at)) return true;
    if (record !== undefined && !TERMINAL.has(record.status)) return false;
    await saves.takeBack();
    return true;
  };
  if (await decide()) return;
  void (async () => {
    for (let attempt = 1; attempt < 60; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 1_000).unref());
      if (await decide()) return;
    }
    await saves.takeBack();
  })();
}
