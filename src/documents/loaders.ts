/**
 * Document loaders: a text file, a Markdown file, a JSON Lines file, or a
 * directory of them matched by a glob. Each document records its `source`.
 */
import { readdir, readFile, realpath, stat } from 'node:fs/promises';
import { extname, join, relative, sep } from 'node:path';
import { RunnelError } from '../core/index.js';
import { Document } from './document.js';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The largest file a loader reads unless told otherwise: 64 MiB of text is
 * some 50,000 passages. A file is read whole into memory, and its passages
 * with it; a larger one is more often a log or a dump than documents.
 */
export const MAX_FILE_BYTES = 64 * 1024 * 1024;

/** Options of the loaders. */
export interface LoadOptions {
  /** The largest file read, in bytes (default {@link MAX_FILE_BYTES}); a larger one is refused, naming its size. */
  maxBytes?: number;
}

const mebibytes = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

function tooLarge(path: string, size: number, maxBytes: number): RunnelError {
  return new RunnelError('RUNNEL_ERR_INPUT_INVALID', `${path} is ${mebibytes(size)}, more than the ${mebibytes(maxBytes)} a file may be: split it, or raise the limit (maxBytes; npm run ingest --max-file-mb)`);
}

/**
 * A file's text. A file that is not UTF-8 text — a PDF, an image, a
 * Latin-1 export — is refused with its reason instead of being indexed as
 * replacement characters (or failing the database's write of a NUL), and so
 * are one larger than `maxBytes` and anything not a regular file (a device
 * or a pipe never ends).
 */
export async function readTextFile(path: string, options: LoadOptions = {}): Promise<string> {
  const maxBytes = options.maxBytes ?? MAX_FILE_BYTES;
  if (!(Number.isSafeInteger(maxBytes) && maxBytes > 0)) throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `maxBytes must be a whole number of bytes above 0, got ${String(maxBytes)}`);
  const info = await stat(path);
  if (!info.isFile()) throw new RunnelError('RUNNEL_ERR_INPUT_INVALID', `${path} is not a regular file (a device, a pipe or a socket): name a file`);
  if (info.size > maxBytes) throw tooLarge(path, info.size, maxBytes);
  const bytes = await readFile(path);
  // It may have grown since.
  if (bytes.length > maxBytes) throw tooLarge(path, bytes.length, maxBytes);
  if (bytes.includes(0)) throw new RunnelError('RUNNEL_ERR_INPUT_INVALID', `${path} is not a text file (it holds NUL bytes, as PDFs and images do): convert it to text or Markdown first`);
  try {
    return utf8.decode(bytes);
  } catch (error) {
    throw new RunnelError('RUNNEL_ERR_INPUT_INVALID', `${path} is not UTF-8 text: convert it first (e.g. iconv -f latin1 -t utf-8)`, { cause: error });
  }
}

/** Loads a UTF-8 text file as one document. */
export async function loadText(path: string, metadata: Record<string, unknown> = {}, options: LoadOptions = {}): Promise<Document[]> {
  const text = await readTextFile(path, options);
  return [new Document({ pageContent: text, metadata: { source: path, ...metadata } })];
}

/** Loads a Markdown file as one document, with its first heading as `title`. */
export async function loadMarkdown(path: string, metadata: Record<string, unknown> = {}, options: LoadOptions = {}): Promise<Document[]> {
  const text = await readTextFile(path, options);
  const title = /^#\s+(.+)$/m.exec(text)?.[1]?.trim();
  return [new Document({ pageContent: text, metadata: { source: path, ...(title === undefined ? {} : { title }), ...metadata } })];
}

/**
 * Loads a JSON Lines file: one document per line, its text from
 * `contentKey` (default `text`), the line's other keys as metadata (its own
 * `source` and `line` as `record_source` and `record_line`: `source` and
 * `line` are the file's). A bad line is an error naming the line.
 */
export async function loadJsonLines(path: string, options: LoadOptions & { contentKey?: string } = {}): Promise<Document[]> {
  const contentKey = options.contentKey ?? 'text';
  const lines = (await readTextFile(path, options)).split(/\r?\n/);
  const docs: Document[] = [];
  lines.forEach((line, index) => {
    if (line.trim() === '') return;
    let record: unknown;
    try {
      record = JSON.parse(line);
    } catch (error) {
      throw new RunnelError('RUNNEL_ERR_INPUT_INVALID', `${path}:${index + 1} is not JSON`, { cause: error });
    }
    if (record === null || typeof record !== 'object' || Array.isArray(record) || typeof (record as Record<string, unknown>)[contentKey] !== 'string') {
      throw new RunnelError('RUNNEL_ERR_INPUT_INVALID', `${path}:${index + 1} has no string field '${contentKey}'`);
    }
    const { [contentKey]: content, id, source: ownSource, line: ownLine, ...rest } = record as Record<string, unknown>;
    // The file and line name the passage (a sync finds it by its file); a record's own `source` or `line` (a
    // URL, say) is kept beside them as `record_source` / `record_line`, not in their place.
    const own = { ...(ownSource === undefined ? {} : { record_source: ownSource }), ...(ownLine === undefined ? {} : { record_line: ownLine }) };
    docs.push(new Document({ pageContent: content as string, id: typeof id === 'string' ? id : undefined, metadata: { ...rest, ...own, source: path, line: index + 1 } }));
  });
  return docs;
}

