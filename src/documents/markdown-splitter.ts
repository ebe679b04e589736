/**
 * `MarkdownTextSplitter`: splits Markdown along its structure. A section
 * that fits is one chunk with its subsections; a larger one gives its own
 * text and then each subsection, so a chunk never crosses the boundary of a
 * section it does not hold whole. A heading joins the text under it (a chunk
 * of only a heading never exists); tables and fenced code stay whole when they
 * fit, and when they do not, each part keeps the table's header or the
 * code's fence. Every chunk records its heading path (`metadata.headings`,
 * e.g. `['# Server', '## Factory', '### bodyLimit']`) and its line range,
 * and `searchableText` puts that path in the text stores embed and index.
 */
import { RunnelError } from '../core/index.js';
import { Document } from './document.js';
import { lineLocator, RecursiveCharacterTextSplitter } from './splitter.js';

/** Options of {@link MarkdownTextSplitter}. */
export interface MarkdownSplitterOptions {
  /** The longest chunk in characters (default 1500); a section longer than this is split between blocks. */
  chunkSize?: number;
  /** Overlap between the parts of a paragraph longer than `chunkSize` (default 100). */
  chunkOverlap?: number;
}

type BlockKind = 'heading' | 'code' | 'table' | 'text' | 'markup';

interface Block {
  kind: BlockKind;
  /** For code: whether its closing fence is there. */
  closed?: boolean;
  lines: string[];
  /** 1-based line numbers, inclusive. */
  from: number;
  to: number;
  level?: number;
  title?: string;
}

/** A chunk of Markdown, before it becomes a document. */
export interface MarkdownChunk {
  text: string;
  from: number;
  to: number;
  headings: string[];
}

