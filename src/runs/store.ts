/**
 * Where background runs live: a record per run (status, output, error,
 * usage, times) and the run's event log — the frames its stream sends,
 * each with an id a client can resume after (`Last-Event-ID`). The Redis
 * store keeps records as JSON with a TTL and logs as Redis Streams, so any
 * replica reads what any worker wrote; the memory store does the same within
 * one process (the embedded default: runs end with the process).
 */
import { createHash, randomInt } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';
import { wrongTypeError } from '../cache/redis-client.js';
import { heldBytes, MAX_STORED_JSON_DEPTH, nestedDeeperThan, RunnelError, type TokenUsage } from '../core/index.js';

/** Where a run is in its life. `success`, `error` and `cancelled` are terminal. */
export type RunStatus = 'pending' | 'running' | 'success' | 'error' | 'cancelled';

/** What started the run: a background submission, or a durable `/stream` or `/stream_events`. */
export type RunKind = 'run' | 'stream' | 'stream_events';

/** One run as stored. `identity` scopes it: no other caller sees it. */
export interface RunRecord {
  run_id: string;
  /** The chain's path (`/joke`). */
  chain: string;
  kind: RunKind;
  identity: string;
  status: RunStatus;
  input: unknown;
  /** The run's config as resolved at submission (JSON: tags, metadata, configurable, names). */
  config: Record<string, unknown>;
  /** `stream_events` filters. */
  filters?: Record<string, string[]> | undefined;
  webhook?: string | undefined;
  /** The chat a `/ui_stream` run answers (its AI SDK chat id): how a reconnecting client finds it. */
  chat_id?: string | undefined;
  output?: unknown;
  error?: { code: string; message: string } | undefined;
  usage?: TokenUsage | undefined;
  /** Why the run's last model call ended, in its provider's words (`stop`, `length`, `end_turn`, `max_tokens`…), when one did. */
  finish_reason?: string | undefined;
  created_at: string;
  updated_at: string;
}

/** What a listing keeps: runs whose fields equal these. */
export interface RunMatch {
  chain?: string;
  status?: RunStatus;
  chat_id?: string;
}

/** Whether a record has every field of `match`. */
function matches(record: RunRecord, match: RunMatch): boolean {
  return (match.chain === undefined || record.chain === match.chain) && (match.status === undefined || record.status === match.status) && (match.chat_id === undefined || record.chat_id === match.chat_id);
}

/** One frame of a run's stream, as SSE sends it. */
export interface RunFrame {
  id: string;
  event: 'metadata' | 'data' | 'end' | 'error';
  data?: unknown;
  /** `data` as JSON, when the writer has serialised it already (it is then not serialised again). */
  json?: string;
}

/** A frame's data as JSON: serialised once, for the log and for the client alike. */
export function frameJson(frame: Pick<RunFrame, 'data' | 'json'>): string | undefined {
  return frame.json ?? (frame.data === undefined ? undefined : JSON.stringify(frame.data));
}

export const TERMINAL: ReadonlySet<RunStatus> = new Set(['success', 'error', 'cancelled']);

/** A run as the API shows it (and webhooks send it): no identity, no input or config. */
export function publicRun(record: RunRecord): Record<string, unknown> {
  return {
    run_id: record.run_id,
    chain: record.chain,
    status: record.status,
    ...(record.status === 'success' ? { output: record.output ?? null } : {}),
    ...(record.error === undefined ? {} : { error: record.error }),
    ...(record.usage === undefined ? {} : { usage: record.usage }),
    ...(typeof record.finish_reason === 'string' ? { finish_reason: record.finish_reason } : {}),
    created_at: record.created_at,
    updated_at: record.updated_at,
  };
}

/** True for the frame that ends a stream. */
export const isLastFrame = (frame: Pick<RunFrame, 'event'>): boolean => frame.event === 'end' || frame.event === 'error';

/**
 * Frames refused because their run had ended meanwhile, elsewhere (a sweep that took it for lost): nothing
 * of the write was kept, and its log has its one end already. Its executor stops the run.
 */
export class RunEnded extends Error {
  constructor(readonly runId: string) {
    super(`Run ${runId} has ended`);
  }
}

/** How a run is stored new. */
export interface CreateOptions {
  /** It executes in this process now: its first heartbeat goes with it. */
  local?: boolean;
  /**
   * Refuses it (429 `RUNNEL_ERR_TOO_MANY_RUNS`) when its caller has this many runs stored with a limit that
   * have not ended (`RUNNEL_MAX_RUNS_PER_KEY`), in every process that shares the store.
   */
  openLimit?: number;
  /**
   * A job is queued for it after this step, in another: until the run starts it is among those
   * {@link RunStore.unqueued} gives, so a run whose submitter stopped between the two steps, or whose job
   * failed before it started, can be found and ended.
   */
  queued?: boolean;
}

function tooManyRuns(limit: number): RunnelError {
  return new RunnelError('RUNNEL_ERR_TOO_MANY_RUNS', `This caller has ${limit} runs pending or running, its most (RUNNEL_MAX_RUNS_PER_KEY); wait for one to end, or cancel one`);
}

/**
 * Most open runs of a caller whose records one pass reads when the caller is at its limit: the oldest,
 * where runs whose end did not take them out collect.
 */
const RELEASE_PASS = 50;

/** The run store; see the module comment. */
export interface RunStore {
  /** Stores a new run; `local`: it executes in this process now (its first heartbeat goes with it). */
  create(record: RunRecord, options?: CreateOptions): Promise<void>;
  get(runId: string): Promise<RunRecord | undefined>;
  /**
   * Merges `patch` into the record and says so to followers — unless the run has ended: an ended record is
   * never changed again (a slow worker's late success does not undo its run being declared lost). Resolves
   * with the record as it stands.
   */
  update(runId: string, patch: Partial<RunRecord>, base?: RunRecord): Promise<RunRecord | undefined>;
  /**
   * Marks a queued run `running` — only a `pending` one (not one that has ended, or that another worker
   * runs), and not one whose cancel was requested, which it then says (`cancelled`), changing nothing: checked
   * and written as one step, so a cancel requested before it is seen here and one requested after it reaches
   * the running run. Its first heartbeat goes with it: from then on, a run whose process stops beating is
   * ended as lost by the sweep of any process.
   */
  start(runId: string, base: RunRecord): Promise<RunStart>;
  /**
   * A run's last frames, then its ending `patch` (as {@link update} merges it) — and, for a run executed
   * outside the queue (`local`), its heartbeat forgotten: one round trip where the store allows it. With
   * `create`, see {@link WriteOptions}. Rejects with {@link RunEnded}, writing nothing (but forgetting the
   * heartbeat), when the run has ended already: whoever ended it has told its followers and its webhook.
   */
  end(runId: string, frames: (Omit<RunFrame, 'id'> & { id?: string })[], patch: Partial<RunRecord>, base?: RunRecord, options?: WriteOptions & { local?: boolean }): Promise<RunRecord | undefined>;
  /**
   * Appends frames to the run's log; returns their ids. A frame with an `id` (from {@link frameIds}) keeps
   * it, so its writer can send it to a client before the write returns; one without gets the next id.
   * Rejects with {@link RunEnded}, writing nothing, when the run has ended: a log has one end, and nothing
   * after it.
   */
  append(runId: string, frames: (Omit<RunFrame, 'id'> & { id?: string })[], options?: WriteOptions): Promise<string[]>;
  /**
   * Ids for the frames of one execution, increasing, from `base`: `next()` gives the next one. An execution
   * that may follow an earlier one of the same run (a queued run, redelivered) starts from its start time, so
   * its ids come after the earlier one's; a run executed once (a durable stream) starts from 1, and its ids
   * stay short on every frame a client receives.
   */
  frameIds(base: number): () => string;
  /** Runs executing in this process (durable streams, and queued runs): their heartbeat, for the sweep. */
  heartbeat(runIds: readonly string[]): Promise<void>;
  /** Runs whose process stopped beating for them for `staleMs`: the sweep ends them. */
  stale(staleMs: number): Promise<string[]>;
  /**
   * How many runs execute in any process, by their heartbeats (queued runs and durable streams), those of a
   * process that died until the sweep ends them. Stores without heartbeats leave it out.
   */
  executing?(): Promise<number>;
  /** A run executing outside the queue has ended. */
  forget(runId: string): Promise<void>;
  /**
   * At most `count` runs stored `queued` more than `olderThanMs` ago that have not started (a start takes a
   * run out), oldest first, each with its status as its record's head says it ('gone' past its TTL; undefined
   * when it could not be read). The queue checks the pending ones still have their job, and settles the others
   * ({@link settleQueued}). Stores without a queue in another step leave both out.
   */
  unqueued?(olderThanMs: number, count: number, offset?: number): Promise<{ runId: string; status: string | undefined }[]>;
  settleQueued?(runIds: readonly string[]): Promise<void>;
  /** Whether a process beat for the run within the last `staleMs` (it is executing it still). */
  beating(runId: string, staleMs: number): Promise<boolean>;
  /**
   * The frames after `afterId` (all of them without it), as they are now. Throws `RUNNEL_ERR_RUN_LOG_TRIMMED`
   * when the log has trimmed away frames that would come first (its start, or those right after `afterId`):
   * the rest alone would read as the whole answer.
   */
  frames(runId: string, afterId?: string): Promise<RunFrame[]>;
  /** Watches a run for changes (new frames, a new status), from now on: subscribe before reading, then read. */
  watch(runId: string): Promise<RunWatch>;
  /**
   * The caller's most recent runs that match (every field given equal), newest first, at most `limit` — looked
   * for among all the runs the store lists for the caller, reading in full only the records that may match.
   */
  list(identity: string, limit: number, match?: RunMatch): Promise<RunRecord[]>;
  /**
   * The same runs as {@link list}, one at a time as they are read: a listing of records with large inputs or
   * outputs holds a few megabytes of them at a time, not all of them at once.
   */
  each(identity: string, limit: number, match?: RunMatch): AsyncIterable<RunRecord>;
  /** Marks a run to be cancelled (seen by whichever worker runs it). */
  requestCancel(runId: string): Promise<void>;
  cancelRequested(runId: string): Promise<boolean>;
  /** Listens for cancel requests of any run (a worker's side). */
  onCancel(listener: (runId: string) => void): () => void;
  /** True when `id` has the shape of this store's frame ids. */
  validFrameId(id: string): boolean;
  /**
   * False when the run's log shows that `id` is none of its frames (another run's, made up, or past its end);
   * true when it is one, precedes what a trimmed log still holds, or follows its last frame in the execution
   * that wrote it (a frame handed to a client before its process, killed, could write it) — unless
   * `loggedOnly`: the run's clients have only ever read its log (a queued run's), so an id past the last
   * frame written was never sent.
   */
  hasFrame(runId: string, id: string, loggedOnly?: boolean): Promise<boolean>;
  close(): Promise<void>;
}

