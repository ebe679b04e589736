import { describe, expect, it } from 'vitest';
import { Document, MarkdownTextSplitter, searchableText } from '../../src/index.js';
import { withCharReads } from '../support/char-reads.js';

const guide = [
  '---', 'title: front matter', '---', // 1-3
  '# Server', // 4
  '', 'The server serves chains.', // 5-6
  '', '## How it is served', // 7-8
  '', '### Factory', // 9-10
  '', '`buildApp(options)` makes an app.', // 11-12
  '', '<a id="body-limit"></a>', // 13-14
  '#### bodyLimit', // 15
  '', 'Requests larger than this are refused with 413.', // 16-17
  '', '## Empty section', // 18-19
  '', '## Limits', // 20-21
  '', '| limit | default |', '|---|---|', '| body | 1 MiB |', '| header | 16 KiB |', // 22-26
  '', '```sh', 'curl localhost:8000/healthz', '```', // 27-30
  '', 'Setext title', '============', // 31-33
  '', 'Under a setext heading.', // 34-35
].join('\n');

describe('MarkdownTextSplitter', () => {
  it('keeps each chunk inside its section, with its heading path and lines, and never a heading alone', () => {
    // 120 characters: `## How it is served` with its subsections (132) does not fit whole, so each goes on its own.
    const chunks = new MarkdownTextSplitter({ chunkSize: 120, chunkOverlap: 10 }).splitText(guide);
    expect(chunks.map(({ headings, from, to }) => ({ headings, from, to }))).toEqual([
      { headings: ['# Server'], from: 4, to: 6 },
      // `## How it is served` has no text of its own: it joins the text under its subsection.
      { headings: ['# Server', '## How it is served', '### Factory'], from: 8, to: 12 },
      // The anchor line is markup, not a passage.
      { headings: ['# Server', '## How it is served', '### Factory', '#### bodyLimit'], from: 15, to: 17 },
      // `## Empty section` has neither text nor subsections: it is nowhere.
      { headings: ['# Server', '## Limits'], from: 21, to: 30 },
      { headings: ['# Setext title'], from: 32, to: 35 },
    ]);
    expect(chunks[1]?.text).toBe('## How it is served\n\n### Factory\n\n`buildApp(options)` makes an app.');
    expect(chunks[3]?.text).toContain('| header | 16 KiB |\n\n```sh\ncurl localhost:8000/healthz\n```');
    expect(chunks.some((chunk) => /^(#+ .*\s*)+$/.test(chunk.text))).toBe(false);
    expect(chunks.flatMap((chunk) => chunk.text.split('\n')).some((line) => line.includes('front matter') || line.includes('<a id'))).toBe(false);
  });

  // A /rag probe: a setext heading over two lines was read as a paragraph, its underline as text.
  it('reads a setext heading of several lines as one heading, and `---` under a list as a rule', () => {
    const text = ['# Guide', '', 'An introduction long enough to be a chunk of its own, alone.', '', 'A title that goes', 'over two lines', '---', '', 'Under it.', '', '- one', '- two', '---', '', 'After the list.'].join('\n');
    const chunks = new MarkdownTextSplitter({ chunkSize: 100, chunkOverlap: 0 }).splitText(text);
    expect(chunks.map(({ headings, from, to }) => ({ headings, from, to }))).toEqual([
      { headings: ['# Guide'], from: 1, to: 3 },
      { headings: ['# Guide', '## A title that goes over two lines'], from: 5, to: 15 },
    ]);
    expect(chunks[1]?.text).toBe('A title that goes\nover two lines\n---\n\nUnder it.\n\n- one\n- two\n\n---\n\nAfter the list.');
    // A review: after a rule, or under a quote, `---` is a rule too, never a heading titled `--- …` or `> …`.
    for (const odd of [['---', 'A decorative intro line', '---'], ['> a quote', '> more', '---']]) {
      const split = new MarkdownTextSplitter({ chunkSize: 100, chunkOverlap: 0 }).splitText(['# Guide', '', ...odd, '', 'Text.'].join('\n'));
      expect(split.map((chunk) => chunk.headings)).toEqual([['# Guide']]);
    }
  });

  it('keeps a section that fits whole, its subsections included, in one chunk under its own path', () => {
    // 200 characters: `## How it is served` and everything under it (132) is one chunk; `# Server` as a whole (more) is not.
    const chunks = new MarkdownTextSplitter({ chunkSize: 200 }).splitText(guide);
    expect(chunks.map(({ headings, from, to }) => ({ headings, from, to }))).toEqual([
      { headings: ['# Server'], from: 4, to: 6 },
      // A heading over a single subsection names the chunk by that subsection's path.
      { headings: ['# Server', '## How it is served', '### Factory'], from: 8, to: 17 },
      { headings: ['# Server', '## Limits'], from: 21, to: 30 },
      { headings: ['# Setext title'], from: 32, to: 35 },
    ]);
    expect(chunks[1]?.text).toBe('## How it is served\n\n### Factory\n\n`buildApp(options)` makes an app.\n\n#### bodyLimit\n\nRequests larger than this are refused with 413.');
    // Over two subsections the chunk is named by their parent (and `# API`, with no text, by its one subsection).
    const api = ['# API', '', '## isLevelEnabled(level)', '', 'Whether a level writes.', '', '### level', '', 'A level name.', '', '### returns', '', 'A boolean.'].join('\n');
    expect(new MarkdownTextSplitter({ chunkSize: 200 }).splitText(api).map(({ headings, from, to }) => ({ headings, from, to }))).toEqual([
      { headings: ['# API', '## isLevelEnabled(level)'], from: 1, to: 13 },
    ]);
  });

  it('leaves an empty subsection out of a whole section, and splits a section of 150,000 blocks without overflowing the stack', () => {
    const withEmpty = ['# A', '', 'a', '', '## Empty', '', '## B', '', 'b'].join('\n');
    expect(new MarkdownTextSplitter({ chunkSize: 200 }).splitText(withEmpty)).toEqual([{ text: '# A\n\na\n\n## B\n\nb', from: 1, to: 9, headings: ['# A'] }]);
    // A heading with no text over one real subsection and an empty one is named by the real one.
    const named = ['# A', '', '## Empty', '', '## B', '', 'b'].join('\n');
    expect(new MarkdownTextSplitter({ chunkSize: 200 }).splitText(named).map((chunk) => chunk.headings)).toEqual([['# A', '## B']]);
    // One heading over 150,000 paragraphs, and over 150,000 small subsections: every block passed as an
    // argument (\`push(...blocks)\`) overflowed the stack.
    const paragraphs = ['# Big', ...Array.from({ length: 150_000 }, (_, i) => `p${i}`)].join('\n\n');
    const sections = ['# Big', ...Array.from({ length: 150_000 }, (_, i) => `## s${i}\n\nt${i}`)].join('\n\n');
    const big = new MarkdownTextSplitter().splitText(paragraphs);
    expect(big.map((chunk) => chunk.text).join('\n\n').split('\n\n').filter((line) => line.startsWith('p'))).toHaveLength(150_000);
    expect(new MarkdownTextSplitter().splitText(sections)).toHaveLength(150_000);
  });

  it('splits a long section between blocks into balanced chunks, a table under its header and code inside its fence', () => {
    const rows = Array.from({ length: 40 }, (_, i) => `| option${i} | value ${i} |`);
    const code = Array.from({ length: 40 }, (_, i) => `console.log(${i}); // line ${i}`);
    const paragraphs = Array.from({ length: 6 }, (_, i) => `Paragraph ${i} ${'says something useful. '.repeat(4)}`);
    const text = ['# Options', '', ...paragraphs.flatMap((p) => [p, '']), '| name | value |', '|---|---|', ...rows, '', '```js', ...code, '```'].join('\n');
    const chunks = new MarkdownTextSplitter({ chunkSize: 400 }).splitText(text);
    for (const chunk of chunks) {
      expect(chunk.text.length).toBeLessThanOrEqual(400);
      expect(chunk.headings).toEqual(['# Options']);
    }
    const tables = chunks.filter((chunk) => chunk.text.includes('| option'));
    expect(tables.length).toBeGreaterThan(1);
    for (const table of tables) expect(table.text).toMatch(/^\| name \| value \|\n\|---\|---\|\n/m);
    const codes = chunks.filter((chunk) => chunk.text.includes('console.log'));
    expect(codes.length).toBeGreaterThan(1);
    for (const part of codes) expect(part.text).toMatch(/```js\n[^`]+\n```$/);
    // Every table row and code line is in exactly one chunk.
    for (const line of [...rows, ...code]) expect(chunks.filter((chunk) => chunk.text.split('\n').includes(line))).toHaveLength(1);
    // The first part of each begins at its block's first line — the header, the opening fence, which its text
    // begins with (a probe: its range left them out) — and the code's last part ends at its closing fence.
    const lines = text.split('\n');
    expect((tables[0] as (typeof chunks)[number]).from).toBe(lines.indexOf('| name | value |') + 1);
    expect((codes[0] as (typeof chunks)[number]).from).toBe(lines.indexOf('```js') + 1);
    expect((codes.at(-1) as (typeof chunks)[number]).to).toBe(lines.length);
    // The paragraphs are packed evenly: no scrap of a chunk at the end of the prose.
    const prose = chunks.filter((chunk) => chunk.text.includes('Paragraph'));
    expect(Math.min(...prose.map((chunk) => chunk.text.length))).toBeGreaterThan(100);
  });

  it('reports line ranges that hold the chunk text, for a paragraph longer than a chunk too', () => {
    const long = Array.from({ length: 30 }, (_, i) => `Sentence number ${i} of a very long paragraph.`).join('\n');
    const text = `# Title\n\nIntro.\n\n## Long\n\n${long}\n\n## After\n\nDone.`;
    const lines = text.split('\n');
    const chunks = new MarkdownTextSplitter({ chunkSize: 300, chunkOverlap: 50 }).splitText(text);
    expect(chunks.length).toBeGreaterThan(4);
    for (const chunk of chunks) {
      const source = lines.slice(chunk.from - 1, chunk.to).join('\n');
      for (const line of chunk.text.split('\n').filter((l) => l.trim() !== '')) expect(source).toContain(line);
    }
  });

  it('finds the lines of a paragraph of thousands of lines in one pass over it (a 4.7 MB one took 28 s)', async () => {
    const long = Array.from({ length: 4_000 }, (_, i) => `Sentence number ${i} of a very long paragraph ${'with words '.repeat(8)}`).join('\n');
    const text = `# Title\n\n${long}`;
    const lines = text.split('\n');
    // About 450 chunks of a 500 KB paragraph: counting its lines from the start per chunk reads ~10^8 characters.
    const { result: chunks } = await withCharReads(4 * text.length, async () => new MarkdownTextSplitter({ chunkSize: 1000, chunkOverlap: 100 }).splitText(text));
    expect(chunks.length).toBeGreaterThan(400);
    for (const chunk of chunks) {
      const source = lines.slice(chunk.from - 1, chunk.to).join('\n');
      for (const line of chunk.text.split('\n')) expect(source).toContain(line);
    }
  });

  // A probe: a file whose lines end in a lone CR (classic Mac) was one line, with no headings.
  it('reads lines ending in CR, CRLF or LF alike', () => {
    for (const end of ['\n', '\r\n', '\r']) {
      const chunks = new MarkdownTextSplitter({ chunkSize: 60, chunkOverlap: 0 }).splitText(['# One', '', 'First line of text here.', '', '## Two', '', 'Second section text here.'].join(end));
      expect(chunks.map((chunk) => [chunk.headings, chunk.from, chunk.to]), JSON.stringify(end)).toEqual([
        [['# One'], 1, 3],
        [['# One', '## Two'], 5, 7],
      ]);
    }
  });

  it('adds headings and lines to each chunk document, and the heading path leads the searchable text', async () => {
    const [first] = await new MarkdownTextSplitter().splitDocuments([new Document({ pageContent: '# A\n\n## B\n\nText under B.', metadata: { source: 'a.md' } })]);
    expect(first?.metadata).toEqual({ source: 'a.md', headings: ['# A', '## B'], loc: { lines: { from: 1, to: 5 } } });
    expect(searchableText(first as Document)).toBe('# A › ## B\n\n# A\n\n## B\n\nText under B.');
    expect(searchableText(new Document({ pageContent: 'plain' }))).toBe('plain');
  });

  it('refuses sizes that cannot work', () => {
    expect(() => new MarkdownTextSplitter({ chunkSize: 10 })).toThrow(/chunkSize/);
    expect(() => new MarkdownTextSplitter({ chunkSize: 100, chunkOverlap: 100 })).toThrow(/chunkOverlap/);
  });

  it('reads hostile and odd Markdown right: a BOM, an unclosed fence, a leading rule, a heading closed by #, long lines of markup', () => {
    const splitter = new MarkdownTextSplitter({ chunkSize: 200 });
    expect(splitter.splitText('\uFEFF# Title\n\nText.').map((c) => c.headings)).toEqual([['# Title']]);
    // An unclosed fence runs to the end without its trailing blank lines; a part of it never gains a fence it did not have.
    const unclosed = splitter.splitText('# Code\n\n```python\nprint(1)\n\n');
    expect(unclosed).toEqual([{ text: '# Code\n\n```python\nprint(1)', from: 1, to: 4, headings: ['# Code'] }]);
    const long = splitter.splitText(['# Code', '', '```js', ...Array.from({ length: 30 }, (_, i) => `f(${i}); // ${'x'.repeat(20)}`), '```python'].join('\n'));
    expect(long.length).toBeGreaterThan(1);
    for (const part of long) {
      expect(part.text.startsWith('# Code\n\n```js\n') || part.text.startsWith('```js\n')).toBe(true);
      expect(part.text).not.toMatch(/\n```$/);
    }
    // A leading horizontal rule before prose is not front matter: the prose stays.
    expect(splitter.splitText('---\n\nIntro text.\n\n---\n# T\n\nBody.').map((c) => c.text)).toEqual(['---\n\nIntro text.\n\n---', '# T\n\nBody.']);
    expect(splitter.splitText('# Title ##\n\nText.')[0]?.headings).toEqual(['# Title']);
    expect(splitter.splitText('# C# tips\n\nText.')[0]?.headings).toEqual(['# C# tips']);
    // Lines built to make a backtracking regex take years are read in linear time.
    const start = performance.now();
    splitter.splitText(`${'<!---->'.repeat(5000)}x\n\n# a${' '.repeat(100_000)}#x\n\n#${'#'.repeat(100_000)}x`);
    expect(performance.now() - start).toBeLessThan(5_000);
  });
});
