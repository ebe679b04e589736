/**
 * The queue background runs wait in, and the workers that execute them:
 * BullMQ on the Redis Runnel already uses (workers in every server process
 * and in `npm run worker` processes, any of them picking any run), or an
 * in-process queue for the embedded default. Cancel requests reach the
 * worker running a run wherever it is (a pub/sub message); a run still
 * waiting is taken out of the queue. A worker killed mid-run leaves its run
 * `running` only until BullMQ sees the job stalled (its lock expires) and
 * hands it to another worker, which ends it `error` `RUNNEL_ERR_RUN_LOST`
 * instead of running it twice.
 */
import { Queue, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { CancelToken, isRunnelError, RunnelError, type EventCallback, type Runnable } from '../core/index.js';
import { coalesceWrites, neverSent } from '../cache/redis-client.js';
import { executeRun, RunNotStored, type RunMeter, type RunReader } from './executor.js';
import { publicRun, RunEnded, TERMINAL, type RunRecord, type RunStore } from './store.js';
import { DEFAULT_DELIVERY_LIMITS, DeliveryLimiter, deliverWebhook, webhookBody, type DeliveryLimits, type WebhookPolicy } from './webhook.js';

/** What the server asks of a run queue. */
export interface RunQueue {
  readonly store: RunStore;
  /** Stores the run and queues it. */
  submit(record: RunRecord): Promise<void>;
  /**
   * Executes a run in this process now (a durable stream), storing it with its first write: `reader` hears
   * each frame once the run is stored. It outlives the request; any process ends it as lost if this one dies.
   */
  runHere(record: RunRecord, reader: RunReader): Promise<void>;
  /**
   * Ends a run executing in this process with `reason` (a stopping server's durable stream, after its grace):
   * it ends as any aborted run does, its last frame (the error) written and heard by its reader. False when no
   * such run executes here.
   */
  stopHere(runId: string, reason: RunnelError): boolean;
  /** Cancels a run: taken out of the queue if it waits, aborted wherever it runs. */
  cancel(runId: string): Promise<void>;
  /** Runs waiting, and running (queued runs and durable streams, wherever they execute), for /metrics. */
  counts(): Promise<{ waiting: number; active: number }>;
  /** Stops taking runs; running ones get `graceMs`, then are cancelled as shutting down. */
  close(graceMs: number): Promise<void>;
}

/** Options of the queues. */
export interface RunQueueOptions {
  store: RunStore;
  /** The runnable of each chain path. */
  chains: ReadonlyMap<string, Runnable<never, unknown>>;
  /** Runs this process executes at once; 0 runs none here (separate workers do). */
  concurrency: number;
  /** Hears errors that are bugs (for the log). */
  log?: (error: unknown, message: string) => void;
  /**
   * Hears what an operator should see that is no bug: a model provider's failure under a run, as the fields
   * of `providerFailure` with the run id (never the provider's message, which can quote a key).
   */
  warn?: (fields: Record<string, unknown>, message: string) => void;
  /** Who webhooks may call; without it no run has one. */
  webhooks?: WebhookPolicy & {
    attempts?: number;
    backoffMs?: number;
    maxRetryAfterMs?: number;
    limits?: Partial<DeliveryLimits>;
    /** How long past its grace a stopping process waits for deliveries (default {@link DELIVERIES_PAST_GRACE_MS}). */
    pastGraceMs?: number;
  };
  /** Tracing: the run-event callback that makes a run's spans under the trace it was submitted in. */
  trace?: (traceparent: string | undefined, tracestate: string | undefined) => EventCallback;
  /** The handlers that count a run's model calls and tokens in this process's `/metrics`, by the run's chain. */
  meter?: (chain: string) => RunMeter;
  /** Runs one caller may have pending or running at once, in every process of the store (`RUNNEL_MAX_RUNS_PER_KEY`); 0 or none: no limit. */
  maxRunsPerCaller?: number;
}

/** Webhook deliveries under way in this process: a stopping worker lets them finish within its grace. */
const deliveries = new Set<Promise<unknown>>();

/**
 * The limits on deliveries under way, and the log of those dropped (a flood of them is a line a minute, not a
 * line each): one per webhook policy (a process's queues share their server's).
 */
const limiters = new WeakMap<object, { limiter: DeliveryLimiter; dropped: ((error: unknown, message: string) => void) | undefined }>();

/** Waits for the process's deliveries within `ms`, then logs how many it leaves undelivered (they end with it). */
/**
 * How long past its grace a stopping process waits for webhook deliveries: the runs its grace ended (cancelled
 * as shutting down) start theirs only then, and would otherwise get none of it — the runs whose end nobody saw
 * losing the one message that says it. Inside the process's deadline (the grace plus 5 s).
 */
export const DELIVERIES_PAST_GRACE_MS = 2_000;

/** Waits for the deliveries under way until `deadline` (a `performance.now()` time); logs those left. */
async function settleDeliveriesBy(options: RunQueueOptions, deadline: number): Promise<void> {
  if (await within(Promise.all(deliveries), Math.max(0, deadline - performance.now()))) return;
  const left = options.webhooks === undefined ? undefined : limiters.get(options.webhooks)?.limiter.size;
  if (left !== undefined && left.active + left.waiting > 0) {
    options.log?.(undefined, `stopping with ${left.active} webhook deliveries under way and ${left.waiting} waiting: they are not delivered`);
  }
}

/** Sends an ended run's record to its webhook, once, in the background, within the process's delivery limits. */
function notify(record: RunRecord | undefined, options: RunQueueOptions): void {
  if (record?.webhook === undefined || options.webhooks === undefined || !TERMINAL.has(record.status)) return;
  const policy = options.webhooks;
  let limits = limiters.get(policy);
  if (limits === undefined) {
    limits = { limiter: new DeliveryLimiter({ ...DEFAULT_DELIVERY_LIMITS, ...policy.limits }), dropped: options.log === undefined ? undefined : repeatsHeldBack(options.log) };
    limiters.set(policy, limits);
  }
  const url = record.webhook;
  const body = webhookBody(publicRun(record), record.identity, url);
  const sending = limits.limiter.run(record.identity, (turn) =>
    deliverWebhook(url, body, policy, { attempts: policy.attempts, backoffMs: policy.backoffMs, maxRetryAfterMs: policy.maxRetryAfterMs, id: record.run_id, pause: turn.pause }),
  );
  if (sending === undefined) {
    limits.dropped?.(undefined, 'a webhook was not sent: too many deliveries under way (for its caller, or in this process)');
    return;
  }
  const delivery = sending.then(
    (delivery) => {
      if (delivery.refused !== undefined) options.log?.(undefined, `webhook of run ${record.run_id} not sent: ${delivery.refused}`);
      else if (!delivery.delivered) {
        const asked = delivery.retryAfterMs === undefined ? '' : `, asked to wait ${Math.ceil(delivery.retryAfterMs / 1000)} s: longer than a delivery waits`;
        const last = delivery.status === undefined ? `no answer: ${delivery.error ?? 'error'}` : `status ${delivery.status}${asked}`;
        options.log?.(undefined, `webhook of run ${record.run_id} not delivered after ${delivery.attempts} attempts (last ${last})`);
      }
    },
    (error: unknown) => options.log?.(error, `webhook of run ${record.run_id} failed`),
  );
  deliveries.add(delivery);
  void delivery.finally(() => deliveries.delete(delivery));
}

/**
 * A log that passes the first error of each kind (its message) and then at most one a minute, saying how
 * many like it were held back since; a kind heard again after a quiet minute is passed at once.
 *
 * @example
 * worker.on('error', repeatsHeldBack((error, message) => log.error({ err: error }, message)));
 */
export function repeatsHeldBack(log: (error: unknown, message: string) => void, options: { everyMs?: number; now?: () => number } = {}): (error: unknown, message: string) => void {
  const everyMs = options.everyMs ?? 60_000;
  const now = options.now ?? Date.now;
  const kinds = new Map<string, { at: number; held: number }>();
  return (error, message) => {
    const kind = `${message}\u0000${error instanceof Error ? error.message : String(error)}`;
    const at = now();
    const last = kinds.get(kind);
    if (last !== undefined && at - last.at < everyMs) {
      last.held++;
      return;
    }
    // Bounded: kinds are few (an outage's errors), but their texts are not this code's to bound.
    if (kinds.size >= 100) kinds.clear();
    kinds.set(kind, { at, held: 0 });
    log(error, last === undefined || last.held === 0 ? message : `${message} (and ${last.held} more like it since the last line)`);
  };
}

/** BullMQ's words for a job lock its worker lost (lock-manager.js, finished-errors.js), and no other error. */
const BULLMQ_LOCK_LOST = /^(could not renew lock for job |Missing lock for job |Lock mismatch for job )/;

/**
 * The ends one process wrote for a run whose outcome it did not learn: a write that timed out (Redis frozen,
 * slow, or its connection closed under it) may still be run when Redis answers again, and its run is then
 * ended by this process — which must call its webhook — though every later attempt finds the run ended "by
 * another". Each end is stamped (`updated_at`, with its status and code); a run found ended with one of these
 * stamps was ended by one of this process's writes. (A probe: Redis frozen 4 s under runs, 13 of 16 that
 * ended `error` never had their webhook called.)
 */
class OwnEnds {
  private readonly stamps = new Set<string>();

  /** `patch` for run `runId`, stamped, and remembered as this process's (the newest {@link MAX_OWN_ENDS}). */
  stamp(runId: string, patch: Partial<RunRecord>): Partial<RunRecord> {
    const stamped = { ...patch, updated_at: new Date().toISOString() };
    this.stamps.add(OwnEnds.key(runId, stamped));
    if (this.stamps.size > MAX_OWN_ENDS) this.stamps.delete(this.stamps.values().next().value as string);
    return stamped;
  }

  /** Forgets the stamp of `record`, an end whose write answered (done, or refused): its outcome is known. */
  settled(record: RunRecord | undefined): RunRecord | undefined {
    if (record !== undefined) this.stamps.delete(OwnEnds.key(record.run_id, record));
    return record;
  }

  /** `record` when one of this process's ends ended it (once: its stamp is forgotten then). */
  own(record: RunRecord | undefined): RunRecord | undefined {
    return record !== undefined && TERMINAL.has(record.status) && this.stamps.delete(OwnEnds.key(record.run_id, record)) ? record : undefined;
  }

  private static key(runId: string, record: Partial<RunRecord>): string {
    return `${runId}\u0000${record.updated_at ?? ''}\u0000${record.status ?? ''}\u0000${record.error?.code ?? ''}`;
  }
}

/** Ends one process remembers writing (about 100 bytes each): far more than end while Redis is away. */
const MAX_OWN_ENDS = 10_000;

/**
 * Marks a run that will never run again as ended, unless it already has. With `own`: a run found ended by one
 * of `own`'s writes (an earlier attempt whose outcome was unknown) is given back too, for its webhook.
 */
async function endRun(store: RunStore, runId: string, status: 'cancelled' | 'error', error: RunnelError, own?: OwnEnds): Promise<RunRecord | undefined> {
  const record = await store.get(runId);
  if (record === undefined) return undefined;
  if (TERMINAL.has(record.status)) return own?.own(record);
  const patch = { status, error: { code: error.code, message: error.message } };
  const stamped = own === undefined ? patch : own.stamp(runId, patch);
  try {
    const ended = await store.end(runId, [{ event: 'error', data: { status_code: error.statusCode, code: error.code, message: error.message } }], stamped, record);
    return own === undefined ? ended : own.settled(ended);
  } catch (failure) {
    if (!(failure instanceof RunEnded)) throw failure;
    // Ended meanwhile by another process, which told its webhook: nothing to say twice — unless by an earlier
    // write of this process's that had timed out. Not by this one, which Redis refused: its stamp goes first,
    // so another process's end of the same millisecond is not taken for it (a review).
    if (own === undefined) return undefined;
    own.settled({ ...record, ...stamped } as RunRecord);
    return own.own(await store.get(runId));
  }
}

const cancelled = (): RunnelError => new RunnelError('RUNNEL_ERR_RUN_CANCELLED', 'The run was cancelled');

/** The store failed under a run with a reader here: the reader gets `failure` now; `ending` ends the record. */
class EndPending extends Error {
  constructor(
    readonly failure: RunnelError,
    readonly ending: Promise<boolean>,
  ) {
    super(failure.message);
  }
}

/** The work every worker does for one queued run id. */
class RunWorkerCore {
  private readonly running = new Map<string, CancelToken>();
  /** The ends this process wrote, to know them when their outcome was unknown (see {@link OwnEnds}). */
  private readonly ends = new OwnEnds();
  private readonly stopListening: () => void;

  /**
   * @param staleMs how long a run's process may go without beating for it before the run is taken for lost
   *   (a lock's length); undefined where runs do not beat (in memory, one process).
   */
  constructor(
    private readonly options: RunQueueOptions,
    private readonly staleMs?: number,
  ) {
    this.stopListening = options.store.onCancel((runId) => this.running.get(runId)?.abort(cancelled()));
  }

  /**
   * Queued runs executing here. They beat too, so a run whose worker died is ended by the sweep of any process
   * within about a lock and a half — not only once a worker with a free slot takes its job again — and a
   * worker that lost its job's lock (Redis away for a moment) but still beats keeps its run.
   */
  private readonly queued = new Set<string>();
  /** Run ids this worker is processing: a job handed to it again meanwhile (its lock lapsed) is left to the first. */
  private readonly claimed = new Set<string>();
  /** Writes the heartbeat of every run executing here. */
  async beat(): Promise<void> {
    const runIds = [...this.local, ...this.queued];
    if (runIds.length > 0) await this.heard(this.options.store.heartbeat(runIds));
  }

  /** Whether Redis failed this process's last beat or sweep; when one succeeded after such a failure. */
  private troubled = false;
  private backAt = Number.NEGATIVE_INFINITY;

  /** `call`, noting whether Redis answered it: see {@link judging}. */
  private async heard<T>(call: Promise<T>): Promise<T> {
    try {
      const result = await call;
      if (this.troubled) this.backAt = Date.now();
      this.troubled = false;
      return result;
    } catch (error) {
      this.troubled = true;
      throw error;
    }
  }

  /**
   * Whether this process may take a run for lost by its heartbeat's age: not while Redis fails it, nor for a
   * lock after Redis answered it again. After an outage every process's heartbeats are old, and a live one
   * writes its next within a third of a lock of answering again: judged at once, runs still executing were
   * ended `RUNNEL_ERR_RUN_LOST` after Redis came back (a probe: a 3.5 s restart with a 3 s lock). The sweeps
   * and a job BullMQ hands back ask it.
   */
  judging(staleMs: number): boolean {
    return !this.troubled && Date.now() - this.backAt >= staleMs;
  }

  get active(): number {
    return this.running.size;
  }

  /** A queued run, by id: read it, and execute it unless it ended, was cancelled, or its worker was lost. */
  async process(runId: string): Promise<void> {
    // Claimed before the first await: a second delivery to this worker must not share the first's state (its
    // cancel token, its heartbeat).
    if (this.claimed.has(runId)) return;
    this.claimed.add(runId);
    try {
      await this.processClaimed(runId);
    } finally {
      this.claimed.delete(runId);
    }
  }

  private async processClaimed(runId: string): Promise<void> {
    const { store } = this.options;
    const record = await store.get(runId);
    if (record === undefined || TERMINAL.has(record.status)) return;
    // Running already: its job stalled and came back. Never run twice: while a process beats for it (one that
    // lost the job's lock to a Redis outage or a slow turn), it goes on there; else its worker is gone.
    if (record.status === 'running') {
      const staleMs = this.staleMs;
      // Handed back by BullMQ after an outage, before its process has had the time to beat again: left to the
      // sweep, which ends it once it may judge, if nobody beats for it by then.
      if (staleMs !== undefined && (!this.judging(staleMs) || (await store.beating(runId, staleMs)))) return;
      notify(await endRun(store, runId, 'error', new RunnelError('RUNNEL_ERR_RUN_LOST', 'The worker running this run stopped before it ended'), this.ends), this.options);
      return;
    }
    // Its first heartbeat goes with its start, and its last write forgets it; a run that did not end by its own
    // write (the store failed under it) has it forgotten here.
    this.queued.add(runId);
    let forgotten = false;
    try {
      forgotten = await this.execute(record, undefined);
    } finally {
      this.queued.delete(runId);
      if (!forgotten) await store.forget(runId).catch(() => undefined);
    }
  }

  /**
   * A run executed here and now, outside the queue (a durable stream's), stored by its first write,
   * `reader` hearing every frame once it is stored. Its heartbeat lets any process end it as lost if this one
   * dies.
   */
  async runLocal(record: RunRecord, reader: RunReader): Promise<void> {
    // Stored as running, with its first heartbeat, by its first write — before its first frame goes out to the
    // reader, so a client that rejoins right after that frame finds the run on any replica; the chain starts at
    // once.
    const running: RunRecord = { ...record, status: 'running' };
    this.local.add(record.run_id);
    let forgotten = false;
    let pending: Promise<boolean> | undefined;
    try {
      // A run that ends normally forgets its heartbeat in the same round trip as its last write.
      forgotten = await this.execute(running, reader, true);
    } catch (error) {
      if (error instanceof EndPending) {
        // Its record is being ended (once Redis answers): it stays this process's, with its heartbeat, until
        // then, so the sweep does not end it too; the reader gets the error now.
        forgotten = true;
        pending = error.ending;
        throw error.failure;
      }
      if (!(error instanceof RunNotStored)) throw error;
      // Refused before anything was written — the memory store full of runs under way, or a key of the run's
      // that holds another kind of value (the scripts check first) — the run is not stored: the reason stands.
      if (error.cause instanceof RunnelError && (error.cause.code === 'RUNNEL_ERR_OVERLOADED' || error.cause.code === 'RUNNEL_ERR_STORED_RECORD_INVALID')) {
        forgotten = true;
        throw error.cause;
      }
      // Its first write failed — but one that timed out may still be carried out when Redis answers again (and
      // then stores the run as running, with its heartbeat). Its client is told it was refused (a 503), so such
      // a run is ended as soon as Redis answers, calling no webhook: the sweep that ended it lost called it (a
      // probe: a signed record of a run its caller was told had not started). Its heartbeat is kept until then
      // (and for good if Redis stays away longer than the tries): stale, it has a sweep end the run as lost. (The
      // run id is the server's: a taken one can only be this write's own, resent by the client after a reconnect.)
      // One refused unsent (Redis down) cannot land: nothing to end, and a minute of tries each would hold it.
      forgotten = true;
      if (!neverSent(error.cause)) pending = this.endWhenPossible(record.run_id, new RunnelError('RUNNEL_ERR_REDIS_UNAVAILABLE', 'The run could not be stored in time: its client was told it was refused'), { tell: false });
      throw new RunnelError('RUNNEL_ERR_REDIS_UNAVAILABLE', 'Redis is unavailable: the run could not be stored', { cause: error.cause });
    } finally {
      if (pending === undefined) this.local.delete(record.run_id);
      else {
        const settled = pending.then(async (ended) => {
          this.local.delete(record.run_id);
          if (ended) await this.options.store.forget(record.run_id).catch(() => undefined);
        });
        // Shutdown gives these endings what is left of its grace (see `endings`).
        this.endings.add(settled);
        void settled.finally(() => this.endings.delete(settled));
      }
      if (!forgotten) await this.options.store.forget(record.run_id).catch(() => undefined);
    }
  }

  /** Runs executed here outside the queue (for their heartbeat). */
  readonly local = new Set<string>();

  /** Records being ended after the store failed under their runs, whose readers were told already. */
  readonly endings = new Set<Promise<void>>();

  /** Set once the process stops: an ending still retrying gives up (the sweep of another process ends it). */
  private stopped = false;

  /** Executes a run; resolves true when its record was ended by its own last write. */
  private async execute(record: RunRecord, reader: RunReader | undefined, local = false): Promise<boolean> {
    const { store, chains } = this.options;
    const runId = record.run_id;
    const controller = new CancelToken();
    this.running.set(runId, controller);
    // Cancel requests come by pub/sub; a poll of the flag catches one published while the subscriber reconnected.
    const poll = setInterval(() => {
      void store.cancelRequested(runId).then(
        (requested) => requested && controller.abort(cancelled()),
        () => undefined,
      );
    }, 1_000);
    poll.unref();
    try {
      const runnable = chains.get(record.chain);
      if (runnable === undefined) {
        notify(await endRun(store, runId, 'error', new RunnelError('RUNNEL_ERR_NOT_FOUND', `No chain ${record.chain} in this worker`), this.ends), this.options);
        return false;
      }
      const own = this.ends;
      let attempted = false;
      const ending = (patch: Partial<RunRecord>): Partial<RunRecord> => {
        attempted = true;
        return own.stamp(runId, patch);
      };
      try {
        const { trace, warn } = this.options;
        const meter = this.options.meter?.(record.chain);
        const ended = await executeRun({ record, runnable, store, signal: controller, reader, local, trace, warn, meter, ending, log: (error) => this.options.log?.(error, 'run failed') });
        // Found ended "elsewhere": by an end of its own that had timed out, Redis running it late, it is this
        // process's to tell.
        notify(own.settled(ended) ?? (attempted ? own.own(await store.get(runId).catch(() => undefined)) : undefined), this.options);
        return true;
      } catch (error) {
        if (error instanceof RunNotStored) throw error;
        // The store failed under the run (Redis down): end it once Redis answers again, so it is not left running.
        this.options.log?.(error, `run ${runId}: its record could not be written; retrying`);
        const failure = new RunnelError('RUNNEL_ERR_REDIS_UNAVAILABLE', 'Redis was unavailable while the run was under way');
        const ending = this.endWhenPossible(runId, failure);
        // A reader here (a durable stream's own client) hears it now, not once Redis is back: it gets this
        // error as its last frame, and the record is ended meanwhile (its heartbeat kept until then).
        if (reader !== undefined) throw new EndPending(failure, ending);
        await ending;
        return false;
      }
    } finally {
      clearInterval(poll);
      this.running.delete(runId);
    }
  }

  /**
   * Ends the runs whose process stopped beating (it died mid-run): durable streams, and queued runs, which beat
   * too (a job BullMQ hands back for one is left to this).
   */
  async sweep(staleMs: number): Promise<void> {
    const stale = await this.heard(this.options.store.stale(staleMs));
    if (!this.judging(staleMs)) return;
    for (const runId of stale) {
      if (this.local.has(runId) || this.queued.has(runId)) continue;
      try {
        notify(await endRun(this.options.store, runId, 'error', new RunnelError('RUNNEL_ERR_RUN_LOST', 'The process running this run stopped before it ended'), this.ends), this.options);
      } catch (error) {
        // A record that is not valid (changed by hand) cannot be ended: forgotten, so that it does not stop
        // every later sweep at the oldest heartbeat and keep the other lost runs from ending.
        if (!(error instanceof RunnelError && error.code === 'RUNNEL_ERR_STORED_RECORD_INVALID')) throw error;
        this.options.warn?.({ runId, code: error.code }, 'lost run not ended: its stored record is not valid');
      }
      await this.options.store.forget(runId);
    }
  }

  /**
   * Ends a run as failed, retrying every second for about a minute while the store is unavailable (so within
   * a second of Redis answering again); true once it is ended (or found ended, or not stored at all), false
   * when it gave up (the sweep ends it then). `tell`: call its webhook (not for a run its client was told
   * was refused).
   */
  private async endWhenPossible(runId: string, error: RunnelError, { tell = true }: { tell?: boolean } = {}): Promise<boolean> {
    for (let attempt = 0; attempt < 60 && !this.stopped; attempt++) {
      try {
        // An attempt that timed out may be run by Redis later: the next finds the run ended, by its stamp.
        const ended = await endRun(this.options.store, runId, 'error', error, this.ends);
        if (tell) notify(ended, this.options);
        return true;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 1_000).unref());
      }
    }
    return false;
  }

  /** Resolves once no run executes here (polled: shutdown only). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await new Promise((resolve) => setTimeout(resolve, 50));
  }

  /** Cancels what still runs, as the process stops. */
  abortAll(reason: RunnelError): void {
    for (const controller of this.running.values()) controller.abort(reason);
  }

  /** Aborts one run executing here; false when none by that id does. */
  abort(runId: string, reason: RunnelError): boolean {
    const controller = this.running.get(runId);
    controller?.abort(reason);
    return controller !== undefined;
  }

  close(): void {
    this.stopped = true;
    this.stopListening();
  }

  /**
   * Ends a run taken out of the queue before it started. `refused`: its submission was answered with an error
   * (a 503), so its caller never learnt of it — its webhook is not called (a probe: the receiver got a signed
   * `error` record of a run nobody had, beside the one its caller submitted again).
   */
  async endWaiting(runId: string, error: RunnelError, status: 'cancelled' | 'error', { refused = false }: { refused?: boolean } = {}): Promise<void> {
    const ended = await endRun(this.options.store, runId, status, error, this.ends);
    if (!refused) notify(ended, this.options);
  }
}

