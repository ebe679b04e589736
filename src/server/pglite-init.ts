/**
 * A new embedded database's files, made off the main thread. Creating a
 * PGlite database runs `initdb` inside its WebAssembly, synchronously: 7 to
 * 15 s on this machine, during which a server that did it on its own thread
 * answered nothing — not even `/healthz` (a trial: a fresh data directory's
 * first start). A worker thread makes the files in a directory of its own,
 * which is renamed into place once whole, so a process stopped midway leaves
 * no half-made database; opening the made one on the main thread takes
 * about a second. The caller holds the data directory's lock (one process
 * makes at a time).
 */
import { readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { inspect } from 'node:util';
import { Worker } from 'node:worker_threads';

/** The worker: imports PGlite from the URLs it is given (an eval'd worker resolves no package names), makes the files, closes. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { inspect } = require('node:util');
(async () => {
  const [{ PGlite }, { vector }] = await Promise.all([import(workerData.pglite), import(workerData.pgvector)]);
  const db = await PGlite.create(workerData.dir, { extensions: { vector }, postgresqlconf: workerData.conf });
  await db.exec('CREATE EXTENSION IF NOT EXISTS vector');
  await db.close();
})().then(() => parentPort.postMessage('made'), (error) => parentPort.postMessage({ failed: error instanceof Error ? String(error.stack) : inspect(error) }));
`;

/** Whether `path` exists; only its absence is no (a failed look — permissions, I/O — throws). */
const exists = (path: string): boolean => statSync(path, { throwIfNoEntry: false }) !== undefined;

/** Whether `dir` holds a database already (Postgres writes PG_VERSION into every data directory it makes). */
export const madeAlready = (dir: string): boolean => exists(join(dir, 'PG_VERSION'));

let makings = 0;

/**
 * Makes the database of `dir` in a worker thread when it has none, and resolves once it is in place; `stop()`
 * ends a making under way (its directory is removed). Throws what the worker failed with. A `dir` there
 * without a database (a making of an earlier version, stopped midway) is moved aside, never deleted.
 */
export function makeDatabase(dir: string, conf: string[]): { made: Promise<void>; stop(): void } {
  if (madeAlready(dir)) return { made: Promise.resolve(), stop: () => undefined };
  // Another process's making stopped midway (killed): the lock is this process's now, so none is under way.
  const prefix = `${basename(dir)}.making-`;
  for (const name of readdirSync(dirname(dir))) if (name.startsWith(prefix)) rmSync(join(dirname(dir), name), { recursive: true, force: true });
  const making = `${dir}.making-${process.pid}-${++makings}`;
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { dir: making, conf, pglite: import.meta.resolve('@electric-sql/pglite'), pgvector: import.meta.resolve('@electric-sql/pglite-pgvector') },
  });
  let settled = false;
  const made = new Promise<void>((resolve, reject) => {
    const fail = (error: Error): void => {
      if (settled) return;
      settled = true;
      rmSync(making, { recursive: true, force: true });
      reject(error);
    };
    worker.once('message', (message: unknown) => {
      void worker.terminate();
      if (message !== 'made') {
        fail(new Error(`the embedded database could not be made: ${(message as { failed?: string }).failed ?? inspect(message)}`));
        return;
      }
      try {
        if (exists(dir)) renameSync(dir, `${dir}.incomplete-${Date.now()}`);
        renameSync(making, dir);
        settled = true;
        resolve();
      } catch (error) {
        fail(error as Error);
      }
    });
    worker.once('error', fail);
    worker.once('exit', (code) => fail(new Error(`the embedded database's making stopped (exit ${code})`)));
  });
  return {
    made,
    stop: () => {
      void worker.terminate();
    },
  };
}
