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

/** What a server process sends the first process once it listens. */
const READY = 'runnel:ready';

/** Options of {@link serveOnProcesses}. */
export interface ProcessesOptions {
  /** How many server processes (1: this process serves, no cluster). */
  count: number;
  /** After a signal, when the first process gives up waiting and exits 1 (each process has its own deadline too). */
  deadlineMs: number;
  /** Where the first process says what it does. */
  log?: (line: string) => void;
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
  const log = options.log ?? ((line: string) => console.error(line));
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

  const fork = (): void => {
    const worker = cluster.fork();
    live.add(worker);
    worker.on('message', (message: unknown) => {
      if (message === READY) {
        ready.add(worker);
        served = true;
        failedInARow = 0;
      }
    });
  };
  const stopAll = (signal: NodeJS.Signals): void => {
    for (const worker of live) worker.process.kill(signal);
    setTimeout(() => {
      log(`runnel: server processes still running ${options.deadlineMs} ms after ${signal}; exiting`);
      process.exit(1);
    }, options.deadlineMs + 1_000).unref();
  };

  cluster.on('exit', (worker, code, signal) => {
    live.delete(worker);
    const how = signal === null ? `exit code ${code}` : signal;
    if (!stopping && !served) {
      // None has served yet: a busy port, bad services. Another would fail the same way.
      log(`runnel: a server process failed to start (${how}); stopping`);
      stopping = true;
      failed = true;
      stopAll('SIGTERM');
    } else if (!stopping) {
      log(`runnel: server process ${worker.process.pid} stopped (${how}); starting another`);
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
      log(`runnel: ${signal}: stopping ${live.size} server processes`);
      // None alive (one had died, its replacement not started yet): nothing to wait for.
      if (live.size === 0) process.exit(failed ? 1 : 0);
      stopAll(signal);
    });
  }
  log(`runnel: serving with ${options.count} processes`);
  for (let i = 0; i < options.count; i++) fork();
}