/** Waits for `work`, at most `ms`; true when it finished. */
async function within(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  const done = await Promise.race([work.then(() => true as const), timeout]);
  clearTimeout(timer);
  return done;
}

/**
 * Runs on BullMQ: one queue per deployment (`prefix`), workers in this
 * process when `concurrency` > 0.
 *
 * @example
 * const queue = new BullRunQueue({ connection: redis, store, chains, concurrency: 8 });
 */
export class BullRunQueue implements RunQueue {
  readonly store: RunStore;
  private readonly queue: Queue;
  private readonly worker: Worker | undefined;
  private readonly core: RunWorkerCore;
  private readonly connections: Redis[] = [];
  /** Whether the queue's connection has lost Redis and not found it again (not before its first connect). */
  private redisLost = false;
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly options: RunQueueOptions;
  /** The server's own connection (it fails fast while Redis is away; the queue's waits). */
  private readonly redis: Redis;
  private sweepingUnqueued = false;
  /** Where the next sweep of runs not started begins (see {@link sweepUnqueued}). */
  private unqueuedFrom = 0;
  /** Runs submitted here whose job is being added (held back while Redis is away): the sweep leaves them. */
  private readonly adding = new Set<string>();

  constructor(options: RunQueueOptions & { connection: Redis; prefix?: string; lockMs?: number }) {
    this.store = options.store;
    this.options = options;
    this.redis = options.connection;
    this.core = new RunWorkerCore(options, options.lockMs ?? 30_000);
    const prefix = options.prefix ?? 'runnel-bull';
    // BullMQ wants connections of its own (a worker blocks on one); they end with the queue. Each connects at
    // once and keeps trying (not lazily, as the server's own client does): BullMQ connects a lazy one once, and
    // when Redis was down at start that failure stood — no run was ever queued or taken (a probe). What a
    // closed connection held is sent again on the next, as BullMQ expects (its blocking waits have no timeout).
    const connection = (): Redis => {
      const client = options.connection.duplicate({ maxRetriesPerRequest: null, enableOfflineQueue: true, commandTimeout: undefined, lazyConnect: false, autoResendUnfulfilledCommands: true });
      client.on('error', () => {});
      coalesceWrites(client);
      this.connections.push(client);
      return client;
    };
    const queueClient = connection();
    queueClient.on('close', () => (this.redisLost = true));
    queueClient.on('ready', () => (this.redisLost = false));
    this.queue = new Queue('runs', { connection: queueClient, prefix, defaultJobOptions: { removeOnComplete: true, removeOnFail: 1000 } });
    this.queue.on('error', () => {});
    // Runs executing here (durable streams, and queued runs) beat every third of a lock; any process ends
    // those whose process stopped beating for a whole lock.
    const lockMs = options.lockMs ?? 30_000;
    this.timers.push(
      setInterval(() => void this.core.beat().catch(() => undefined), Math.max(200, Math.floor(lockMs / 3))),
      setInterval(() => void this.core.sweep(lockMs).catch(() => undefined), Math.max(500, Math.floor(lockMs / 2))),
      setInterval(() => {
        // A sweep of a long backlog may outlast the interval: one at a time.
        if (this.sweepingUnqueued) return;
        this.sweepingUnqueued = true;
        void this.sweepUnqueued(2 * lockMs)
          .catch(() => undefined)
          .finally(() => (this.sweepingUnqueued = false));
      }, Math.max(500, Math.floor(lockMs / 2))),
    );
    for (const timer of this.timers) timer.unref();
    if (options.concurrency > 0) {
      const lockDuration = options.lockMs ?? 30_000;
      this.worker = new Worker('runs', async (job: Job<{ run_id: string }>) => this.core.process(job.data.run_id), {
        connection: connection(),
        prefix,
        concurrency: options.concurrency,
        lockDuration,
        stalledInterval: Math.max(500, Math.floor(lockDuration / 2)),
        maxStalledCount: 1,
      });
      // Redis away, the worker fails at every try (a line a second for as long as the outage lasts): the log
      // gets the first of each kind, then a line a minute with how many were held back.
      const log = options.log;
      const heard = log === undefined ? undefined : repeatsHeldBack(log);
      // A lost lock is no bug (the worker or Redis paused past the lock's length): BullMQ says so as an error
      // (could not renew, missing, mismatched), and what follows is handled — the run goes on while its process
      // beats, and is ended lost otherwise. An operator hears it as a warning, not three errors a run.
      const warn = options.warn;
      const lockLost = warn === undefined ? undefined : repeatsHeldBack((error, message) => warn({ reason: error instanceof Error ? error.message : String(error) }, message));
      this.worker.on('error', (error) => {
        if (lockLost !== undefined && BULLMQ_LOCK_LOST.test(error.message)) lockLost(error, "run worker lost a job's lock (the worker or Redis paused past RUNNEL_RUN_LOCK_MS): the run goes on while its process beats for it, else it ends RUNNEL_ERR_RUN_LOST");
        else heard?.(error, 'run worker error');
      });
      // A worker that lost a job's lock (Redis away for a moment, or too slow a turn to renew it) keeps running
      // it: another worker that takes the job finds it beating and leaves it; one whose heartbeat went stale
      // meanwhile is ended there as lost, and then its writes here are refused, which stops it.
    }
  }