/** Options of the writes of a run's frames. */
export interface WriteOptions {
  /**
   * The run's record, not stored yet (a run executed here, whose record travels with its first frames): stored
   * first, in the same step, as {@link RunStore.create} stores a `local` run — and refused as it is when the id
   * is taken, writing nothing.
   */
  create?: RunRecord;
}

/** What {@link RunStore.start} did: `started` (the record now running), or not, and then whether for a cancel. */
export interface RunStart {
  record: RunRecord | undefined;
  started: boolean;
  cancelled: boolean;
}

/** Changes of one run, as a reader waits for them. */
export interface RunWatch {
  /** Resolves at once when the run changed since the watch began or the last call resolved; else at the next change, or after `ms`. */
  next(ms: number, signal?: AbortSignal): Promise<void>;
  close(): void;
}

/** A watch over an emitter's `event`: a change seen while nobody waited is kept, so none is missed between a read and a wait. */
function emitterWatch(emitter: EventEmitter, event: string, onClose: () => void = () => {}): RunWatch {
  let dirty = false;
  let wake: (() => void) | undefined;
  const listener = (): void => {
    dirty = true;
    wake?.();
  };
  emitter.on(event, listener);
  return {
    next: (ms, signal) =>
      new Promise<void>((resolve) => {
        if (dirty || signal?.aborted === true) {
          dirty = false;
          resolve();
          return;
        }
        const done = (): void => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', done);
          wake = undefined;
          dirty = false;
          resolve();
        };
        const timer = setTimeout(done, ms);
        signal?.addEventListener('abort', done, { once: true });
        wake = done;
      }),
    close: () => {
      emitter.off(event, listener);
      wake?.();
      onClose();
    },
  };
}

/** Options shared by the stores. */
export interface RunStoreOptions {
  /** Seconds a run's record and log are kept (`RUNNEL_RUN_TTL`, default 24 h). */
  ttlSeconds?: number;
  /** Most frames kept per run (default 10,000; older frames are trimmed). */
  maxFrames?: number;
  /** Most runs listed per caller (default 1,000). */
  maxListed?: number;
}

/** The bytes a frame's data holds in memory, about (its JSON's). */
const frameBytes = (frame: Pick<RunFrame, 'data' | 'json'>): number => {
  const json = frameJson(frame);
  return json === undefined ? 0 : heldBytes(json);
};

/**
 * The bytes a record holds in memory, about (its JSON's): its input (up to the body's limit), config,
 * `stream_events` filters and output are the client's, and as large as it likes.
 */
const recordBytes = (record: RunRecord): number => heldBytes(JSON.stringify(record));

/** The record's fields a patch may make large: only these have its bytes counted again. */
const LARGE_FIELDS = ['input', 'config', 'filters', 'output', 'error', 'webhook', 'chat_id'] as const;

/**
 * The id of the first frame a trimmed log still holds, or undefined when nothing was trimmed: a run's ids go up by
 * one from its first, so a log that begins past that one lost its start.
 */
function keptFrom(run: HeldRun): number | undefined {
  const first = run.frames[0];
  return first === undefined || Number(first.id) === run.firstId ? undefined : Number(first.id);
}

/** A run as the memory store holds it: its record, its log and the bytes both hold. */
interface HeldRun {
  record: RunRecord;
  frames: RunFrame[];
  /** The id of its first frame (kept when trimming drops the frame): older ids are not its own. */
  firstId?: number;
  seq: number;
  cancel: boolean;
  /** The bytes of its record and its log. */
  bytes: number;
  /** The bytes of its record (a part of `bytes`). */
  recordBytes: number;
}

const megabytes = (bytes: number): number => Math.round((bytes / 2 ** 20) * 10) / 10;

/** Runs under way hold all the bytes a process keeps for runs. */
const overloaded = (maxBytes: number): RunnelError =>
  new RunnelError('RUNNEL_ERR_OVERLOADED', `Runs under way hold the ${megabytes(maxBytes)} MB this process keeps for runs; retry shortly`);

/**
 * Runs in this process's memory: records and logs, for the embedded default. A finished run is kept for
 * `ttlSeconds` (`RUNNEL_RUN_TTL`, as Redis keeps it); at most `maxRuns` runs and `maxBytes` of their records
 * and logs are held, the oldest finished ones forgotten first — a count alone let 10,000 runs of 10,000
 * frames each hold gigabytes, and logs alone let 4,500 runs of a megabyte's input each take the heap. A new
 * run that would go past `maxBytes` with only runs under way left is refused (`RUNNEL_ERR_OVERLOADED`).
 *
 * @example
 * const store = new MemoryRunStore({ ttlSeconds: 3600 });
 */
export class MemoryRunStore implements RunStore {
  /** Every run held, in the order they were made (newest last: `list` reads them backwards). */
  private readonly runs = new Map<string, HeldRun>();
  /** The finished runs, in the order they ended, and when (`performance.now()`): the order they are forgotten in. */
  private readonly finished = new Map<string, number>();
  private readonly events = new EventEmitter().setMaxListeners(0);
  private readonly maxFrames: number;
  private readonly maxRuns: number;
  private readonly maxBytes: number;
  private readonly ttlMs: number;
  /** The bytes of every run held: records and frames. */
  private bytes = 0;
  /** Per caller, its runs stored with a limit that have not ended (`openLimit`). */
  private readonly open = new Map<string, Set<string>>();

  constructor(options: RunStoreOptions & { maxRuns?: number; maxBytes?: number } = {}) {
    this.maxFrames = options.maxFrames ?? 10_000;
    this.maxRuns = options.maxRuns ?? 10_000;
    this.maxBytes = options.maxBytes ?? 256 * 1024 * 1024;
    this.ttlMs = (options.ttlSeconds ?? 24 * 3600) * 1000;
  }

