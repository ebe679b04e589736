import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Document, globToRegExp, loadDirectory, loadFile, loadJsonLines, loadMarkdown, readTextFile, RecursiveCharacterTextSplitter } from '../../src/index.js';
import { withCharReads } from '../support/char-reads.js';

function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'runnel-docs-'));
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), content);
  }
  return dir;
}

describe('Document', () => {
  it('serializes as LangServe does', () => {
    expect(new Document({ id: 'd1', pageContent: 'abc', metadata: { a: 'b' } }).toJSON()).toEqual({ type: 'Document', id: 'd1', page_content: 'abc', metadata: { a: 'b' } });
  });
});

describe('loaders', () => {
  const dir = tree({
    'README.md': '# Runnel\n\nServes chains.',
    'docs/guide.md': '# Guide\n\nText.',
    'docs/notes.txt': 'plain notes',
    'docs/data.jsonl': '{"text": "first", "id": "r1", "lang": "en"}\n\n{"text": "second"}\n',
    'docs/skip.json': '{}',
    'node_modules/x/readme.md': '# no',
    '.hidden/secret.md': '# no',
  });

  it('loads a directory with a JSON Lines file of 150,000 records (each record once, no stack overflow)', async () => {
    const big = tree({ 'rows.jsonl': Array.from({ length: 150_000 }, (_, i) => `{"text": "row ${i}"}`).join('\n') });
    const docs = await loadDirectory(big, { glob: '**/*.jsonl' });
    expect(docs).toHaveLength(150_000);
    expect(docs.at(-1)?.pageContent).toBe('row 149999');
  });

  // A probe: a loader read any file whole, however large (a 3 GB log in a docs folder took the ingest's memory
  // with it), and a pipe or device named as a file was read for ever.
  it('refuses a file over maxBytes (64 MiB unless told), naming its size, and anything not a regular file', async () => {
    const big = tree({ 'big.md': `# Big\n\n${'word '.repeat(4_000)}`, 'small.txt': 'small' });
    await expect(loadFile(join(big, 'big.md'), { maxBytes: 10_000 })).rejects.toMatchObject({
      code: 'RUNNEL_ERR_INPUT_INVALID',
      message: expect.stringMatching(/big\.md is 0\.0 MiB, more than the 0\.0 MiB a file may be: split it, or raise the limit/),
    });
    await expect(loadDirectory(big, { maxBytes: 10_000 })).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
    expect(await loadDirectory(big, { maxBytes: 30_000 })).toHaveLength(2);
    await expect(readTextFile(join(big, 'small.txt'), { maxBytes: 0 })).rejects.toMatchObject({ code: 'RUNNEL_ERR_INVALID_ARGUMENT' });
    const fifo = join(big, 'pipe.txt');
    execFileSync('mkfifo', [fifo]);
    await expect(readTextFile(fifo)).rejects.toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID', message: expect.stringContaining('is not a regular file') });
  });

  it('loads Markdown with its title, and JSON Lines with metadata and ids', async () => {
    const [readme] = await loadMarkdown(join(dir, 'README.md'));
    expect(readme?.metadata).toEqual({ source: join(dir, 'README.md'), title: 'Runnel' });
    const rows = await loadJsonLines(join(dir, 'docs/data.jsonl'));
    expect(rows.map((d) => [d.id, d.pageContent, d.metadata.lang, d.metadata.line])).toEqual([
      ['r1', 'first', 'en', 1],
      [undefined, 'second', undefined, 3],
    ]);
  });

  // A probe: a file that was a link was skipped unsaid, and `npm run ingest --sync` removed its passages.
  // A review: a link leading out of the folder named (a secret beside a docs folder) would have been read too.
  it('loads a link to a file in the folder as that file; a link to a folder, out of it, or to nothing, is not followed', async () => {
    const linked = tree({ 'real/a.md': '# A\n\nText.', 'real/sub/b.md': '# B\n\nMore.', 'outside/secret.md': '# Secret' });
    symlinkSync(join(linked, 'real/sub/b.md'), join(linked, 'real/b-link.md'));
    symlinkSync(join(linked, 'outside/secret.md'), join(linked, 'real/secret.md'));
    symlinkSync(join(linked, 'outside'), join(linked, 'real/folder'));
    symlinkSync(join(linked, 'missing.md'), join(linked, 'real/dangling.md'));
    const docs = await loadDirectory(join(linked, 'real'));
    expect(docs.map((d) => [String(d.metadata.source).slice(linked.length + 1), d.pageContent])).toEqual([
      ['real/a.md', '# A\n\nText.'],
      ['real/b-link.md', '# B\n\nMore.'],
      ['real/sub/b.md', '# B\n\nMore.'],
    ]);
  });

  it('names the line of a bad JSON Lines record', async () => {
    const bad = tree({ 'bad.jsonl': '{"text": "ok"}\n{"nope": 1}\n' });
    await expect(loadJsonLines(join(bad, 'bad.jsonl'))).rejects.toThrow(/bad.jsonl:2/);
  });

  it('loads a directory by glob, skipping hidden folders and node_modules', async () => {
    const docs = await loadDirectory(dir, { glob: '**/*.{md,txt,jsonl}' });
    expect(docs.map((d) => String(d.metadata.source).slice(dir.length + 1))).toEqual([
      'README.md',
      'docs/data.jsonl',
      'docs/data.jsonl',
      'docs/guide.md',
      'docs/notes.txt',
    ]);
    expect(globToRegExp('docs/*.md').test('docs/a.md')).toBe(true);
    expect(globToRegExp('docs/*.md').test('docs/x/a.md')).toBe(false);
    expect(globToRegExp('**/*.md').test('a.md')).toBe(true);
  });
});

