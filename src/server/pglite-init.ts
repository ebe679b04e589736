/**
 * A new embedded database's files, made off the main thread. Creating a
 * PGlite database runs `initdb` inside its WebAssembly, synchronously: 7 to
 * 15 s on this machine, during which a server that did it on its own thread
 * answered nothing — not even `/healthz` (a trial: a fresh data directory's
 * first start). A worker thread makes the files in a directory of its own,
 * which is renamed into place once whole, so a process stopped midway leaves
 * no half-made database; opening the made one on the main thread takes
 * about a second.
 */
import { existsSync, renameSync, rmSync } from 'node:fs';
import { Worker } from 'node:worker_threads';

/** The worker: imports PGlite from the URLs it is given (an eval'd worker resolves no package names), makes the files, closes. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
(async () => {
  const [{ PGlite }, { vector }] = await Promise.all([import(workerData.pglite), import(workerData.pgvector)]);
  const db = await PGlite.create(workerData.dir, { extensions: { vector }, postgresqlconf: workerData.conf });
  await db.exec('CREATE EXTENSION IF NOT EXISTS vector');
  await db.close();
})().then(() => parentPort.postMessage('made'), (error) => parentPort.postMessage({ failed: String(error && error.stack || error) }));
`;

/** Whether `dir` holds a database already (Postgres writes PG_VERSION into every data directory it makes). */
export const madeAlready = (dir: string): boolean => existsSync(`${dir}/PG_VERSION`);

/**
 * Makes the database of `dir` in a worker thread when it has none, and resolves once it is in place; `stop()`
 * ends a making under way (its directory is removed). Throws what the worker failed with.
 */
export function makeDatabase(dir: string, conf: string[]): { made: Promise<void>; stop(): void } {
  if (madeAlready(dir)) return { made: Promise.resolve(), stop: () => undefined };
  const making = `${dir}.making-${process.pid}`;
  rmSync(making, { recursive: true, force: true });
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { dir: making, conf, pglite: import.meta.resolve('@electric-sql/pglite'), pgvector: import.meta.resolve('@electric-sql/pglite-pgvector') },
  });
  const made = new Promise<void>((resolve, reject) => {
    worker.once('message', (message: unknown) => {
      void worker.terminate();
      if (message !== 'made') {
        rmSync(making, { recursive: true, force: true });
        reject(new Error(`the embedded database could not be made: ${(message as { failed?: string }).failed ?? String(message)}`));
        return;
      }
      try {
        // Another process's making that finished first wins; this one's is dropped.
        if (madeAlready(dir)) rmSync(making, { recursive: true, force: true });
        else {
          rmSync(dir, { recursive: true, force: true });
          renameSync(making, dir);
        }
        resolve();
      } catch (error) {
        reject(error as Error);
      }
    });
    worker.once('error', (error) => {
      rmSync(making, { recursive: true, force: true });
      reject(error);
    });
    worker.once('exit', (code) => {
      if (code !== 0) {
        rmSync(making, { recursive: true, force: true });
        reject(new Error(`the embedded database's making stopped (exit ${code})`));
      }
    });
  });
  return {
    made,
    stop: () => {
      void worker.terminate();
    },
  };
}