  async create(record: RunRecord, options: CreateOptions = {}): Promise<void> {
    if (this.held(record.run_id) !== undefined) throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Run ${record.run_id} exists`);
    const bytes = recordBytes(record);
    // One that could not fit in an empty store is told so, not to retry (503 retryable, as it was, for ever).
    if (bytes > this.maxBytes) {
      throw new RunnelError('RUNNEL_ERR_BODY_TOO_LARGE', `This run's input, config and filters hold ${megabytes(bytes)} MB, more than the ${megabytes(this.maxBytes)} MB this process keeps for all its runs`);
    }
    // Refused before any finished run is let go for it: those would go for nothing (a probe: every refusal
    // emptied the store of its finished runs, their answers 404 to those polling for them).
    if (this.bytes + bytes > this.maxBytes && this.unfinishedBytes() + bytes > this.maxBytes) throw overloaded(this.maxBytes);
    const limit = options.openLimit ?? 0;
    if (limit > 0) {
      // A run leaves its caller's open runs as it ends.
      const open = this.open.get(record.identity) ?? new Set();
      if (open.size >= limit) throw tooManyRuns(limit);
      open.add(record.run_id);
      this.open.set(record.identity, open);
    }
    this.runs.set(record.run_id, { record: { ...record }, frames: [], seq: 0, cancel: false, bytes, recordBytes: bytes });
    this.bytes += bytes;
    this.evict();
    if (this.bytes > this.maxBytes) {
      // Only runs under way are left, and they hold the store: this one waits for some of them to end.
      this.runs.delete(record.run_id);
      this.bytes -= bytes;
      this.release(record.identity, record.run_id);
      throw overloaded(this.maxBytes);
    }
  }

  /** The bytes of the runs not ended (read only when a new run would not fit). */
  private unfinishedBytes(): number {
    let sum = 0;
    for (const [id, run] of this.runs) if (!this.finished.has(id)) sum += run.bytes;
    return sum;
  }

  /**
   * Forgets finished runs, the first to end first: those past their time, then (unless `expiredOnly`, as for
   * a read) while there are too many or their logs are too large. Runs under way are never forgotten (with
   * only those left, it stops). A read forgets only what is past its time: a run that has just ended must
   * stay readable for the stream sending its last frames, however full the store is.
   */
  private evict(expiredOnly = false): void {
    const expired = performance.now() - this.ttlMs;
    for (const [id, ended] of this.finished) {
      if ((expiredOnly || (this.runs.size <= this.maxRuns && this.bytes <= this.maxBytes)) && ended > expired) break;
      this.finished.delete(id);
      const run = this.runs.get(id);
      if (run === undefined) continue;
      this.runs.delete(id);
      this.bytes -= run.bytes;
    }
  }

  /** A run that ended leaves its caller's open runs. */
  private release(identity: string, runId: string): void {
    const open = this.open.get(identity);
    if (open?.delete(runId) === true && open.size === 0) this.open.delete(identity);
  }

  /** A run held and not past its time: every lookup goes through here, so all of them agree. */
  private held(runId: string): HeldRun | undefined {
    // Past its time a run is gone, as in Redis, whether or not a new run has swept it out yet.
    if (this.finished.size > 0) this.evict(true);
    return this.runs.get(runId);
  }

  async get(runId: string): Promise<RunRecord | undefined> {
    const run = this.held(runId);
    return run === undefined ? undefined : { ...run.record };
  }

  async update(runId: string, patch: Partial<RunRecord>): Promise<RunRecord | undefined> {
    return this.updateNow(runId, patch);
  }

  private updateNow(runId: string, patch: Partial<RunRecord>): RunRecord | undefined {
    const run = this.held(runId);
    if (run === undefined) return undefined;
    if (TERMINAL.has(run.record.status)) return { ...run.record };
    run.record = { ...run.record, ...patch, updated_at: patch.updated_at ?? new Date().toISOString() };
    if (LARGE_FIELDS.some((field) => field in patch)) {
      const bytes = recordBytes(run.record);
      run.bytes += bytes - run.recordBytes;
      this.bytes += bytes - run.recordBytes;
      run.recordBytes = bytes;
    }
    if (TERMINAL.has(run.record.status)) {
      this.finished.set(runId, performance.now());
      this.release(run.record.identity, runId);
    }
    this.events.emit(runId);
    return { ...run.record };
  }

  async start(runId: string): Promise<RunStart> {
    const run = this.held(runId);
    if (run === undefined || run.record.status !== 'pending') return { record: await this.get(runId), started: false, cancelled: false };
    if (run.cancel) return { record: await this.get(runId), started: false, cancelled: true };
    return { record: await this.update(runId, { status: 'running' }), started: true, cancelled: false };
  }

  async end(runId: string, frames: (Omit<RunFrame, 'id'> & { id?: string })[], patch: Partial<RunRecord>, _base?: RunRecord, options: WriteOptions = {}): Promise<RunRecord | undefined> {
    if (options.create !== undefined) await this.create(options.create);
    // The check, the frames and the end in one step (no await between): two ends at once write one.
    this.appendNow(runId, frames);
    return this.updateNow(runId, patch);
  }

  async append(runId: string, frames: (Omit<RunFrame, 'id'> & { id?: string })[], options: WriteOptions = {}): Promise<string[]> {
    if (options.create !== undefined) await this.create(options.create);
    return this.appendNow(runId, frames);
  }

  /** Frames appended, unless the run has ended (RunEnded: a log has one end, and nothing after it). */
  private appendNow(runId: string, frames: (Omit<RunFrame, 'id'> & { id?: string })[]): string[] {
    const run = this.held(runId);
    if (run === undefined) return [];
    if (TERMINAL.has(run.record.status)) throw new RunEnded(runId);
    const ids = frames.map((frame) => {
      const given = frame.id === undefined ? undefined : Number(frame.id);
      if (given !== undefined && given <= run.seq) throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'A frame id must follow the last one');
      // A frame without an id (a run ended from outside its execution) takes the run's next one.
      run.seq = given ?? run.seq + 1;
      run.firstId ??= run.seq;
      const id = String(run.seq);
      run.frames.push({ ...frame, id });
      const added = frameBytes(frame);
      run.bytes += added;
      this.bytes += added;
      return id;
    });
    if (run.frames.length > this.maxFrames) {
      for (const dropped of run.frames.splice(0, run.frames.length - this.maxFrames)) {
        const bytes = frameBytes(dropped);
        run.bytes -= bytes;
        this.bytes -= bytes;
      }
    }
    if (this.bytes > this.maxBytes) this.evict();
    this.events.emit(runId);
    return ids;
  }

  frameIds(): () => string {
    // One counter per execution (a run here executes once: the in-process queue never hands a run out twice),
    // from a random start below 2^30. Not one counter for the process, as before: a caller reading its ids
    // learnt how many frames everyone else's runs had sent in between. Not from 1 either: a Last-Event-ID of
    // another run would then name a frame of this one, and a client that mixed up its runs would resume the
    // wrong one mid-way instead of being told (400). A small integer still: a 16-digit one (milliseconds ×
    // 1000, as once here) is a heap number, and printing it cost a microsecond a frame.
    let id = randomInt(1, 2 ** 30);
    return () => String(++id);
  }

  async heartbeat(): Promise<void> {}

  async stale(): Promise<string[]> {
    return [];
  }

  async forget(): Promise<void> {}

  async beating(): Promise<boolean> {
    return false;
  }

  async frames(runId: string, afterId?: string): Promise<RunFrame[]> {
    const run = this.held(runId);
    if (run === undefined) return [];
    const after = afterId === undefined ? undefined : Number(afterId);
    const kept = keptFrom(run);
    if (kept !== undefined && (after === undefined || after < kept - 1)) throw logTrimmed(runId, afterId, this.maxFrames);
    return after === undefined ? [...run.frames] : run.frames.filter((frame) => Number(frame.id) > after);
  }

  async watch(runId: string): Promise<RunWatch> {
    return emitterWatch(this.events, runId);
  }

  async list(identity: string, limit: number, match: RunMatch = {}): Promise<RunRecord[]> {
    if (this.finished.size > 0) this.evict(true);
    return [...this.runs.values()]
      .map((run) => run.record)
      .filter((record) => record.identity === identity && matches(record, match))
      .reverse()
      .slice(0, limit)
      .map((record) => ({ ...record }));
  }

  async *each(identity: string, limit: number, match: RunMatch = {}): AsyncGenerator<RunRecord> {
    // The records are in memory already; copies of at most `limit` of them.
    yield* await this.list(identity, limit, match);
  }

  async requestCancel(runId: string): Promise<void> {
    const run = this.held(runId);
    if (run !== undefined) run.cancel = true;
    this.events.emit('cancel', runId);
  }

  async cancelRequested(runId: string): Promise<boolean> {
    return this.held(runId)?.cancel === true;
  }

  onCancel(listener: (runId: string) => void): () => void {
    this.events.on('cancel', listener);
    return () => this.events.off('cancel', listener);
  }

  validFrameId(id: string): boolean {
    return /^\d{1,20}$/.test(id);
  }

  async hasFrame(runId: string, id: string): Promise<boolean> {
    const run = this.held(runId);
    if (run === undefined) return false;
    if (run.frames.some((frame) => frame.id === id)) return true;
    // Before what a trimmed log still holds and not before its first frame: one of its trimmed frames (each run
    // counts from a start of its own: a lower id is another run's).
    const kept = keptFrom(run);
    const wanted = Number(id);
    return kept !== undefined && wanted < kept && wanted >= (run.firstId ?? 0);
  }

  async close(): Promise<void> {
    this.events.removeAllListeners();
  }
}

/**
 * The entries of a log from the one that holds frame ARGV[1] on, ARGV[2] of them — or, when no entry is there
 * to hold it (the log was trimmed past it, or is empty), from the log's first: `{1 or 0 (no holder), entries}`.
 */
const READ_FROM_ENTRY = `
local holder = redis.call('XREVRANGE', KEYS[1], ARGV[1], '-', 'COUNT', 1)
if not holder[1] then return {0, redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', ARGV[2])} end
return {1, redis.call('XRANGE', KEYS[1], holder[1][1], '+', 'COUNT', ARGV[2])}`;

/** Most frames in one Redis Stream entry of a run's log. */
const ENTRY_FRAMES = 500;

const parseStreamId = (id: string): [number, number] => {
  const [ms = '0', seq = '0'] = id.split('-');
  return [Number(ms), Number(seq)];
};

const compareStreamIds = (a: [number, number], b: [number, number]): number => (a[0] === b[0] ? a[1] - b[1] : a[0] - b[0]);

/**
 * Lua: an error reply (WRONGTYPE, as Redis's own) when one of the keys given holds another kind of value than
 * the one given after it (a key false is skipped). A script checks its keys first: Redis keeps what a script
 * wrote before a command failed, so one that met a key of another kind mid-way left half a write — a run
 * stored as running with no heartbeat, which nothing would ever end.
 */
const WRONG_TYPE = `
local function wrong_type(...)
  local n = select('#', ...)
  for i = 1, n, 2 do
    local key, kind = select(i, ...)
    if key then
      local held = redis.call('TYPE', key).ok
      if held ~= 'none' and held ~= kind then return redis.error_reply('WRONGTYPE a key of the run holds a ' .. held .. ', not a ' .. kind) end
    end
  end
  return false
end`;

/** Lua: SET the record KEYS[1] to ARGV[1] (KEEPTTL) and PUBLISH 'status' on ARGV[2], unless the stored record has ended. */
const UPDATE_UNLESS_ENDED_BODY = `
local function status_of(json)
  local ok, record = pcall(cjson.decode, json)
  if ok and type(record) == 'table' then return record.status end
  -- Too deep for cjson (an input nested past its limit): the record's own status comes before its input.
  return string.match(json, '"status":"(%a+)"')
end
local function ended(status)
  return status == 'success' or status == 'error' or status == 'cancelled'
end
-- Whether the record at key has ended, from its head: its own status comes before its input, so a record
-- of any size costs a read of its first bytes, not a copy and a decode at every write of its run.
local function ended_already(key)
  local head = redis.call('GETRANGE', key, 0, 1023)
  if head == '' then return false end
  local status = string.match(head, '"status":"(%a+)"')
  if status == nil then
    local current = redis.call('GET', key)
    if not current then return false end
    status = status_of(current)
  end
  return ended(status)
end
local function update_unless_ended(key, json, channel)
  local current = redis.call('GET', key)
  if not current then return 0 end
  if ended(status_of(current)) then return -1 end
  redis.call('SET', key, json, 'KEEPTTL')
  redis.call('PUBLISH', channel, 'status')
  return 1
end`;