  async runHere(record: RunRecord, reader: RunReader): Promise<void> {
    await this.core.runLocal(record, reader);
  }

  stopHere(runId: string, reason: RunnelError): boolean {
    return this.core.abort(runId, reason);
  }

  async submit(record: RunRecord): Promise<void> {
    // Two steps, the record then the job (BullMQ's own): a process stopped between them leaves a run no worker
    // will take, which the sweep below ends.
    try {
      await this.store.create(record, { openLimit: this.options.maxRunsPerCaller, queued: true });
    } catch (error) {
      // A write that timed out may still be carried out once Redis answers again (a frozen Redis): the run would
      // wait there, its caller told it was refused and holding one of the caller's open runs (a probe: 429 for a
      // minute and more). It is ended as soon as Redis answers. Not one the client never sent (Redis down): that
      // cannot land, and each refusal had its own two minutes of retries, their timers and the record held (a
      // probe: 8,000 submissions with Redis down, 7 MB of heap for two minutes, then as many writes at once).
      if (isRunnelError(error) && error.code === 'RUNNEL_ERR_REDIS_UNAVAILABLE' && !neverSent(error)) this.endRefused(record.run_id);
      throw error;
    }
    this.adding.add(record.run_id);
    try {
      await this.queue.add('run', { run_id: record.run_id }, { jobId: record.run_id });
    } catch (error) {
      await this.core.endWaiting(record.run_id, new RunnelError('RUNNEL_ERR_REDIS_UNAVAILABLE', 'The run could not be queued'), 'error', { refused: true }).catch(() => undefined);
      throw new RunnelError('RUNNEL_ERR_REDIS_UNAVAILABLE', 'Redis is unavailable: the run could not be queued', { cause: error });
    } finally {
      this.adding.delete(record.run_id);
    }
  }