describe('RecursiveCharacterTextSplitter', () => {
  const text = ['# Title', '', 'First paragraph has some words in it.', '', 'Second paragraph, also words, more words here.', 'A line right after.'].join('\n');

  it('keeps every chunk within chunkSize, splitting at the coarsest separator first', () => {
    const splitter = new RecursiveCharacterTextSplitter({ chunkSize: 40, chunkOverlap: 10 });
    const chunks = splitter.splitText(text);
    expect(chunks.every((c) => c.length <= 40)).toBe(true);
    expect(chunks[0]).toBe('# Title');
    expect(chunks).toContain('First paragraph has some words in it.');
  });

  it('overlaps neighbouring chunks', () => {
    const words = Array.from({ length: 40 }, (_, i) => `w${i}`).join(' ');
    const chunks = new RecursiveCharacterTextSplitter({ chunkSize: 30, chunkOverlap: 10 }).splitText(words);
    for (let i = 1; i < chunks.length; i++) {
      const previousTail = (chunks[i - 1] as string).split(' ').at(-1) as string;
      expect(chunks[i]?.split(' ')).toContain(previousTail);
    }
    expect(chunks.join(' ')).toContain('w39');
  });

  it('copies metadata and records each chunk line range; uses the length function', async () => {
    const splitter = new RecursiveCharacterTextSplitter({ chunkSize: 40, chunkOverlap: 0 });
    const chunks = await splitter.splitDocuments([new Document({ pageContent: text, metadata: { source: 's.md' } })]);
    expect(chunks[0]?.metadata).toEqual({ source: 's.md', loc: { lines: { from: 1, to: 1 } } });
    expect(chunks.at(-1)?.metadata.loc).toEqual({ lines: { from: 6, to: 6 } });
    const [spanning] = await new RecursiveCharacterTextSplitter({ chunkSize: 60, chunkOverlap: 0 }).splitDocuments([new Document({ pageContent: text })]);
    expect(spanning?.pageContent).toBe('# Title\n\nFirst paragraph has some words in it.');
    expect(spanning?.metadata.loc).toEqual({ lines: { from: 1, to: 3 } });
    const byWords = new RecursiveCharacterTextSplitter({ chunkSize: 3, chunkOverlap: 0, lengthFunction: (t) => t.split(/\s+/).filter(Boolean).length });
    expect(byWords.splitText('a b c d e f g').every((c) => c.split(' ').length <= 3)).toBe(true);
    expect(() => new RecursiveCharacterTextSplitter({ chunkSize: 10, chunkOverlap: 10 })).toThrow(/chunkOverlap/);
  });

  // A probe: a file with lone CR line ends (old Mac) had every chunk at line 1.
  it('counts a lone \\r as a line end, as \\n and \\r\\n', async () => {
    // Words found once in the text, so a chunk's place in it is known.
    const lines = Array.from({ length: 40 }, (_, i) => Array.from({ length: 8 }, (_, j) => `w${i}x${j}`).join(' '));
    const lineOf = (text: string, offset: number): number => text.slice(0, offset).split(/\r\n?|\n/).length;
    for (const end of ['\n', '\r\n', '\r']) {
      const text = lines.join(end);
      const chunks = await new RecursiveCharacterTextSplitter({ chunkSize: 200, chunkOverlap: 0 }).splitDocuments([new Document({ pageContent: text })]);
      expect(chunks.length).toBeGreaterThan(5);
      for (const chunk of chunks) {
        const at = text.indexOf(chunk.pageContent);
        expect(at).toBeGreaterThanOrEqual(0);
        expect([end, chunk.metadata.loc]).toEqual([end, { lines: { from: lineOf(text, at), to: lineOf(text, at + chunk.pageContent.length - 1) } }]);
      }
    }
  });

  it('finds the line ranges of a large file in one pass over it, not one per chunk (a 4.7 MB text file took 86 s)', async () => {
    const lines = Array.from({ length: 4_000 }, (_, i) => (i % 2 === 1 ? '' : `paragraph ${i / 2} ${'words '.repeat(30)}`));
    const text = lines.join('\n');
    // 400 chunks of a 400 KB text: a scan from the start per chunk reads about 10^8 characters.
    const { result: chunks } = await withCharReads(4 * text.length, () =>
      new RecursiveCharacterTextSplitter({ chunkSize: 1000, chunkOverlap: 100 }).splitDocuments([new Document({ pageContent: text })]),
    );
    expect(chunks.length).toBeGreaterThanOrEqual(400);
    for (const chunk of chunks) {
      const { from, to } = (chunk.metadata.loc as { lines: { from: number; to: number } }).lines;
      const own = chunk.pageContent.split('\n');
      expect(lines[from - 1]).toContain(own[0]);
      expect(lines[to - 1]).toContain(own.at(-1));
    }
  });
});