/**
 * Redis's own clock in milliseconds. Heartbeats are written and judged stale by it, not by each process's
 * clock: a replica whose clock runs ahead of the others' would otherwise end their runs as lost, and one
 * whose clock runs behind would have its own ended.
 */
const NOW_MS = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end`;

/**
 * Resolves 1 when written, 0 when there is no record, -1 when it has ended. With KEYS[2] (the owner's open
 * runs, given when the record written ends the run), the run (ARGV[3]) leaves them as it is written.
 */
const UPDATE_UNLESS_ENDED = `${UPDATE_UNLESS_ENDED_BODY}${WRONG_TYPE}
local bad = wrong_type(KEYS[1], 'string')
if bad then return bad end
local written = update_unless_ended(KEYS[1], ARGV[1], ARGV[2])
-- Tidying only: a key of another kind there does not keep the run from ending (pcall).
if written == 1 and KEYS[2] then redis.pcall('ZREM', KEYS[2], ARGV[3]) end
return written`;

/**
 * A queued run marked running, with its first heartbeat (KEYS[3], ARGV[3] the run id), and out of the runs
 * not yet started (KEYS[4]): only from `pending` (1), never over a record that is missing (0), has ended (-1)
 * or is running already (-3, another worker has it); -2, writing nothing, when its cancel flag KEYS[2] is set.
 */
const START_UNLESS_CANCELLED = `${UPDATE_UNLESS_ENDED_BODY}${NOW_MS}${WRONG_TYPE}
local bad = wrong_type(KEYS[1], 'string', KEYS[3], 'zset')
if bad then return bad end
local current = redis.call('GET', KEYS[1])
if not current then return 0 end
local status = status_of(current)
if ended(status) then return -1 end
if status ~= 'pending' then return -3 end
if redis.call('EXISTS', KEYS[2]) == 1 then return -2 end
redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL')
redis.call('ZADD', KEYS[3], now_ms(), ARGV[3])
-- Tidying only: a key of another kind there does not keep the run from starting.
redis.pcall('ZREM', KEYS[4], ARGV[3])
redis.call('PUBLISH', ARGV[2], 'status')
return 1`;

/**
 * A new run, in one step: its record (SET NX with the TTL), its place in its owner's list (trimmed, with the
 * TTL), for a run executed outside the queue its first heartbeat (at Redis's time), and with a limit its place
 * in its owner's open runs, and for a run whose job is queued next its place among the runs not yet started
 * (at Redis's time, with the TTL). 0 when the id is taken; -1, writing nothing, when the owner holds `limit` open runs.
 * KEYS: record, owner list, heartbeats, owner's open runs, runs not yet started. ARGV: record JSON, TTL,
 * created (ms), run id, most listed, '1' (beating) or '', limit or '', '1' (queued next) or ''.
 */
const CREATE = `${NOW_MS}${WRONG_TYPE}
local limit = tonumber(ARGV[7])
local bad = wrong_type(KEYS[1], 'string', KEYS[2], 'zset', ARGV[6] ~= '' and KEYS[3], 'zset', limit and KEYS[4], 'zset', ARGV[8] ~= '' and KEYS[5], 'zset')
if bad then return bad end
if limit and redis.call('ZCARD', KEYS[4]) >= limit then return -1 end
if not redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2], 'NX') then return 0 end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[5]) + 1))
redis.call('EXPIRE', KEYS[2], ARGV[2])
if ARGV[6] ~= '' then redis.call('ZADD', KEYS[3], now_ms(), ARGV[4]) end
if limit then
  redis.call('ZADD', KEYS[4], ARGV[3], ARGV[4])
  redis.call('EXPIRE', KEYS[4], ARGV[2])
end
if ARGV[8] ~= '' then
  redis.call('ZADD', KEYS[5], now_ms(), ARGV[4])
  redis.call('EXPIRE', KEYS[5], ARGV[2])
