/**
 * A small Markdown renderer that builds DOM nodes (never HTML strings):
 * headings, paragraphs, lists, block quotes, fenced code, inline code, bold,
 * italic and links. Links keep only http(s) and relative targets and open
 * with rel="noopener noreferrer"; images render as their alt text (a
 * model's answer must not make the browser fetch anything); raw HTML stays
 * text. Each block takes its direction from its own text (`dir="auto"`), so
 * a Hebrew or Arabic paragraph reads right to left beside an English one.
 */
import { h, type Child } from './dom.js';

/** A block's direction is its text's (its first strong character): an Arabic paragraph reads right to left. */
const AUTO = { dir: 'auto' } as const;

const SAFE_URL = /^(https?:\/\/|\/|\.\/|#)/i;

/** Inline spans: `code`, **bold**, *italic* / _italic_, [text](url), ![alt](url). */
export function inline(text: string): Child[] {
  const out: Child[] = [];
  // Underscores emphasise only at word boundaries (OPENAI_API_KEY stays as it is), as in CommonMark.
  // A code span starts at the start of a run of backticks, and a link's text and target stop at the next `[`
  // and unbalanced `(`: otherwise each backtick of a run, or each `[` of `[[[…`, was a start that read on to the
  // end of the text, and 50,000 of them froze the page for 8 s.
  const pattern = /(?<!`)(`+)([^`]+?)\1|\*\*([^*]+)\*\*|(?<!\w)__([^_]+)__(?!\w)|\*([^*\s][^*]*)\*|(?<!\w)_([^_\s][^_]*)_(?!\w)|!\[([^[\]]*)\]\(((?:[^()\s]|\([^()\s]*\))*)\)|\[([^[\]]+)\]\(((?:[^()\s]|\([^()\s]*\))+)\)/g;
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    const at = match.index ?? 0;
    if (at > last) out.push(text.slice(last, at));
    if (match[2] !== undefined) out.push(h('code', { text: match[2] }));
    else if (match[3] !== undefined || match[4] !== undefined) out.push(h('strong', {}, ...inline(match[3] ?? match[4] ?? '')));
    else if (match[5] !== undefined || match[6] !== undefined) out.push(h('em', {}, ...inline(match[5] ?? match[6] ?? '')));
    else if (match[7] !== undefined) out.push(h('span', { class: 'md-image', text: `[image: ${match[7] || 'no description'}]` }));
    else if (match[9] !== undefined) {
      const url = match[10] ?? '';
      out.push(SAFE_URL.test(url) ? h('a', { href: url, text: match[9], attrs: { rel: 'noopener noreferrer nofollow', target: '_blank' } }) : match[0]);
    }
    last = at + match[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

/**
 * Block quotes nested deeper than this show their inner text as it is: each level is a call, and a model's
 * answer of 20,000 `>` overflowed the stack (the run, finished on the server, showed as Failed).
 */
const MAX_QUOTE_DEPTH = 32;

/** Renders Markdown into a fragment. */
export function markdown(source: string, depth = 0): DocumentFragment {
  const fragment = document.createDocumentFragment();
  const lines = source.replace(/\r\n?/g, '\n').split('\n');
  let i = 0;
  while (i < lines.length) {
    const line = lines[i] as string;
    const fence = /^\s*(```+|~~~+)\s*([\w+-]*)\s*$/.exec(line);
    if (fence) {
      const body: string[] = [];
      i++;
      while (i < lines.length && !(lines[i] as string).trim().startsWith(fence[1] as string)) body.push(lines[i++] as string);
      i++;
      // Code reads left to right, in a right-to-left answer too.
      fragment.append(h('pre', { dir: 'ltr' }, h('code', { text: body.join('\n'), attrs: fence[2] ? { 'data-lang': fence[2] } : {} })));
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      const level = Math.min(6, (heading[1] as string).length + 2) as 3 | 4 | 5 | 6;
      fragment.append(h(`h${level}`, AUTO, ...inline(heading[2] as string)));
      i++;
      continue;
    }
    if (/^\s*([-*+]|\d+[.)])\s+/.test(line)) {
      const ordered = /^\s*\d+[.)]/.test(line);
      const list = h(ordered ? 'ol' : 'ul');
      while (i < lines.length && /^\s*([-*+]|\d+[.)])\s+/.test(lines[i] as string)) {
        list.append(h('li', AUTO, ...inline((lines[i] as string).replace(/^\s*([-*+]|\d+[.)])\s+/, ''))));
        i++;
      }
      fragment.append(list);
      continue;
    }
    if (/^\s*>/.test(line)) {
      const quoted: string[] = [];
      while (i < lines.length && /^\s*>/.test(lines[i] as string)) quoted.push((lines[i++] as string).replace(/^\s*>\s?/, ''));
      const block = h('blockquote');
      block.append(depth < MAX_QUOTE_DEPTH ? markdown(quoted.join('\n'), depth + 1) : h('p', { ...AUTO, text: quoted.join('\n') }));
      fragment.append(block);
      continue;
    }
    if (line.trim() === '') {
      i++;
      continue;
    }
    const paragraph: string[] = [];
    while (i < lines.length && (lines[i] as string).trim() !== '' && !/^(\s*(```|~~~|#{1,6}\s|>|[-*+]\s|\d+[.)]\s))/.test(lines[i] as string)) paragraph.push(lines[i++] as string);
    if (paragraph.length === 0) paragraph.push(lines[i++] as string);
    fragment.append(h('p', AUTO, ...inline(paragraph.join('\n'))));
  }
  return fragment;
}