  /**
   * Ends run `runId` if its record, whose write failed (a timeout), was written after all: tried until Redis
   * answers, for two minutes at most. Commands on one connection run in order, so a read that answers comes
   * after that write if it ever happens.
   */
  private endRefused(runId: string): void {
    const failure = new RunnelError('RUNNEL_ERR_REDIS_UNAVAILABLE', 'The run could not be stored in time: its caller was told it was refused');
    void (async () => {
      for (let waited = 0, delay = 250; waited < 120_000 && this.closing === undefined; waited += delay, delay = Math.min(delay * 2, 8_000)) {
        try {
          await this.core.endWaiting(runId, failure, 'error', { refused: true });
          return;
        } catch {
          await new Promise((resolve) => setTimeout(resolve, delay).unref());
        }
      }
    })();
  }

  /**
   * Ends the queued runs stored more than `graceMs` ago that never started and never will: still `pending`,
   * with no job in the queue (their submitter stopped between its two steps) or a job that failed before it
   * started them (the store unavailable to its worker). Runs that left `pending` are settled; a pending one
   * whose job waits its turn is looked at again next time. Each is ended by taking it as a worker does (the
   * store's start, which refuses a run another worker started meanwhile), then ending it `RUNNEL_ERR_RUN_LOST`.
   */
  private async sweepUnqueued(graceMs: number): Promise<void> {
    const { store } = this;
    if (store.unqueued === undefined || store.settleQueued === undefined) return;
    // Nor right after an outage: a submission's job may still wait in its process's queue connection for Redis.
    if (!this.core.judging(graceMs / 2)) return;
    // Runs left where they are (waiting their turn, or unread) stay at the front: each pass reads past them.
    // A sweep that stopped before the end (a backlog longer than its passes) leaves the next one its place, so
    // a lost run behind a long backlog is reached within a few sweeps; one that reached the end starts over.
    // (Runs ahead of the place that start meanwhile move it on past some: those are read after the next start over.)
    let kept = this.unqueuedFrom;
    this.unqueuedFrom = 0;
    for (let pass = 0; pass < UNQUEUED_PASSES; pass++) {
      const runs = await store.unqueued(graceMs, UNQUEUED_PASS, kept);
      const settled: string[] = [];
      const pending: string[] = [];
      for (const { runId, status } of runs) {
        // Unread (Redis failed, or an odd record): looked at again next time.
        if (status === 'pending') pending.push(runId);
        else if (status !== undefined) settled.push(runId);
      }
      if (pending.length > 0) {
        // Adds in flight as the jobs are read (one that lands meanwhile has left `this.adding` by the reply).
        const adding = new Set(pending.filter((id) => this.adding.has(id)));
        const pipeline = this.redis.pipeline();
        for (const id of pending) pipeline.hmget(this.queue.toKey(id), 'timestamp', 'finishedOn', 'data');
        const jobs = (await pipeline.exec()) ?? [];
        for (const [index, id] of pending.entries()) {
          const [error, fields] = jobs[index] ?? [new Error('no reply'), null];
          if (error !== null || !Array.isArray(fields)) continue;
          const [queuedAt, finishedAt, data] = fields as (string | null)[];
          // A job whose data is not what Runnel writes (changed by hand) fails in every worker that takes it,
          // before it starts, and never ends: its run would wait for good. The data is the run's id, which is
          // the job's own: written again, the job is taken again — it runs, or BullMQ fails it as stalled too
          // often, and this sweep ends its run lost.
          if (queuedAt !== null && finishedAt === null && !jobDataOf(data ?? null, id)) {
            // Written only if the job is as read (a replica's sweep may have mended it, or a worker ended it and
            // BullMQ removed it, meanwhile: then a bare HSET made a job hash of one field, which no one removes).
            const written = await rewriteJobData(this.redis, this.queue.toKey(id), data ?? null, id).catch(() => false);
            if (written) this.options.warn?.({ runId: id }, 'run job data not valid: written again from its id');
            continue;
          }
          // Its job waits its turn (or an add held back while Redis was away is still on its way here).
          if ((queuedAt !== null && finishedAt === null) || adding.has(id)) continue;
          if (await this.endNeverStarted(id).catch(() => false)) settled.push(id);
        }
      }
      await store.settleQueued(settled);
      kept += runs.length - settled.length;
      if (runs.length < UNQUEUED_PASS) return;
    }
    this.unqueuedFrom = kept;
  }