/** A glob (`**` any folders, `*` any name part, `?` one character, `{a,b}` either) as a regular expression over `/`-separated paths. */
export function globToRegExp(glob: string): RegExp {
  let out = '';
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i] as string;
    if (ch === '*' && glob[i + 1] === '*') {
      out += glob[i + 2] === '/' ? '(?:.*/)?' : '.*';
      i += glob[i + 2] === '/' ? 2 : 1;
    } else if (ch === '*') out += '[^/]*';
    else if (ch === '?') out += '[^/]';
    else if (ch === '{') {
      const end = glob.indexOf('}', i);
      if (end === -1) out += '\\{';
      else {
        out += `(?:${glob.slice(i + 1, end).split(',').map((part) => part.replace(/[.+^$()|[\]\\]/g, '\\$&')).join('|')})`;
        i = end;
      }
    } else out += ch.replace(/[.+^$()|[\]\\{}]/g, '\\$&');
  }
  return new RegExp(`^${out}$`);
}

async function walk(dir: string, root: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const files: string[] = [];
  for (const entry of entries) {
    if (entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) for (const file of await walk(path, root)) files.push(file);
    else if (entry.isFile()) files.push(path);
    else if (entry.isSymbolicLink() && (await linkedFileInside(path, root))) files.push(path);
  }
  return files;
}

/**
 * Whether the link at `path` leads to a file inside `root` (a real path): read as that file, as when it is
 * named itself (a probe: skipped unsaid, its passages then removed by --sync). A link to a folder is not
 * followed (it may loop), nor one that leads out of the folder named (a review: a docs folder's link to a
 * secret would have been served by /rag).
 */
async function linkedFileInside(path: string, root: string): Promise<boolean> {
  const target = await realpath(path).catch(() => undefined);
  if (target === undefined || !(target === root || target.startsWith(root.endsWith(sep) ? root : root + sep))) return false;
  return (await stat(target).catch(() => undefined))?.isFile() === true;
}

/**
 * Loads every file under `dir` matching `glob` (default `**\/*.{md,txt}`):
 * Markdown with `loadMarkdown`, `.jsonl` with `loadJsonLines`, others as text.
 * Hidden files and `node_modules` are skipped; files come in path order.
 *
 * @example
 * await loadDirectory('docs', { glob: '**\/*.md' });
 */
export async function loadDirectory(dir: string, options: LoadOptions & { glob?: string } = {}): Promise<Document[]> {
  const docs: Document[] = [];
  for (const file of await listFiles(dir, options)) {
    // One at a time, not push(...): a JSON Lines file of 100,000 records would overflow the stack as arguments.
    for (const doc of await loadFile(file, options)) docs.push(doc);
  }
  return docs;
}

/** The files under `dir` that `loadDirectory` loads (default glob `**\/*.{md,txt}`), in path order. */
export async function listFiles(dir: string, options: { glob?: string } = {}): Promise<string[]> {
  return (await partitionFiles(dir, options.glob ?? '**/*.{md,txt}')).matched;
}

/** The files under `dir` in path order, parted by `glob`: those it matches, and the others (what an ingest reports it left). */
export async function partitionFiles(dir: string, glob: string): Promise<{ matched: string[]; others: string[] }> {
  const pattern = globToRegExp(glob);
  const matched: string[] = [];
  const others: string[] = [];
  for (const file of (await walk(dir, await realpath(dir))).sort()) (pattern.test(relative(dir, file).split(sep).join('/')) ? matched : others).push(file);
  return { matched, others };
}

/** Loads one file by its extension: Markdown with `loadMarkdown`, `.jsonl` with `loadJsonLines`, others as text. */
export function loadFile(file: string, options: LoadOptions = {}): Promise<Document[]> {
  const ext = extname(file).toLowerCase();
  const { maxBytes } = options;
  return ext === '.md' || ext === '.markdown' ? loadMarkdown(file, {}, { maxBytes }) : ext === '.jsonl' ? loadJsonLines(file, { maxBytes }) : loadText(file, {}, { maxBytes });
}
