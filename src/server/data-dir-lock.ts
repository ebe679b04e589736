/**
 * One process at a time in a data directory. PGlite is a single-process
 * database: a second process that opens the same files sees none of the
 * first one's writes, and its own are lost when the first writes again. So
 * whoever opens the embedded database first takes `runnel.lock` in the data
 * directory (created exclusively, holding its pid and what it is); a lock
 * whose process is gone is stale and taken over. Everyone else is told who
 * holds it and what to do.
 */
import { accessSync, constants, mkdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { RunnelError } from '../core/index.js';

/** What a lock file records about its holder. */
interface Holder {
  pid: number;
  /** What the holder is: `server`, `ingest`, ... */
  role: string;
}

/** The lock on one data directory; `release()` gives it back (also done at process exit). */
export interface DataDirLock {
  readonly path: string;
  release(): void;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readHolder(path: string): Holder | undefined {
  try {
    const parsed = JSON.parse(readFileSync(path, 'utf8')) as Partial<Holder>;
    return typeof parsed.pid === 'number' && Number.isInteger(parsed.pid) && parsed.pid > 0 ? { pid: parsed.pid, role: String(parsed.role ?? 'unknown') } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Takes the lock on `dir` for this process, or throws
 * `RUNNEL_ERR_DATABASE_UNAVAILABLE` naming the process that holds it.
 *
 * @example
 * const lock = lockDataDir('./.runnel', 'server');
 * // ... open PGlite ...
 * lock.release();
 */
export function lockDataDir(dir: string, role: string): DataDirLock {
  const path = join(dir, 'runnel.lock');
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      writeFileSync(path, JSON.stringify({ pid: process.pid, role }), { flag: 'wx' });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = readHolder(path);
      if (holder !== undefined && holder.pid !== process.pid && alive(holder.pid)) {
        throw new RunnelError(
          'RUNNEL_ERR_DATABASE_UNAVAILABLE',
          `The embedded database in ${dir} is open in another process (pid ${holder.pid}, ${holder.role}); PGlite serves one process at a time. ` +
            (holder.role === 'server'
              ? 'Stop the server and run this again; or give this process a directory of its own (RUNNEL_DATA_DIR), or set DATABASE_URL to a Postgres that both can share.'
              : 'Wait for it to finish, or set DATABASE_URL to a Postgres that both can share.'),
        );
      }
      // Stale (its process is gone) or unreadable: take it over.
      try {
        unlinkSync(path);
      } catch {
        // Someone else removed it first; try again.
      }
      continue;
    }
    const onExit = (): void => release();
    let held = true;
    const release = (): void => {
      if (!held) return;
      held = false;
      process.off('exit', onExit);
      if (readHolder(path)?.pid === process.pid) {
        try {
          unlinkSync(path);
        } catch {
          // Already gone.
        }
      }
    };
    process.on('exit', onExit);
    return { path, release };
  }
  throw new RunnelError('RUNNEL_ERR_DATABASE_UNAVAILABLE', `Could not take the lock ${path}`);
}

/**
 * Makes `dir` and the folders above it that are missing, one at a time. Node's `mkdirSync(dir, {recursive:
 * true})` loops for ever where mkdir answers ENOENT under a folder that exists (under `/proc`: a
 * `RUNNEL_DATA_DIR=/proc/...` start hung, never listening); this one throws that ENOENT.
 *
 * @example
 * makeDirectory('./.runnel');
 */
export function makeDirectory(dir: string): void {
  const path = resolve(dir);
  if (statSync(path, { throwIfNoEntry: false })?.isDirectory() === true) return;
  const parent = dirname(path);
  if (parent !== path) makeDirectory(parent);
  try {
    mkdirSync(path);
  } catch (error) {
    // Made meanwhile by someone else, as a folder: as good as made here.
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || statSync(path, { throwIfNoEntry: false })?.isDirectory() !== true) throw error;
  }
}

/**
 * Why `dir` cannot hold the embedded database, or undefined when it can: it is made if missing and must be a
 * directory this process may write in. A start checks it (a file, or a volume the process may not write to,
 * started a server whose every /rag answered 500 for good, its docs seed retried for ever).
 *
 * @example
 * const problem = dataDirProblem(config.dataDir);
 */
export function dataDirProblem(dir: string): string | undefined {
  try {
    makeDirectory(dir);
    accessSync(dir, constants.W_OK | constants.X_OK);
    return undefined;
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    const why =
      code === 'EEXIST' || code === 'ENOTDIR'
        ? 'it, or a folder above it, is a file'
        : code === 'EACCES' || code === 'EPERM' || code === 'EROFS'
          ? 'this process may not write there'
          : code === 'ENOENT'
            ? 'no folder can be made there'
            : message;
    return `RUNNEL_DATA_DIR ${JSON.stringify(dir)} cannot hold the embedded database (${code ?? 'error'}: ${why}): name a directory this process may write in, or set DATABASE_URL`;
  }
}