  /** Takes a run that never started, and ends it; true once it is no longer pending. */
  private async endNeverStarted(runId: string): Promise<boolean> {
    const { store } = this;
    const record = await store.get(runId);
    if (record?.status !== 'pending') return true;
    const taken = await store.start(runId, record);
    if (taken.cancelled) await this.core.endWaiting(runId, cancelled(), 'cancelled');
    if (!taken.started) return true;
    await this.core.endWaiting(runId, new RunnelError('RUNNEL_ERR_RUN_LOST', 'The run never started: its server stopped before queuing it, or its queued job failed'), 'error');
    // Its heartbeat (the start's) goes only once it has ended: if the end failed, the heartbeat's own sweep
    // ends it as lost a lock later.
    await store.forget(runId).catch(() => undefined);
    return true;
  }

  async cancel(runId: string): Promise<void> {
    await this.store.requestCancel(runId);
    const job = await this.queue.getJob(runId).catch(() => undefined);
    // Waiting its turn: in the wait list, or among the prioritized (a job added with a priority).
    const state = job === undefined ? undefined : await job.getState().catch(() => undefined);
    if (job !== undefined && (state === 'waiting' || state === 'prioritized')) {
      const removed = await job.remove().then(
        () => true,
        () => false,
      );
      if (removed) await this.core.endWaiting(runId, cancelled(), 'cancelled');
    }
  }