end
return 1`;

/**
 * Frames appended to a run's log, and maybe the run ended, in one step: an XADD per entry (MAXLEN ~), the
 * log's TTL and a PUBLISH to its followers; then, with a record, the record written unless it has ended;
 * then, asked to, the run's heartbeat forgotten — neither when Redis refused a frame. Replies with each
 * entry's id (or '!' and Redis's refusal) and, last, the record's outcome as UPDATE_UNLESS_ENDED gives it
 * ('' without a record).
 *
 * Given a new run (ARGV[7]), it is stored in the same step, as CREATE stores it, after its frames: ended
 * already when the step ends it (ARGV[7] '=': the record is ARGV[4]; a heartbeat the process wrote meanwhile
 * is removed), else running with its heartbeat; nobody is told, as nobody can know the run yet. Nothing at
 * all stays written when the id is taken — by a record or a log ('!taken' the reply) — or Redis refuses a
 * frame (the log, which this step began, is deleted).
 *
 * KEYS: log, record, heartbeats, owner list (to create), and the owner's open runs when the record ends the
 * run (it leaves them). ARGV: most frames, TTL, channel, record JSON or '',
 * forget ('1' or ''), run id, new record JSON ('=': ARGV[4]) or '', its created (ms), most listed, '' (its
 * heartbeat is Redis's time), then per entry its id ('*': the next Redis gives) and its packed frames.
 */
const WRITE_FRAMES = `${UPDATE_UNLESS_ENDED_BODY}${NOW_MS}${WRONG_TYPE}
-- The id for an entry written from elsewhere (a sweep's end, a cancel's): past the log's last frame. Redis's next
-- id ('*') follows the last entry's id only, which is its first frame's; an execution's ids come from its
-- worker's clock, and when that runs ahead of Redis's, Redis's next would fall among the last entry's frames,
-- and a reader resuming after one of them would never read it.
local function past_last_frame(log)
  local top = redis.call('XREVRANGE', log, '+', '-', 'COUNT', 1)[1]
  if not top then return '*' end
  local ms, seq = string.match(top[1], '^(%d+)-(%d+)$')
  local now = now_ms()
  if now > tonumber(ms) then return string.format('%d', now) .. '-0' end
  -- The entry's last frame: its own id when the entry reads (an id of the entry's millisecond, after its
  -- first); else, as for an entry nested past what cjson decodes, the last an entry can hold.
  local last = tonumber(seq) + ${ENTRY_FRAMES} - 1
  local fields = top[2]
  for j = 1, #fields - 1, 2 do
    if fields[j] == 'f' then
      local ok, frames = pcall(cjson.decode, fields[j + 1])
      if ok and type(frames) == 'table' then
        local frame = frames[#frames]
        local frame_ms, frame_seq = string.match(type(frame) == 'table' and type(frame[1]) == 'string' and frame[1] or '', '^(%d+)-(%d+)$')
        last = frame_ms == ms and math.max(tonumber(frame_seq), tonumber(seq)) or tonumber(seq)
      end
    end
  end
  return ms .. '-' .. string.format('%d', last + 1)
end
local creating = ARGV[7] ~= ''
-- The keys written; the heartbeats and the caller's open runs only tidied (a ZREM) are not checked, and a key
-- of another kind there does not keep a run from ending (pcall): it would stay running until its TTL.
local bad = wrong_type(KEYS[1], 'stream', KEYS[2], 'string', creating and KEYS[3], 'zset', creating and KEYS[4], 'zset')
if bad then return bad end
if creating and redis.call('EXISTS', KEYS[2], KEYS[1]) > 0 then return {'!taken'} end
-- A write to a run that has ended meanwhile (another process's end: a sweep that took it for lost, two ends
-- at once) adds nothing to its log, which has its one end already; it answers as the refused update does.
if not creating and ended_already(KEYS[2]) then
  local skipped = {}
  for i = 11, #ARGV, 2 do skipped[#skipped + 1] = '-' end
  skipped[#skipped + 1] = '-1'
  -- Its heartbeat goes as an ending write would have taken it.
  if ARGV[5] == '1' then redis.pcall('ZREM', KEYS[3], ARGV[6]) end
  return skipped
end
local out = {}
local refused = false
for i = 11, #ARGV, 2 do
  local id = ARGV[i]
  if id == '*' then id = past_last_frame(KEYS[1]) end
  id = redis.pcall('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], id, 'f', ARGV[i + 1])
  if type(id) == 'table' then
    refused = true
    out[#out + 1] = '!' .. tostring(id.err)
  else
    out[#out + 1] = id
  end
end
if #ARGV >= 11 then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
  -- The record lives as long as its log: a run streaming past the TTL must not lose its record first.
  if not creating then
    redis.call('EXPIRE', KEYS[2], ARGV[2])
    redis.call('PUBLISH', ARGV[3], 'frames')
  end
end
if creating then
  if refused then
    redis.call('DEL', KEYS[1])
    out[#out + 1] = ''
    return out
  end
  local ends = ARGV[7] == '='
  redis.call('SET', KEYS[2], ends and ARGV[4] or ARGV[7], 'EX', ARGV[2])
  redis.call('ZADD', KEYS[4], ARGV[8], ARGV[6])
  redis.call('ZREMRANGEBYRANK', KEYS[4], 0, -(tonumber(ARGV[9]) + 1))
  redis.call('EXPIRE', KEYS[4], ARGV[2])
  if ends then redis.call('ZREM', KEYS[3], ARGV[6]) else redis.call('ZADD', KEYS[3], now_ms(), ARGV[6]) end
  out[#out + 1] = ends and '1' or ''
  return out
end
-- A refused frame leaves the run as it was: never ended without its last frames.
if ARGV[4] ~= '' and not refused then
  local written = update_unless_ended(KEYS[2], ARGV[4], ARGV[3])
  -- A run that ends leaves its owner's open runs (KEYS[5], given when the record written ends it).
  if written == 1 and KEYS[5] then redis.pcall('ZREM', KEYS[5], ARGV[6]) end
  out[#out + 1] = tostring(written)
else
  out[#out + 1] = ''
end
if ARGV[5] == '1' and not refused then redis.pcall('ZREM', KEYS[3], ARGV[6]) end
return out`;

/** The shape of a frame id in a Redis log: a Redis Stream id. */
const FRAME_ID = /^\d{1,15}-\d{1,10}$/;

/** The events a run's frames carry. */
const FRAME_EVENTS: ReadonlySet<string> = new Set(['metadata', 'data', 'end', 'error']);

/** A frame as a log entry packs it: its id (null: the entry's), its event and, but for `end`, its data. */
type PackedFrame = [string | null, RunFrame['event'], unknown?];

/**
 * The frames of a log entry, checked as untrusted: undefined unless its `f` field is a JSON list of frames
 * whose ids have the store's shape and whose events are a run's. A frame id or event name is written into
 * the SSE stream as it is, so one edited into the log (`1-0\nevent: injected`) would forge events.
 */
function unpackEntry(fields: readonly string[]): PackedFrame[] | undefined {
  let value: string | undefined;
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === 'f') value = fields[i + 1];
  if (value === undefined) return undefined;
  let frames: unknown;
  try {
    frames = JSON.parse(value);
  } catch {
    return undefined;
  }
  if (!Array.isArray(frames)) return undefined;
  for (const frame of frames as unknown[]) {
    if (!Array.isArray(frame) || frame.length < 2 || frame.length > 3) return undefined;
    const [id, event] = frame as unknown[];
    if (!(id === null || (typeof id === 'string' && FRAME_ID.test(id))) || typeof event !== 'string' || !FRAME_EVENTS.has(event)) return undefined;
    // Only an end goes without data: a data frame without it went out as an SSE event with no data line, which
    // a client drops without a word.
    if (frame.length === 2 && event !== 'end') return undefined;
  }
  return frames as PackedFrame[];
}

/**
 * Whether a log that begins with `frames` (its first entry's) was trimmed: an execution numbers its frames from
 * `{base}-0`, so a first frame of its own with another number is not the first it wrote. (A frame written from
 * elsewhere — a sweep's end, a cancel's — has no id of its own: the entry's, Redis's.)
 */
function startsTrimmed(frames: PackedFrame[]): boolean {
  const id = frames[0]?.[0];
  return typeof id === 'string' && parseStreamId(id)[1] !== 0;
}

/** Whether frame `id` is the one an execution numbered right after `after` (`{base}-{n + 1}`). */
function nextAfter(id: string, after: [number, number]): boolean {
  const [base, n] = parseStreamId(id);
  return base === after[0] && n === after[1] + 1;
}

/** A read of a log that would skip frames it no longer keeps (from its start, or after `afterId`). */
function logTrimmed(runId: string, afterId: string | undefined, maxFrames: number): RunnelError {
  const where = afterId === undefined ? 'replayed from its start' : `resumed after ${afterId}`;
  return new RunnelError(
    'RUNNEL_ERR_RUN_LOG_TRIMMED',
    `The stream of run ${runId} cannot be ${where}: those frames are no longer kept (its log keeps its last ${maxFrames} entries). The run itself is not affected: its record has the output once it has ended`,
  );
}

function corruptLog(runId: string): RunnelError {
  return new RunnelError('RUNNEL_ERR_STORED_RECORD_INVALID', `The event log of run ${runId} holds an entry that is not valid`);
}

function badFrameId(): never {
  throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', "A frame's id must be one that frameIds gave");
}

/** Frames bound for one stream entry, under its first frame's id (or the next id Redis gives). */
interface FrameEntry {
  id: string | undefined;
  frames: (Omit<RunFrame, 'id'> & { id?: string })[];
}

/** Throws when the script's replies (an entry's id, or '!' and why Redis refused it) refuse one of `entries`. */
function checkEntries(entries: FrameEntry[], replies: string[]): void {
  for (let i = 0; i < entries.length; i++) {
    const id = replies[i];
    if (id === undefined || id.startsWith('!')) {
      const invalid = id === undefined ? undefined : wrongTypeError(new Error(id.slice(1)), 'A stored run');
      if (invalid !== undefined) throw invalid;
      throw new RunnelError('RUNNEL_ERR_REDIS_UNAVAILABLE', 'Redis refused a run frame', { cause: new Error(id?.slice(1) ?? 'no reply') });
    }
  }
}

/** The ids of `entries`' frames, from the script's replies; throws a refused one. */
function frameIdsOf(entries: FrameEntry[], replies: string[]): string[] {
  checkEntries(entries, replies);
  return entries.flatMap((entry, i) => entry.frames.map((frame) => frame.id ?? (replies[i] as string)));
}

/**
 * Frames that carry ids (an execution's, `{start}-{n}`) go in entries of up to {@link ENTRY_FRAMES}, each
 * entry under its first frame's id — one entry for a tick's worth of frames, not one a frame. A frame without
 * an id (a run ended from elsewhere) is an entry of its own with the next id Redis gives.
 */
function entriesOf(frames: readonly (Omit<RunFrame, 'id'> & { id?: string })[]): FrameEntry[] {
  const entries: FrameEntry[] = [];
  let last: FrameEntry | undefined;
  for (const frame of frames) {
    if (frame.id !== undefined && last?.id !== undefined && last.frames.length < ENTRY_FRAMES) last.frames.push(frame);
    else entries.push((last = { id: frame.id, frames: [frame] }));
  }
  return entries;
}

/**
 * Runs a Lua script by its SHA1 (EVALSHA: the source goes over the wire once per Redis, not with every call),
 * loading it with EVAL when Redis does not know it yet (a restart or SCRIPT FLUSH forgets scripts).
 */
class RedisScript {
  private readonly sha: string;

  constructor(private readonly source: string) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }

  async run<T>(client: Redis, keys: readonly string[], args: readonly (string | number)[]): Promise<T> {
    try {
      return (await client.evalsha(this.sha, keys.length, ...keys, ...args)) as T;
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      return (await client.eval(this.source, keys.length, ...keys, ...args)) as T;
    }
  }
}

/**
 * The runs executing in this process, beating now (Redis's time), their records and logs kept for the TTL
 * from now: a run that lives longer than `RUNNEL_RUN_TTL` keeps them (the record's was set once, when the run
 * was stored: it expired under a run still streaming, which then could be neither read nor cancelled, and
 * whose end and webhook went nowhere). KEYS: heartbeats, then each run's record and log. ARGV: TTL, run ids.
 */
const HEARTBEAT = `${NOW_MS}
local now = now_ms()
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], now, ARGV[i])
  redis.call('EXPIRE', KEYS[2 * i - 2], ARGV[1])
  redis.call('EXPIRE', KEYS[2 * i - 1], ARGV[1])
end
return #ARGV - 1`;

/** At most 100 runs whose last heartbeat is older than ARGV[1] ms by Redis's clock. KEYS: heartbeats. */
const STALE = `${NOW_MS}
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms() - tonumber(ARGV[1]), 'LIMIT', 0, 100)`;

/** At most ARGV[2] runs, from the ARGV[3]th, stored to be queued more than ARGV[1] ms ago by Redis's clock. KEYS: those runs. */
const UNQUEUED = `${NOW_MS}
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms() - tonumber(ARGV[1]), 'LIMIT', tonumber(ARGV[3]), tonumber(ARGV[2]))`;

/** 1 when the run's last heartbeat is within ARGV[2] ms by Redis's clock, else 0. KEYS: heartbeats. ARGV: run id, ms. */
const BEATING = `${NOW_MS}
local beat = redis.call('ZSCORE', KEYS[1], ARGV[1])
if beat and now_ms() - tonumber(beat) <= tonumber(ARGV[2]) then return 1 end
return 0`;

const scripts = {
  create: new RedisScript(CREATE),
  beating: new RedisScript(BEATING),
  heartbeat: new RedisScript(HEARTBEAT),
  stale: new RedisScript(STALE),
  unqueued: new RedisScript(UNQUEUED),
  update: new RedisScript(UPDATE_UNLESS_ENDED),
  start: new RedisScript(START_UNLESS_CANCELLED),
  writeFrames: new RedisScript(WRITE_FRAMES),
  readFromEntry: new RedisScript(READ_FROM_ENTRY),
};

const RUN_STATUSES: ReadonlySet<string> = new Set<RunStatus>(['pending', 'running', 'success', 'error', 'cancelled']);

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

const RUN_KINDS: ReadonlySet<string> = new Set<RunKind>(['run', 'stream', 'stream_events']);

/** The fields of a stored run's config a worker reads, and the type of each (JSON: see `runConfig`). */
const CONFIG_FIELDS: Readonly<Record<string, (value: unknown) => boolean>> = {
  tags: (value) => Array.isArray(value) && value.every((tag) => typeof tag === 'string'),
  metadata: isObject,
  configurable: isObject,
  runName: (value) => typeof value === 'string',
  runId: (value) => typeof value === 'string',
  maxConcurrency: (value) => typeof value === 'number',
  recursionLimit: (value) => typeof value === 'number',
  timeout: (value) => typeof value === 'number',
};

const isRunConfig = (config: unknown): config is Record<string, unknown> =>
  isObject(config) && Object.entries(CONFIG_FIELDS).every(([field, valid]) => config[field] === undefined || valid(config[field]));

/**
 * A stored run's config as a worker runs its chain with it: the fields a submission stores, and nothing else
 * (a record is untrusted: `callbacks` or `signal` written into one would reach the chain as plain objects).
 */
export function runConfig(config: Record<string, unknown>): Record<string, unknown> {
  const picked: Record<string, unknown> = {};
  for (const field of Object.keys(CONFIG_FIELDS)) if (config[field] !== undefined) picked[field] = config[field];
  return picked;
}

/**
 * Whether `value` has a run record's shape where a reader relies on it: its ids strings, its times times, a status
 * a run has (one of another kind would never end: `/wait` would time out for good), an error with a code and
 * a message, usage an object whose counts are numbers. The input, output and config are the chain's, JSON of
 * any shape.
 */
/** A time as records hold them: a string Date reads (an ISO 8601 time). */
const isTime = (value: unknown): value is string => typeof value === 'string' && !Number.isNaN(Date.parse(value));

function isRunRecord(value: unknown): value is RunRecord {
  if (!isObject(value)) return false;
  const { run_id, identity, status, chain, kind, created_at, updated_at, error, usage, finish_reason, config, filters, webhook, chat_id } = value;
  if (typeof run_id !== 'string' || typeof identity !== 'string' || typeof status !== 'string' || !RUN_STATUSES.has(status)) return false;
  if (typeof chain !== 'string' || typeof kind !== 'string' || !RUN_KINDS.has(kind) || !isTime(created_at) || !isTime(updated_at)) return false;
  // What a worker runs the chain with, and what it calls back: one of another shape failed the run as if Redis
  // were down (its config read outside the run's error handling).
  if (!isRunConfig(config) || !(webhook === undefined || typeof webhook === 'string') || !(chat_id === undefined || typeof chat_id === 'string')) return false;
  if (filters !== undefined && !(isObject(filters) && Object.values(filters).every((names) => Array.isArray(names) && names.every((name) => typeof name === 'string')))) return false;
  if (error !== undefined && !(isObject(error) && typeof error.code === 'string' && typeof error.message === 'string')) return false;
  // Usage as a model reported it (a chain's own model may add details beside the three counts); the details
  // Runnel serves are objects of counts (null: a count JSON could not write, NaN, as for the three), when there.
  const count = (value: unknown): boolean => value === undefined || value === null || typeof value === 'number';
  if (usage !== undefined && !(isObject(usage) && ['input_tokens', 'output_tokens', 'total_tokens'].every((name) => count(usage[name])))) return false;
  if (usage !== undefined && !['input_token_details', 'output_token_details'].every((name) => usage[name] === undefined || (isObject(usage[name]) && Object.values(usage[name]).every(count)))) return false;
  return finish_reason === undefined || finish_reason === null || typeof finish_reason === 'string';
}

/**
 * Reads the stored record of run `runId`, refusing anything that is not one — or is another run's (copied
 * under this key by hand: served as it was, it answered for a run it is not, and its writes went to the
 * other run's log).
 */
/** Runs read per page of a listing. */
const LIST_PAGE = 100;
/** The most bytes of records a listing reads at once (a record larger than this is read alone). */
const LIST_READ_BYTES = 4 * 1024 * 1024;
/** The bytes of a record read to tell whether a listing can keep it. */
const HEAD_BYTES = 1024;

/** A record's small leading fields, as its first bytes hold them; `complete`: every one of them is there. */
interface RecordHead {
  fields: Record<string, unknown>;
  complete: boolean;
}

/** A JSON member whose value is a string, number, boolean or null, at `lastIndex` (a raw control character, which JSON never writes, fails its parse). */
const LEADING_MEMBER = /"((?:[^"\\]|\\.)*)":("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)([,}])/y;

/**
 * The top-level members of a record's JSON that come before its first object, list or cut — only those, so a
 * string inside its input is never taken for one of them. A record made by this version has its small fields
 * (chain, status, chat id, times) before its input, and then `created_at` is among them: its head is complete,
 * and a field missing from it is missing from the record. An older record's may be after its input.
 */
export function recordHead(head: string): RecordHead {
  const fields: Record<string, unknown> = {};
  if (!head.startsWith('{')) return { fields, complete: false };
  LEADING_MEMBER.lastIndex = 1;
  for (let member = LEADING_MEMBER.exec(head); member !== null; member = LEADING_MEMBER.exec(head)) {
    try {
      fields[JSON.parse(`"${member[1] as string}"`) as string] = JSON.parse(member[2] as string);
    } catch {
      break;
    }
    if (member[3] === '}') break;
  }
  return { fields, complete: typeof fields.created_at === 'string' };
}

/** Whether a run whose record begins so may match: false only when its head says a field differs. */
function mayMatch(head: RecordHead | 'gone' | undefined, match: RunMatch): boolean {
  if (head === 'gone') return false;
  if (head === undefined) return true;
  for (const [key, wanted] of Object.entries(match)) {
    if (wanted === undefined) continue;
    if (key in head.fields ? head.fields[key] !== wanted : head.complete) return false;
  }
  return true;
}

function parseRecord(raw: string | null, runId: string): RunRecord | undefined {
  if (raw === null) return undefined;
  try {
    const value = nestedDeeperThan(raw, MAX_STORED_JSON_DEPTH) ? undefined : (JSON.parse(raw) as unknown);
    if (isRunRecord(value) && value.run_id === runId) return value;
  } catch {
    // fall through
  }
  throw new RunnelError('RUNNEL_ERR_STORED_RECORD_INVALID', 'A stored run record is not valid');
}

/** Redis failures as the stable 503 code. */
async function redisCall<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof RunnelError) throw error;
    throw wrongTypeError(error, 'A stored run') ?? new RunnelError('RUNNEL_ERR_REDIS_UNAVAILABLE', 'Redis is unavailable: runs cannot be read or written', { cause: error });
  }
}

