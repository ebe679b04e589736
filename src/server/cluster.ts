/**
 * One server process per core (`RUNNEL_PROCESSES`): Node runs JavaScript on
 * one core per process, so a machine with N cores serves with N processes.
 * The first process forks them with `node:cluster` and hands them the
 * listening socket (connections are dealt round-robin); each is a whole
 * server, as a replica is, sharing Redis and Postgres with the others.
 *
 * The first process serves nothing itself. Once the servers are up, it
 * replaces any that dies (one a second at most; while replacements keep
 * failing to start, say with Redis down, the wait doubles up to 30 s); if none has started yet and
 * one fails (a busy port, bad services: restarting would fail the same way),
 * it stops everything, and on SIGTERM or SIGINT passes the signal on, so each
 * process drains as a single server does, then exits 0 when they all have
 * (1 if any failed, or at the hard deadline).
 */
import cluster, { type Worker } from 'node:cluster';
import { aggregateMetrics } from './metrics.js';

/** What a server process sends the first process once it listens. */
const READY = 'runnel:ready';

/**
 * `/metrics` of a cluster: the server process a scrape reaches asks the first process (ASK), which asks every
 * server process for its series (COLLECT, answered with PART) and answers the sum (RESULT). Without it a
 * scrape read whichever process took the connection, and Prometheus saw counters jump between them.
 */
const OFFER = 'runnel:metrics-offer';
const ASK = 'runnel:metrics?';
const COLLECT = 'runnel:metrics-collect';
const PART = 'runnel:metrics-part';
const RESULT = 'runnel:metrics';
/**
 * How long the first process waits for a server process's series, and a server process for the sum (twice
 * that). Longer than a process's own slowest series (the run queue's counts wait at most a second for Redis).
 */
const METRICS_WAIT_MS = 2_000;
/** In a server process's environment: forked by {@link serveOnProcesses}, whose first process sums the metrics. */
const CLUSTER_FLAG = 'RUNNEL_CLUSTER_PROCESS';

interface MetricsMessage {
  type: string;
  id: number;
  values?: unknown;
  text?: string;
}

const isMetricsMessage = (message: unknown, type: string): message is MetricsMessage =>
  typeof message === 'object' && message !== null && (message as MetricsMessage).type === type && typeof (message as MetricsMessage).id === 'number';

/** This server process's series, once {@link offerClusterMetrics} was called. */
let ownMetrics: (() => Promise<unknown>) | undefined;
const asked = new Map<number, (text: string | undefined) => void>();
let lastAsk = 0;

/**
 * In a server process of a cluster, lets the first process read this process's series (`source`), so a
 * scrape on any process reads the whole server ({@link clusterMetrics}). Outside a cluster it does nothing.
 *
 * @example
 * offerClusterMetrics(() => app.runnel.metrics.values());
 */
export function offerClusterMetrics(source: () => Promise<unknown>): void {
  if (!cluster.isWorker || process.env[CLUSTER_FLAG] !== '1' || ownMetrics !== undefined) return;
  ownMetrics = source;
  // From now on the first process counts this one in every sum.
  process.send?.({ type: OFFER, id: 0 });
  process.on('message', (message: unknown) => {
    if (isMetricsMessage(message, COLLECT)) {
      void source().then(
        (values) => process.send?.({ type: PART, id: message.id, values }),
        () => process.send?.({ type: PART, id: message.id }),
      );
    } else if (isMetricsMessage(message, RESULT)) {
      asked.get(message.id)?.(message.text);
      asked.delete(message.id);
    }
  });
}

/**
 * The whole cluster's metrics as one exposition, from the first process; `'incomplete'` when a process did
 * not hand in its series in time (a short sum would read as a counter reset); undefined outside a cluster.
 */
export async function clusterMetrics(): Promise<string | 'incomplete' | undefined> {
  if (ownMetrics === undefined || process.send === undefined) return undefined;
  const id = ++lastAsk;
  return new Promise((resolve) => {
    asked.set(id, (text) => resolve(text ?? 'incomplete'));
    setTimeout(() => {
      if (asked.delete(id)) resolve('incomplete');
    }, METRICS_WAIT_MS * 2).unref();
    process.send?.({ type: ASK, id });
  });
}

/** Options of {@link serveOnProcesses}. */
export interface ProcessesOptions {
  /** How many server processes (1: this process serves, no cluster). */
  count: number;
  /** After a signal, when the first process gives up waiting and exits 1 (each process has its own deadline too). */
  deadlineMs: number;
  /** Where the first process says what it does (`npm start`: the server's JSON log lines). */
  log?: (level: 'info' | 'warn' | 'error', line: string) => void;
  /** The wait before a process that died is replaced. */
  restartDelayMs?: number;
}

/**
 * Serves with `options.count` processes: in a server process (or with a
 * count of 1) runs `start` — which listens — and reports ready; in the first
 * process of a cluster forks the servers and looks after them.
 *
 * @example
 * await serveOnProcesses({ count: config.processes, deadlineMs: shutdownDeadlineMs(config.shutdownGraceMs) }, start);
 */