  async counts(): Promise<{ waiting: number; active: number }> {
    // The queue's connection waits out an outage with its commands queued: a scrape while Redis is known
    // down would wait for it (and every scrape add one more command). It is refused at once instead.
    if (this.redisLost) throw new RunnelError('RUNNEL_ERR_REDIS_UNAVAILABLE', 'Redis is unavailable: the queue cannot be counted');
    // Running: the runs that beat, not BullMQ's active jobs. A dead worker's job stays active until another
    // worker's stall check takes it back — for good, with none left — though the sweep has ended its run.
    const [counts, executing] = await Promise.all([this.queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized'), this.store.executing?.()]);
    return { waiting: (counts.waiting ?? 0) + (counts.delayed ?? 0) + (counts.prioritized ?? 0), active: executing ?? counts.active ?? 0 };
  }

  async close(graceMs: number): Promise<void> {
    this.closing ??= (async () => {
      const started = performance.now();
      if (this.worker !== undefined) {
        // Stops fetching at once; runs under way get the grace, then end as shutting down. Every wait is bounded:
        // with Redis down, BullMQ's own close would wait for it forever.
        const closing = this.worker.close().catch(() => undefined);
        if (!(await within(closing, graceMs))) {
          this.core.abortAll(new RunnelError('RUNNEL_ERR_SHUTTING_DOWN', 'The worker shut down before the run ended'));
          await within(closing, 2_000);
        }
      }
      // Runs executed here outside the queue get the same grace.
      if (!(await within(this.core.idle(), Math.max(0, graceMs - (performance.now() - started))))) {
        this.core.abortAll(new RunnelError('RUNNEL_ERR_SHUTTING_DOWN', 'The server shut down before the run ended'));
        await within(this.core.idle(), 2_000);
      }
      // Runs whose store failed under them, being ended once Redis answers: what is left of the grace.
      await within(Promise.all(this.core.endings), Math.max(0, graceMs - (performance.now() - started)));
      for (const timer of this.timers) clearInterval(timer);
      // Webhooks of runs that ended meanwhile — those the grace ended too — get until a little past the grace.
      await settleDeliveriesBy(this.options, started + graceMs + (this.options.webhooks?.pastGraceMs ?? DELIVERIES_PAST_GRACE_MS));
      this.core.close();
      await within(this.queue.close().catch(() => undefined), 1_000);
      await this.store.close();
      for (const client of this.connections) client.disconnect();
    })();
    return this.closing;
  }

  private closing: Promise<void> | undefined;
}

/** Whether a BullMQ job's `data` is what Runnel writes for run `runId`: `{"run_id": runId}`. */
/**
 * Lua: a queued job's data (KEYS[1]'s `data` field) written as ARGV[3], only while the job is queued and not
 * finished and its data is still ARGV[1] (ARGV[2] '1'), or still missing (ARGV[2] '0'): 1 when written.
 */
const REWRITE_JOB_DATA = `
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return 0 end
local held = redis.call('HMGET', KEYS[1], 'timestamp', 'finishedOn', 'data')
if not held[1] or held[2] then return 0 end
if ARGV[2] == '1' then
  if held[3] ~= ARGV[1] then return 0 end
elseif held[3] then
  return 0
end
redis.call('HSET', KEYS[1], 'data', ARGV[3])
return 1`;

/**
 * A queued job's data written again from its run's id, if the job at `key` is still queued, unfinished and
 * holding the data `read` (null: none) as read before; true when written.
 *
 * @example
 * await rewriteJobData(redis, queue.toKey(runId), '{"run_id":', runId);
 */
export async function rewriteJobData(redis: Redis, key: string, read: string | null, runId: string): Promise<boolean> {
  return (await redis.eval(REWRITE_JOB_DATA, 1, key, read ?? '', read === null ? '0' : '1', JSON.stringify({ run_id: runId }))) === 1;
}

function jobDataOf(data: string | null, runId: string): boolean {
  if (data === null) return false;
  try {
    const value = JSON.parse(data) as unknown;
    return value !== null && typeof value === 'object' && (value as { run_id?: unknown }).run_id === runId;
  } catch {
    return false;
  }
}

/** How many runs one pass of {@link BullRunQueue}'s sweep of runs never started reads, and most passes a sweep makes. */
const UNQUEUED_PASS = 500;
const UNQUEUED_PASSES = 20;

/** One caller's runs in the in-process queue. */
interface CallerRuns {
  /** Its runs waiting, in the order they came. */
  line: string[];
  underway: number;
  /** When its last run started (the queue's count of starts then; 0: none yet). */
  started: number;
}

/** Most runs the in-process queue holds waiting (its memory is the server's). */
const MAX_WAITING = 10_000;

/**
 * Runs in this process, for the embedded default (no Redis): `concurrency`
 * at a time. The next run is that of the waiting caller with the fewest runs
 * under way, and among those the one whose last run started longest ago;
 * each caller's own runs start in the order they came. So one caller's
 * thousand runs do not hold back another's one. Runs end with the process.
 *
 * @example
 * const queue = new MemoryRunQueue({ store: new MemoryRunStore(), chains, concurrency: 8 });
 */
export class MemoryRunQueue implements RunQueue {
  readonly store: RunStore;
  /** The callers with runs waiting or under way. */
  private readonly callers = new Map<string, CallerRuns>();
  /** Runs waiting in all lines. */
  private waiting = 0;
  /** Runs started so far: the order of callers' last starts. */
  private starts = 0;
  private readonly core: RunWorkerCore;
  private readonly concurrency: number;
  private readonly underway = new Set<Promise<void>>();
  private readonly streaming = new Set<Promise<void>>();
  private closed = false;
  private readonly options: RunQueueOptions;

  constructor(options: RunQueueOptions) {
    this.store = options.store;
    this.options = options;
    this.core = new RunWorkerCore(options);
    this.concurrency = Math.max(1, options.concurrency);
  }

  async submit(record: RunRecord): Promise<void> {
    if (this.closed) throw new RunnelError('RUNNEL_ERR_SHUTTING_DOWN', 'The server is shutting down');
    if (this.waiting >= MAX_WAITING) throw new RunnelError('RUNNEL_ERR_OVERLOADED', `${MAX_WAITING} runs are waiting already; retry shortly`);
    await this.store.create(record, { openLimit: this.options.maxRunsPerCaller });
    let own = this.callers.get(record.identity);
    if (own === undefined) this.callers.set(record.identity, (own = { line: [], underway: 0, started: 0 }));
    own.line.push(record.run_id);
    this.waiting++;
    this.pump();
  }

  /** The caller whose run starts next: of those waiting, the fewest under way, then the longest since its last start. */
  private next(): [string, CallerRuns] | undefined {
    let next: [string, CallerRuns] | undefined;
    for (const entry of this.callers) {
      const [, own] = entry;
      if (own.line.length === 0) continue;
      if (next === undefined || own.underway < next[1].underway || (own.underway === next[1].underway && own.started < next[1].started)) next = entry;
    }
    return next;
  }

  /** Forgets a caller with nothing waiting or under way. */
  private settle(caller: string, own: CallerRuns): void {
    if (own.line.length === 0 && own.underway === 0 && this.callers.get(caller) === own) this.callers.delete(caller);
  }

  private pump(): void {
    while (!this.closed && this.underway.size < this.concurrency && this.waiting > 0) {
      const [caller, own] = this.next() as [string, CallerRuns];
      const runId = own.line.shift() as string;
      this.waiting--;
      own.underway++;
      own.started = ++this.starts;
      const work = this.core.process(runId).catch(() => undefined);
      this.underway.add(work);
      void work.finally(() => {
        this.underway.delete(work);
        own.underway--;
        this.settle(caller, own);
        this.pump();
      });
    }
  }

  async runHere(record: RunRecord, reader: RunReader): Promise<void> {
    if (this.closed) throw new RunnelError('RUNNEL_ERR_SHUTTING_DOWN', 'The server is shutting down');
    // Not counted against the queue's concurrency: a durable stream runs now, as a plain stream would.
    const work = this.core.runLocal(record, reader);
    const tracked = work.catch(() => undefined);
    this.streaming.add(tracked);
    void tracked.finally(() => this.streaming.delete(tracked));
    await work;
  }

  stopHere(runId: string, reason: RunnelError): boolean {
    return this.core.abort(runId, reason);
  }

  async cancel(runId: string): Promise<void> {
    await this.store.requestCancel(runId);
    const caller = (await this.store.get(runId))?.identity;
    const own = caller === undefined ? undefined : this.callers.get(caller);
    const index = own?.line.indexOf(runId) ?? -1;
    if (own !== undefined && index >= 0) {
      own.line.splice(index, 1);
      this.waiting--;
      this.settle(caller as string, own);
      await this.core.endWaiting(runId, cancelled(), 'cancelled');
    }
  }

  async counts(): Promise<{ waiting: number; active: number }> {
    return { waiting: this.waiting, active: this.core.active };
  }

  /**
   * Once, as the BullMQ queue's: a server's shutdown closes it with its grace, then the app's own close with
   * none — which must not wait for the deliveries a second time (a receiver that never answers held a
   * shutdown 2 s more, near the process's deadline).
   */
  async close(graceMs: number): Promise<void> {
    this.closing ??= this.closeOnce(graceMs);
    return this.closing;
  }

  private closing: Promise<void> | undefined;

  private async closeOnce(graceMs: number): Promise<void> {
    this.closed = true;
    const started = performance.now();
    const all = Promise.all([...this.underway, ...this.streaming]);
    if (!(await within(all, graceMs))) {
      this.core.abortAll(new RunnelError('RUNNEL_ERR_SHUTTING_DOWN', 'The server shut down before the run ended'));
      await all;
    }
    const left = [...this.callers.values()].flatMap((own) => own.line.splice(0));
    this.waiting = 0;
    for (const runId of left) await this.core.endWaiting(runId, new RunnelError('RUNNEL_ERR_SHUTTING_DOWN', 'The server shut down before the run started'), 'error');
    // Webhooks of runs that ended meanwhile — those the grace ended too — get until a little past the grace (a
    // whole grace more would hold the shutdown past its deadline, with a slow receiver).
    await settleDeliveriesBy(this.options, started + graceMs + (this.options.webhooks?.pastGraceMs ?? DELIVERIES_PAST_GRACE_MS));
    this.core.close();
    await this.store.close();
  }
}