/**
 * Runs in Redis: `{ns}:run:{id}` (the record, JSON, with a TTL),
 * `{ns}:run:{id}:log` (a Redis Stream of frames, trimmed to `maxFrames`),
 * `{ns}:owner:{identity}` (a sorted set of the caller's run ids), `{ns}:open:{identity}` (with a limit, the
 * caller's runs that have not ended), `{ns}:local` (heartbeats), `{ns}:unqueued` (queued runs not started
 * yet), and two
 * pub/sub channels: `{ns}:changed:{id}` (new frames or a new status) and
 * `{ns}:cancel` (cancel requests, for every worker).
 *
 * @example
 * const store = new RedisRunStore({ client: redis });
 */
export class RedisRunStore implements RunStore {
  private readonly client: Redis;
  private readonly ns: string;
  private readonly ttl: number;
  private readonly maxFrames: number;
  private readonly maxListed: number;
  private subscriber: Redis | undefined;
  private readonly events = new EventEmitter().setMaxListeners(0);
  private readonly watching = new Map<string, number>();
  /** Passes of {@link releaseEnded} under way, by open-runs key. */
  private readonly releasing = new Map<string, Promise<void>>();

  constructor(options: RunStoreOptions & { client: Redis; namespace?: string }) {
    this.client = options.client;
    this.ns = options.namespace ?? 'runnel:runs';
    this.ttl = options.ttlSeconds ?? 24 * 3600;
    this.maxFrames = options.maxFrames ?? 10_000;
    this.maxListed = options.maxListed ?? 1_000;
  }

  private key(runId: string): string {
    return `${this.ns}:run:${runId}`;
  }

  /** A caller's runs stored with a limit that have not ended (as far as their ends said so: see `create`). */
  private openKey(identity: string): string {
    return `${this.ns}:open:${identity}`;
  }

  /** One subscriber connection for this process, opened on first use. */
  private async subscribe(channel: string): Promise<void> {
    if (this.subscriber === undefined) {
      // A SUBSCRIBE in flight when its connection closes is sent again on the next, as ioredis does by default.
      this.subscriber = this.client.duplicate({ enableOfflineQueue: true, lazyConnect: false, autoResendUnfulfilledCommands: true });
      this.subscriber.on('error', () => {});
      this.subscriber.on('message', (from: string, message: string) => this.events.emit(from, message));
    }
    await this.subscriber.subscribe(channel);
  }