const FENCE = /^ {0,3}(`{3,}|~{3,})/;
const ATX = /^ {0,3}(#{1,6})(?:[ \t]+(.*))?$/;
const TABLE_ROW = /^\s*\|/;
const SETEXT = /^ {0,3}(=+|-+)[ \t]*$/;
const LIST_ITEM = /^\s*([-*+]|\d+[.)])\s/;
const QUOTE_LINE = /^ {0,3}>/;
// A line that is only tags or a comment (`<a id="opt-level"></a>`): an anchor for links, no words to find.
// Each alternative consumes its own characters only, so a line of many comments cannot backtrack exponentially.
const MARKUP_ONLY = /^\s*(?:<\/?[A-Za-z][^>]*>\s*|<!--(?:(?!-->)[^])*-->\s*)+$/;
// Front matter holds `key: value` lines (and their nested or list lines): a leading `---` rule before prose is not it.
const FRONT_MATTER_LINE = /^(?:[\w-]+\s*:|\s|-\s|#|$)/;

/** An ATX heading's title: the text without its closing run of `#` (scanned, not matched: no regex backtracks on a long line). */
function atxTitle(text: string | undefined): string {
  const title = (text ?? '').trim();
  let end = title.length;
  while (end > 0 && title[end - 1] === '#') end--;
  if (end === title.length || (end > 0 && title[end - 1] !== ' ' && title[end - 1] !== '\t')) return title;
  return title.slice(0, end).trim();
}

const isBlank = (line: string): boolean => line.trim() === '';

/** Reads Markdown into blocks: headings, fenced code, tables, paragraphs (lists included). */
function parseBlocks(text: string): Block[] {
  // Lines end in LF, CRLF or a lone CR (classic Mac files): each is a line, as editors count them.
  const lines = text.replace(/^\uFEFF/, '').split(/\r\n|\r|\n/);
  const blocks: Block[] = [];
  let i = 0;
  // Front matter is metadata, not prose.
  if (lines[0] === '---') {
    const end = lines.indexOf('---', 1);
    if (end > 0 && lines.slice(1, end).every((line) => FRONT_MATTER_LINE.test(line))) {
      blocks.push({ kind: 'markup', lines: lines.slice(0, end + 1), from: 1, to: end + 1 });
      i = end + 1;
    }
  }
  while (i < lines.length) {
    const line = lines[i] as string;
    if (isBlank(line)) {
      i++;
      continue;
    }
    const start = i;
    const fence = FENCE.exec(line);
    if (fence !== null) {
      const marker = fence[1] as string;
      const closing = new RegExp(`^ {0,3}${marker[0] === '`' ? '`' : '~'}{${marker.length},}\\s*$`);
      i++;
      while (i < lines.length && !closing.test(lines[i] as string)) i++;
      const closed = i < lines.length;
      let end = closed ? i + 1 : lines.length;
      // An unclosed fence runs to the end of the file; its trailing blank lines are not code.
      while (!closed && end > start + 1 && isBlank(lines[end - 1] as string)) end--;
      blocks.push({ kind: 'code', closed, lines: lines.slice(start, end), from: start + 1, to: end });
      i = closed ? i + 1 : lines.length;
      continue;
    }
    const atx = ATX.exec(line);
    if (atx !== null) {
      blocks.push({ kind: 'heading', lines: [line], from: start + 1, to: start + 1, level: (atx[1] as string).length, title: atxTitle(atx[2]) });
      i++;
      continue;
    }
    if (TABLE_ROW.test(line)) {
      while (i < lines.length && TABLE_ROW.test(lines[i] as string)) i++;
      blocks.push({ kind: 'table', lines: lines.slice(start, i), from: start + 1, to: i });
      continue;
    }
    i++;
    while (i < lines.length && !isBlank(lines[i] as string) && !FENCE.test(lines[i] as string) && !ATX.test(lines[i] as string) && !TABLE_ROW.test(lines[i] as string) && !SETEXT.test(lines[i] as string)) i++;
    const body = lines.slice(start, i);
    // A paragraph of one line or more over `===` or `---` is a heading, its lines one title; under a list or a
    // quote, or after a rule (a paragraph's first line that is itself `---`), `---` is a rule.
    const setext = i < lines.length ? SETEXT.exec(lines[i] as string) : null;
    if (setext !== null && !SETEXT.test(body[0] as string) && !body.some((l) => LIST_ITEM.test(l) || QUOTE_LINE.test(l))) {
      blocks.push({ kind: 'heading', lines: [...body, lines[i] as string], from: start + 1, to: i + 1, level: (setext[1] as string)[0] === '=' ? 1 : 2, title: body.map((l) => l.trim()).join(' ') });
      i++;
      continue;
    }
    blocks.push({ kind: body.every((l) => MARKUP_ONLY.test(l)) ? 'markup' : 'text', lines: body, from: start + 1, to: i });
  }
  return blocks;
}

const blockText = (block: Block): string => block.lines.join('\n');

/** A heading and what is under it: its own blocks, then its subsections. */
interface Section {
  heading: Block | undefined;
  level: number;
  label: string;
  body: Block[];
  children: Section[];
}

/** True when a section or one of its subsections has text (not only headings). */
function holdsText(section: Section): boolean {
  return section.body.some((block) => block.kind !== 'heading') || section.children.some(holdsText);
}

/**
 * A section's blocks in document order — its heading, its text, its subsections' — into `out`; subsections
 * with no text are left out, as the splitter drops an empty section. A loop, not `push(...)`: a section of
 * 100,000 blocks would pass as many arguments and overflow the stack.
 */
function flatten(section: Section, out: Block[] = []): Block[] {
  if (section.heading !== undefined) out.push(section.heading);
  for (const block of section.body) out.push(block);
  for (const child of section.children) if (holdsText(child)) flatten(child, out);
  return out;
}

/**
 * Splits Markdown documents by section.
 *
 * @example
 * const chunks = await new MarkdownTextSplitter({ chunkSize: 1500 }).splitDocuments(await loadMarkdown('docs/server.md'));
 * chunks[3].metadata.headings; // ['# Server', '## Factory', '### bodyLimit']
 */
export class MarkdownTextSplitter {
  readonly chunkSize: number;
  readonly chunkOverlap: number;

  constructor(options: MarkdownSplitterOptions = {}) {
    this.chunkSize = options.chunkSize ?? 1500;
    this.chunkOverlap = options.chunkOverlap ?? 100;
    if (!Number.isInteger(this.chunkSize) || this.chunkSize < 50) throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'chunkSize must be a whole number of at least 50');
    if (!Number.isInteger(this.chunkOverlap) || this.chunkOverlap < 0 || this.chunkOverlap >= this.chunkSize) {
      throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `chunkOverlap (${this.chunkOverlap}) must be at least 0 and smaller than chunkSize (${this.chunkSize})`);
    }
  }

  /**
   * Splits Markdown text into chunks with their line ranges and heading paths. A section whose whole text —
   * its subsections included — fits in `chunkSize` is one chunk under its own heading path, so a short
   * section and the parameters listed under it stay together; a larger one gives its own text, packed, and
   * then each subsection by the same rule.
   */
  splitText(text: string): MarkdownChunk[] {
    const root: Section = { heading: undefined, level: 0, label: '', body: [], children: [] };
    const open: Section[] = [root];
    for (const block of parseBlocks(text)) {
      if (block.kind === 'markup') continue;
      if (block.kind !== 'heading') {
        (open[open.length - 1] as Section).body.push(block);
        continue;
      }
      const level = block.level as number;
      while ((open[open.length - 1] as Section).level >= level) open.pop();
      const section: Section = { heading: block, level, label: `${'#'.repeat(level)} ${block.title as string}`.trimEnd(), body: [], children: [] };
      (open[open.length - 1] as Section).children.push(section);
      open.push(section);
    }
    const chunks: MarkdownChunk[] = [];
    this.emitSection(root, [], [], chunks);
    return chunks;
  }

  /**
   * Emits `section` (under `path`, after `lead`: headings of enclosing sections that had no text of their own)
   * whole when it fits, else its own text and then its subsections. Returns whether anything was emitted.
   */
  private emitSection(section: Section, parentPath: string[], lead: Block[], out: MarkdownChunk[]): boolean {
    if (!holdsText(section)) return false;
    const path = section.heading === undefined ? parentPath : [...parentPath, section.label];
    const blocks = flatten(section, [...lead]);
    const size = blocks.reduce((sum, block) => sum + blockText(block).length + 2, 0);
    if (section.heading !== undefined && size <= this.chunkSize) {
      // A heading with no text of its own over a single subsection: the chunk is that subsection's.
      const headings = [...path];
      for (let inner = section; inner.body.length === 0; ) {
        const textual = inner.children.filter(holdsText);
        if (textual.length !== 1) break;
        inner = textual[0] as Section;
        headings.push(inner.label);
      }
      out.push({ text: blocks.map(blockText).join('\n\n'), from: (blocks[0] as Block).from, to: (blocks[blocks.length - 1] as Block).to, headings });
      return true;
    }
    let waiting = section.heading === undefined ? lead : [...lead, section.heading];
    if (section.body.length > 0) {
      for (const chunk of this.pack(waiting, section.body, path)) out.push(chunk);
      waiting = [];
    }
    for (const child of section.children) {
      if (this.emitSection(child, path, waiting, out)) waiting = [];
    }
    return true;
  }

  /** Packs a section's blocks into chunks of at most `chunkSize`, balanced so the last is not a scrap. */
  private pack(lead: Block[], blocks: Block[], headings: string[]): MarkdownChunk[] {
    const parts = blocks.flatMap((block) => this.fit(block));
    const size = (list: Block[]): number => list.reduce((sum, block) => sum + blockText(block).length + 2, 0);
    const total = size(parts) + size(lead);
    const target = total / Math.ceil(total / this.chunkSize);
    const chunks: MarkdownChunk[] = [];
    let current: Block[] = [...lead];
    let currentSize = size(lead);
    const emit = (): void => {
      if (current.every((block) => block.kind === 'heading')) return;
      chunks.push({
        text: current.map(blockText).join('\n\n'),
        from: (current[0] as Block).from,
        to: (current[current.length - 1] as Block).to,
        headings,
      });
      current = [];
      currentSize = 0;
    };
    for (const part of parts) {
      const length = blockText(part).length + 2;
      const holdsText = current.some((block) => block.kind !== 'heading');
      if (holdsText && (currentSize + length > this.chunkSize || currentSize >= target)) emit();
      current.push(part);
      currentSize += length;
    }
    emit();
    return chunks;
  }

  /** A block as pieces of at most `chunkSize`: whole when it fits; a table by rows under its header; code by lines inside its fence; prose by the recursive splitter. */
  private fit(block: Block): Block[] {
    if (blockText(block).length <= this.chunkSize) return [block];
    if (block.kind === 'table') return this.byLines(block, block.lines.slice(0, Math.min(2, block.lines.length)), []);
    if (block.kind === 'code') {
      const open = block.lines[0] as string;
      const closed = block.closed === true;
      const inner: Block = { ...block, lines: block.lines.slice(1, closed ? -1 : undefined), from: block.from + 1 };
      return this.byLines(inner, [open], closed ? [block.lines[block.lines.length - 1] as string] : [], block);
    }
    const splitter = new RecursiveCharacterTextSplitter({ chunkSize: this.chunkSize, chunkOverlap: this.chunkOverlap, separators: ['\n', '. ', ' ', ''] });
    const text = blockText(block);
    const lineAt = lineLocator(text);
    let searchFrom = 0;
    return splitter.splitText(text).map((piece) => {
      let at = text.indexOf(piece, Math.max(0, searchFrom - this.chunkSize));
      if (at === -1) at = searchFrom;
      searchFrom = at + 1;
      const from = block.from + lineAt(at) - 1;
      return { kind: 'text' as const, lines: piece.split('\n'), from, to: from + countNewlines(piece, 0, piece.length) };
    });
  }

  /**
   * Splits a table or code block by whole lines, each part wrapped in `head` and `tail` (the header rows, the
   * fences). The first part's lines begin at the block's own first line (its header, its opening fence: a
   * probe found them left out of its range), the last's end at the block's last (its closing fence); the parts
   * between span their own rows, their repeated header being the first part's.
   */
  private byLines(block: Block, head: string[], tail: string[], outer: Block = block): Block[] {
    const room = this.chunkSize - [...head, ...tail].join('\n').length - 1;
    const body = block.kind === 'table' ? block.lines.slice(head.length) : block.lines;
    const first = block.kind === 'table' ? block.from + head.length : block.from;
    const parts: Block[] = [];
    let lines: string[] = [];
    let length = 0;
    let start = first;
    body.forEach((line, index) => {
      if (lines.length > 0 && length + line.length + 1 > room) {
        parts.push({ kind: block.kind, lines: [...head, ...lines, ...tail], from: start, to: first + index - 1 });
        lines = [];
        length = 0;
        start = first + index;
      }
      lines.push(line);
      length += line.length + 1;
    });
    if (lines.length > 0) parts.push({ kind: block.kind, lines: [...head, ...lines, ...tail], from: start, to: first + body.length - 1 });
    const [opening, closing] = [parts[0], parts.at(-1)];
    if (opening !== undefined) opening.from = outer.from;
    if (closing !== undefined) closing.to = Math.max(closing.to, outer.to);
    return parts;
  }

  /** Splits documents; each chunk copies the metadata and adds `headings` and `loc.lines` `{from, to}` (1-based). */
  async splitDocuments(documents: readonly Document[]): Promise<Document[]> {
    return documents.flatMap((doc) =>
      this.splitText(doc.pageContent).map(
        (chunk) =>
          new Document({
            pageContent: chunk.text,
            metadata: { ...doc.metadata, headings: chunk.headings, loc: { lines: { from: chunk.from, to: chunk.to } } },
          }),
      ),
    );
  }
}

function countNewlines(text: string, from: number, to: number): number {
  let n = 0;
  for (let i = from; i < to; i++) if (text.charCodeAt(i) === 10) n++;
  return n;
}