export async function serveOnProcesses(options: ProcessesOptions, start: () => Promise<void>): Promise<void> {
  if (options.count <= 1 || !cluster.isPrimary) {
    await start();
    if (cluster.isWorker) process.send?.(READY);
    return;
  }
  superviseProcesses(options);
}

function superviseProcesses(options: ProcessesOptions): void {
  const log = options.log ?? ((_level: string, line: string) => console.error(line));
  const restartDelayMs = options.restartDelayMs ?? 1_000;
  const ready = new WeakSet<Worker>();
  /** Replacements in a row that died before they served: the wait before the next doubles (to 30 s). */
  let failedInARow = 0;
  /** The processes alive (cluster.workers may still list one that exited before its channel closed). */
  const live = new Set<Worker>();
  let stopping = false;
  let failed = false;
  /** True once a process has served: from then on a process that dies is replaced, even if its replacement fails to start. */
  let served = false;
  let lastRestart = 0;

  /** The processes whose series are in a sum: they said so once their app was built. */
  const offering = new WeakSet<Worker>();
  /** Series asked of the server processes, by round and process. */
  const parts = new Map<string, (values: unknown) => void>();
  let round = 0;
  const send = (worker: Worker, message: MetricsMessage): void => {
    // A closed channel (the process died or is stopping) is reported to the callback, not thrown, and without
    // one it would be an 'error' event that ends this process: it answers nothing, and the wait ends on its own.
    if (!worker.isConnected()) return;
    worker.send(message, undefined, () => undefined);
  };
  /** Every serving process's series, added up; undefined when none answered. */
  const collectMetrics = async (): Promise<string | undefined> => {
    const id = ++round;
    const answers = await Promise.all(
      [...live]
        .filter((worker) => offering.has(worker))
        .map(
          (worker) =>
            new Promise<unknown>((resolve) => {
              const key = `${id}:${worker.id}`;
              parts.set(key, resolve);
              setTimeout(() => {
                if (parts.delete(key)) resolve(undefined);
              }, METRICS_WAIT_MS).unref();
              send(worker, { type: COLLECT, id });
            }),
        ),
    );
    const values = answers.filter((answer): answer is Parameters<typeof aggregateMetrics>[0][number] => Array.isArray(answer));
    // A process left out would read as a counter reset (Prometheus's rate() jumps): no sum rather than a short one.
    if (values.length === 0 || values.length < answers.length) return undefined;
    return aggregateMetrics(values).catch(() => undefined);
  };

  const fork = (): void => {
    // The flag tells a server process that this supervisor answers its metrics requests (another cluster
    // manager, such as PM2's, would not).
    const worker = cluster.fork({ [CLUSTER_FLAG]: '1' });
    live.add(worker);
    // A message to a process that is going away fails as an 'error' event: the exit handler deals with it.
    worker.on('error', () => undefined);
    worker.on('message', (message: unknown) => {
      if (message === READY) {
        ready.add(worker);
        served = true;
        failedInARow = 0;
      } else if (isMetricsMessage(message, OFFER)) {
        offering.add(worker);
      } else if (isMetricsMessage(message, ASK)) {
        void collectMetrics().then((text) => send(worker, { type: RESULT, id: message.id, ...(text === undefined ? {} : { text }) }));
      } else if (isMetricsMessage(message, PART)) {
        const key = `${message.id}:${worker.id}`;
        parts.get(key)?.(message.values);
        parts.delete(key);
      }
    });
  };
  const stopAll = (signal: NodeJS.Signals): void => {
    for (const worker of live) worker.process.kill(signal);
    setTimeout(() => {
      log('error', `runnel: server processes still running ${options.deadlineMs} ms after ${signal}; exiting`);
      process.exit(1);
    }, options.deadlineMs + 1_000).unref();
  };

  cluster.on('exit', (worker, code, signal) => {
    live.delete(worker);
    const how = signal === null ? `exit code ${code}` : signal;
    if (!stopping && !served) {
      // None has served yet: a busy port, bad services. Another would fail the same way.
      log('error', `runnel: a server process failed to start (${how}); stopping`);
      stopping = true;
      failed = true;
      stopAll('SIGTERM');
    } else if (!stopping) {
      log('warn', `runnel: server process ${worker.process.pid} stopped (${how}); starting another`);
      if (!ready.has(worker)) failedInARow++;
      const delay = Math.min(30_000, restartDelayMs * 2 ** Math.min(failedInARow, 5));
      const wait = Math.max(0, lastRestart + delay - Date.now());
      lastRestart = Date.now() + wait;
      setTimeout(() => {
        if (!stopping) fork();
      }, wait);
      return;
    } else if (code !== 0 && signal !== 'SIGTERM' && signal !== 'SIGINT') {
      // A process stopped by the signal before it could handle it (still starting) stopped as asked.
      failed = true;
    }
    if (live.size === 0) process.exit(failed ? 1 : 0);
  });

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      log('info', `runnel: ${signal}: stopping ${live.size} server processes`);
      // None alive (one had died, its replacement not started yet): nothing to wait for.
      if (live.size === 0) process.exit(failed ? 1 : 0);
      stopAll(signal);
    });
  }
  log('info', `runnel: serving with ${options.count} processes`);
  for (let i = 0; i < options.count; i++) fork();
}