  async create(record: RunRecord, options: CreateOptions = {}): Promise<void> {
    const limit = options.openLimit ?? 0;
    const open = this.openKey(record.identity);
    // A run id names one run, once (NX): never over another's record or log. One round trip, one command.
    const create = (): Promise<number> =>
      redisCall(
        scripts.create.run<number>(
          this.client,
          [this.key(record.run_id), `${this.ns}:owner:${record.identity}`, `${this.ns}:local`, open, `${this.ns}:unqueued`],
          [JSON.stringify(record), this.ttl, Date.parse(record.created_at), record.run_id, this.maxListed, options.local === true ? '1' : '', limit > 0 ? limit : '', options.queued === true ? '1' : ''],
        ),
      );
    let created = await create();
    // A run leaves its caller's open runs in the step that ends it. One that did not (it ended in a process
    // of an earlier version, or its record expired, or was lost) is let go when the caller reaches its limit;
    // then the create is tried again, whatever this process let go: another submission may have let it go.
    if (created === -1) {
      await this.releaseEnded(open);
      created = await create();
    }
    if (created === -1) throw tooManyRuns(limit);
    if (created !== 1) throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Run ${record.run_id} exists`);
  }

  /**
   * Takes out of a caller's open runs (`open`) those of the oldest {@link RELEASE_PASS} that have ended or
   * are gone (past their TTL), from each record's first bytes. A refused submission
   * costs at most that many reads, whatever the limit. Only ended runs are taken out, so it may run beside
   * any create: the limit itself is checked in the create's one step.
   */
  private releaseEnded(open: string): Promise<void> {
    // One pass at a time per caller in a process: a burst of submissions at the limit reads the records once.
    let pass = this.releasing.get(open);
    if (pass === undefined) {
      pass = this.readAndRelease(open).finally(() => this.releasing.delete(open));
      this.releasing.set(open, pass);
    }
    return pass;
  }

  private async readAndRelease(open: string): Promise<void> {
    const ids = await redisCall(this.client.zrange(open, 0, RELEASE_PASS - 1));
    if (ids.length === 0) return;
    const statuses = await this.heads(ids);
    const done = ids.filter((_, index) => statuses[index] === 'gone' || (statuses[index] !== undefined && TERMINAL.has(statuses[index] as RunStatus)));
    if (done.length > 0) await redisCall(this.client.zrem(open, ...done));
  }

  /**
   * Each run's status from its record's first bytes, in one round trip: 'gone' when it has no record (past
   * its TTL), undefined when it could not be read or its head does not hold the status (a record's own status
   * comes before its input, so that is one with an odd shape).
   */
  private async heads(ids: readonly string[]): Promise<(string | undefined)[]> {
    return (await this.leading(ids, true)).map((read) => {
      if (read === 'gone' || read.head === undefined) return read === 'gone' ? read : undefined;
      const status = read.head.fields.status;
      return typeof status === 'string' ? status : undefined;
    });
  }

  async get(runId: string): Promise<RunRecord | undefined> {
    return parseRecord(await redisCall(this.client.get(this.key(runId))), runId);
  }

  async update(runId: string, patch: Partial<RunRecord>, base?: RunRecord): Promise<RunRecord | undefined> {
    // The writer's own copy spares a read: if it is stale because the run ended meanwhile, the script refuses.
    const current = base ?? (await this.get(runId));
    if (current === undefined || TERMINAL.has(current.status)) return current;
    const next = { ...current, ...patch, updated_at: new Date().toISOString() };
    // Written only while the stored run has not ended (checked in Redis, as one step with the write).
    const keys = TERMINAL.has(next.status) ? [this.key(runId), this.openKey(next.identity)] : [this.key(runId)];
    const written = await redisCall(scripts.update.run<number>(this.client, keys, [JSON.stringify(next), `${this.ns}:changed:${runId}`, runId]));
    return written === 1 ? next : this.get(runId);
  }

  async start(runId: string, base: RunRecord): Promise<RunStart> {
    const next = { ...base, status: 'running' as const, updated_at: new Date().toISOString() };
    const written = await redisCall(
      scripts.start.run<number>(this.client, [this.key(runId), `${this.key(runId)}:cancel`, `${this.ns}:local`, `${this.ns}:unqueued`], [JSON.stringify(next), `${this.ns}:changed:${runId}`, runId]),
    );
    if (written === 1) return { record: next, started: true, cancelled: false };
    return { record: await this.get(runId), started: false, cancelled: written === -2 };
  }

  async append(runId: string, frames: (Omit<RunFrame, 'id'> & { id?: string })[], options: WriteOptions = {}): Promise<string[]> {
    if (frames.length === 0) {
      if (options.create !== undefined) await this.create(options.create, { local: true });
      return [];
    }
    const entries = entriesOf(frames);
    const replies = await this.writeFrames(runId, entries, undefined, false, options.create);
    if (replies[entries.length] === '-1') throw new RunEnded(runId);
    return frameIdsOf(entries, replies);
  }

  async end(runId: string, frames: (Omit<RunFrame, 'id'> & { id?: string })[], patch: Partial<RunRecord>, base?: RunRecord, options: WriteOptions & { local?: boolean } = {}): Promise<RunRecord | undefined> {
    const current = base ?? options.create ?? (await this.get(runId));
    const entries = entriesOf(frames);
    // A caller's own `updated_at` is kept: it tells the end its write made from another's, once the outcome of
    // that write was unknown (it timed out, and Redis ran it later).
    const next = current === undefined || TERMINAL.has(current.status) ? undefined : { ...current, ...patch, updated_at: patch.updated_at ?? new Date().toISOString() };
    const replies = await this.writeFrames(runId, entries, next, options.local === true, options.create);
    if (replies[entries.length] === '-1') throw new RunEnded(runId);
    checkEntries(entries, replies);
    return replies[entries.length] === '1' ? next : this.get(runId);
  }

  /**
   * One command (WRITE_FRAMES) for a batch of frames and, with `record`, the run's end: an entry's frames go
   * packed as JSON, `[id, event]` or `[id, event, data]` each — a frame without data stays without (an `end`),
   * one with `null` keeps it — assembled from each frame's JSON, which the writer made once for its client too.
   */
  private async writeFrames(runId: string, entries: FrameEntry[], record: RunRecord | undefined, forget: boolean, create?: RunRecord): Promise<string[]> {
    const args: (string | number)[] = [this.maxFrames, this.ttl, `${this.ns}:changed:${runId}`, record === undefined ? '' : JSON.stringify(record), forget ? '1' : '', runId];
    if (create === undefined) args.push('', '', '', '');
    // Ending in the step that stores it, the run is stored as it ends: its record goes once.
    else args.push(record === undefined ? JSON.stringify(create) : '=', Date.parse(create.created_at), this.maxListed, '');
    for (const entry of entries) {
      // Joined, not added up: one flat string, where `+=` would make a rope for ioredis to flatten again.
      const parts = new Array<string>(entry.frames.length);
      for (let i = 0; i < entry.frames.length; i++) {
        const frame = entry.frames[i] as Omit<RunFrame, 'id'> & { id?: string };
        const data = frameJson(frame);
        // An id is written as it is, between quotes (half the cost of JSON.stringify at every frame): so only
        // an id of this store's shape is taken (frameIds' own, digits and a dash).
        const id = frame.id === undefined ? 'null' : FRAME_ID.test(frame.id) ? `"${frame.id}"` : badFrameId();
        parts[i] = data === undefined ? `[${id},"${frame.event}"]` : `[${id},"${frame.event}",${data}]`;
      }
      args.push(entry.id ?? '*', `[${parts.join(',')}]`);
    }
    const owner = create === undefined ? this.key(runId) : `${this.ns}:owner:${create.identity}`;
    const keys = [`${this.key(runId)}:log`, this.key(runId), `${this.ns}:local`, owner];
    if (create === undefined && record !== undefined && TERMINAL.has(record.status)) keys.push(this.openKey(record.identity));
    const replies = await redisCall(scripts.writeFrames.run<string[]>(this.client, keys, args));
    if (replies[0] === '!taken') throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Run ${runId} exists`);
    return replies;
  }

  frameIds(base: number): () => string {
    // The prefix printed once: a millisecond count is a heap number, slow to print at every frame.
    const prefix = `${base}-`;
    let n = 0;
    return () => prefix + String(n++);
  }

  async heartbeat(runIds: readonly string[]): Promise<void> {
    if (runIds.length === 0) return;
    const keys = [`${this.ns}:local`];
    for (const runId of runIds) keys.push(this.key(runId), `${this.key(runId)}:log`);
    await redisCall(scripts.heartbeat.run<number>(this.client, keys, [this.ttl, ...runIds]));
  }

  async stale(staleMs: number): Promise<string[]> {
    return redisCall(scripts.stale.run<string[]>(this.client, [`${this.ns}:local`], [staleMs]));
  }

  async forget(runId: string): Promise<void> {
    await redisCall(this.client.zrem(`${this.ns}:local`, runId));
  }

  async executing(): Promise<number> {
    return redisCall(this.client.zcard(`${this.ns}:local`));
  }

  async unqueued(olderThanMs: number, count: number, offset = 0): Promise<{ runId: string; status: string | undefined }[]> {
    const ids = await redisCall(scripts.unqueued.run<string[]>(this.client, [`${this.ns}:unqueued`], [olderThanMs, count, offset]));
    if (ids.length === 0) return [];
    const heads = await this.heads(ids);
    return ids.map((runId, index) => ({ runId, status: heads[index] }));
  }

  async settleQueued(runIds: readonly string[]): Promise<void> {
    if (runIds.length > 0) await redisCall(this.client.zrem(`${this.ns}:unqueued`, ...runIds));
  }

  async beating(runId: string, staleMs: number): Promise<boolean> {
    return (await redisCall(scripts.beating.run<number>(this.client, [`${this.ns}:local`], [runId, staleMs]))) === 1;
  }

  async frames(runId: string, afterId?: string): Promise<RunFrame[]> {
    // From the entry holding `afterId` (the last whose id is not past it), 20 entries at a time, keeping
    // the frames after it — found and read in one round trip.
    const after = afterId === undefined ? undefined : parseStreamId(afterId);
    const log = `${this.key(runId)}:log`;
    let entries: [string, string[]][];
    let held = 1;
    if (after === undefined) entries = (await redisCall(this.client.xrange(log, '-', '+', 'COUNT', 20))) as [string, string[]][];
    else [held, entries] = await redisCall(scripts.readFromEntry.run<[number, [string, string[]][]]>(this.client, [log], [afterId as string, 20]));
    // The first entry, unpacked once: it tells whether the read skips trimmed frames, and is read below. From the
    // start: a log that begins past its execution's first frame. After an id that no entry holds (the trim took
    // it): a log whose first frame is not the very next one (an execution's ids go up by one).
    const first = entries[0] === undefined ? undefined : unpackEntry(entries[0][1]);
    if (first !== undefined && (after === undefined ? startsTrimmed(first) : held === 0 && !nextAfter(first[0]?.[0] ?? (entries[0] as [string, string[]])[0], after))) {
      throw logTrimmed(runId, afterId, this.maxFrames);
    }
    const out: RunFrame[] = [];
    for (const [index, [entryId, fields]] of entries.entries()) {
      const packed = index === 0 ? first : unpackEntry(fields);
      if (packed === undefined) {
        // The good frames before it first: the caller's next read starts at this entry, and fails there.
        if (out.length > 0) return out;
        throw corruptLog(runId);
      }
      for (const frame of packed) {
        const frameId = frame[0] ?? entryId;
        if (after !== undefined && compareStreamIds(parseStreamId(frameId), after) <= 0) continue;
        out.push(frame.length === 2 ? { id: frameId, event: frame[1] } : { id: frameId, event: frame[1], data: frame[2] });
      }
    }
    return out;
  }

  async watch(runId: string): Promise<RunWatch> {
    const channel = `${this.ns}:changed:${runId}`;
    this.watching.set(channel, (this.watching.get(channel) ?? 0) + 1);
    const watch = emitterWatch(this.events, channel, () => {
      const left = (this.watching.get(channel) ?? 1) - 1;
      if (left > 0) {
        this.watching.set(channel, left);
        return;
      }
      this.watching.delete(channel);
      void this.subscriber?.unsubscribe(channel).catch(() => undefined);
    });
    // Subscribed before the caller reads: a frame written after its read still wakes it.
    await this.subscribe(channel).catch(() => undefined);
    return watch;
  }

  async list(identity: string, limit: number, match: RunMatch = {}): Promise<RunRecord[]> {
    const found: RunRecord[] = [];
    for await (const record of this.each(identity, limit, match)) found.push(record);
    return found;
  }

  async *each(identity: string, limit: number, match: RunMatch = {}): AsyncGenerator<RunRecord> {
    const owner = `${this.ns}:owner:${identity}`;
    let listed = 0;
    // Pages by rank: a run the caller adds meanwhile moves the later ones down a place, so a page may begin
    // with the last of the one before — listed once.
    const seen = new Set<string>();
    const filtered = match.chain !== undefined || match.status !== undefined || match.chat_id !== undefined;
    // A page of the caller's runs at a time, newest first. With a match, each record's first bytes say whether
    // it can be one (its small fields come before its input): only those are read whole — a listing of one
    // chain's runs is not the caller's thousand records, inputs and all, read to keep a few.
    for (let start = 0; listed < limit && start < this.maxListed; start += LIST_PAGE) {
      const ids = await redisCall(this.client.zrevrange(owner, start, Math.min(start + LIST_PAGE, this.maxListed) - 1));
      if (ids.length === 0) break;
      const fresh = ids.filter((id) => !seen.has(id));
      for (const id of fresh) seen.add(id);
      const heads = await this.leading(fresh, filtered);
      const candidates = fresh.flatMap((id, index) => {
        const read = heads[index] ?? { bytes: 0 };
        return read !== 'gone' && (!filtered || mayMatch(read.head, match)) ? [{ id, bytes: read.bytes }] : [];
      });
      // Read whole as they are needed, and a few megabytes at a time: a page of candidates that all match costs
      // `limit` records, no more, and records of a megabyte each are not all held at once.
      for (let next = 0; next < candidates.length && listed < limit; ) {
        const batch: string[] = [];
        let bytes = 0;
        while (next < candidates.length && batch.length < limit - listed) {
          const candidate = candidates[next] as { id: string; bytes: number };
          if (batch.length > 0 && bytes + candidate.bytes > LIST_READ_BYTES) break;
          batch.push(candidate.id);
          bytes += candidate.bytes;
          next++;
        }
        const raw = await redisCall(this.client.mget(...batch.map((id) => this.key(id))));
        for (let index = 0; index < raw.length; index++) {
          let record: RunRecord | undefined;
          try {
            record = parseRecord(raw[index] ?? null, batch[index] as string);
          } catch {
            // A record that is not valid is not listed.
          }
          raw[index] = null;
          if (record !== undefined && record.identity === identity && matches(record, match) && listed < limit) {
            listed++;
            yield record;
          }
        }
      }
    }
  }

  /**
   * Each run's record's length and, asked for, its leading small fields from its first bytes ('gone': no
   * record; `head` undefined: unread or unreadable, so it may match).
   */
  private async leading(ids: readonly string[], heads: boolean): Promise<('gone' | { bytes: number; head?: RecordHead })[]> {
    const pipeline = this.client.pipeline();
    for (const id of ids) {
      pipeline.strlen(this.key(id));
      if (heads) pipeline.getrange(this.key(id), 0, HEAD_BYTES - 1);
    }
    const replies = (await redisCall(pipeline.exec())) ?? [];
    const step = heads ? 2 : 1;
    return ids.map((_, index) => {
      const [lengthError, length] = replies[index * step] ?? [null, undefined];
      // A key of another kind (STRLEN refused) is read as any record is, and not listed.
      const bytes = lengthError === null && typeof length === 'number' ? length : 0;
      if (lengthError === null && bytes === 0) return 'gone';
      if (!heads) return { bytes };
      const [error, head] = replies[index * step + 1] ?? [null, undefined];
      return error !== null || typeof head !== 'string' ? { bytes } : { bytes, head: recordHead(head) };
    });
  }

  async requestCancel(runId: string): Promise<void> {
    await redisCall(this.client.multi().set(`${this.key(runId)}:cancel`, '1', 'EX', this.ttl).publish(`${this.ns}:cancel`, runId).exec());
  }

  async cancelRequested(runId: string): Promise<boolean> {
    return (await redisCall(this.client.exists(`${this.key(runId)}:cancel`))) === 1;
  }

  onCancel(listener: (runId: string) => void): () => void {
    const channel = `${this.ns}:cancel`;
    const handler = (runId: string): void => listener(runId);
    this.events.on(channel, handler);
    void this.subscribe(channel).catch(() => undefined);
    return () => this.events.off(channel, handler);
  }

  validFrameId(id: string): boolean {
    return FRAME_ID.test(id);
  }

  async hasFrame(runId: string, id: string, loggedOnly = false): Promise<boolean> {
    const log = `${this.key(runId)}:log`;
    const packed = (entry: [string, string[]] | undefined): PackedFrame[] => {
      if (entry === undefined) return [];
      const frames = unpackEntry(entry[1]);
      if (frames === undefined) throw corruptLog(runId);
      return frames;
    };
    // The entry that would hold it: the last whose id is not past it.
    const [holder] = (await redisCall(this.client.xrevrange(log, id, '-', 'COUNT', 1))) as [string, string[]][];
    if (holder !== undefined) {
      const held = packed(holder);
      const ids = held.map((frame) => frame[0] ?? holder[0]);
      if (ids.includes(id)) return true;
      // The log's end is in this entry: nothing was made after it, by this execution or any.
      const lastEvent = held.at(-1)?.[1];
      if (loggedOnly || lastEvent === 'end' || lastEvent === 'error') return false;
      // Past the last frame written, in the execution that wrote it (ids `{base}-{n}`): a frame its process made
      // and handed to its client, then failed to write (Redis went away, the process was killed). The client
      // resumes after it as after the last frame written, and hears how the run ended — which the frames of
      // the run's end, written later from elsewhere (ids Redis gave), say. That execution wrote nothing after
      // the holder: no later entry goes on with its ids.
      const lastId = ids.at(-1);
      if (lastId === undefined) return false;
      const [wanted, written] = [parseStreamId(id), parseStreamId(lastId)];
      if (wanted[0] !== written[0] || wanted[1] <= written[1]) return false;
      const [next] = (await redisCall(this.client.xrange(log, `(${holder[0]}`, '+', 'COUNT', 1))) as [string, string[]][];
      // An entry after it that is not valid is no execution's: the read that follows reports it, after the
      // good frames before it (here it refused the resume before any of them).
      if (next === undefined) return true;
      const nextId = unpackEntry(next[1])?.[0]?.[0];
      if (nextId === undefined || nextId === null || parseStreamId(nextId)[0] !== wanted[0]) return true;
      // The same execution wrote on after the holder between the two reads (its client, handed frames before
      // their write returned, rejoined as it landed): look again from the entry that now holds the id. An entry
      // that starts after it leaves a gap: not a frame this execution made.
      // (The entry's own id too: an entry whose first frame says otherwise is no execution's, and would be found
      // again and again.)
      return compareStreamIds(parseStreamId(nextId), wanted) <= 0 && compareStreamIds(parseStreamId(next[0]), wanted) <= 0 && this.hasFrame(runId, id, loggedOnly);
    }
    // Before every entry: one of the run's only if the log was trimmed (its execution's first frame is gone).
    const [first] = (await redisCall(this.client.xrange(log, '-', '+', 'COUNT', 1))) as [string, string[]][];
    return first !== undefined && startsTrimmed(packed(first));
  }

  async close(): Promise<void> {
    this.events.removeAllListeners();
    this.subscriber?.disconnect();
    this.subscriber = undefined;
  }
}
