/**
 * `/rag`: a question → the best passages of the `docs` collection (hybrid
 * search: BM25 and vectors in pgvector, fused by rank) → a prompt holding
 * them → the chat model. Answers `{answer, sources}`, each source with its
 * id, metadata (file, lines, heading path), content and score.
 */
import { z } from 'zod';
import { assign, ChatPromptTemplate, defineChain, lambda, pick, queryTerms, StringOutputParser, terms } from '../src/index.js';
import { sourceSchema, type DocsCollection, type Source } from './docs.js';
import { chatModel, lastText, OFFLINE, quote, type ChainContext } from './model.js';

const prompt = ChatPromptTemplate.fromMessages([
  [
    'system',
    'Answer the question from the numbered passages of Runnel’s documentation below, citing them as [1], [2]. ' +
      'If the passages do not hold the answer, say so.\n\nPassages:\n{context}',
  ],
  ['human', '{question}'],
]);

/** Where a passage is: `docs/persistence.md:12-30`. */
function place(source: Source): string {
  const lines = (source.metadata.loc as { lines?: { from?: unknown; to?: unknown } } | undefined)?.lines;
  const range = typeof lines?.from === 'number' ? `:${lines.from}-${String(lines.to)}` : '';
  return `${String(source.metadata.source ?? source.id)}${range}`;
}

/** The passages as the prompt shows them: `[n] (source:lines) text`, one paragraph each. */
export function formatSources(sources: readonly Source[]): string {
  if (sources.length === 0) return '(none found)';
  return sources.map((source, i) => `[${i + 1}] (${place(source)}) ${source.content.replace(/\s+/g, ' ').trim()}`).join('\n\n');
}

// A table's separator cell: dashes written tight (`|--|`, `|:-|`), or three and more, or with a colon.
const SEPARATOR_CELL = String.raw`(?::?-+:?|\s*(?::-+:?|-+:|-{3,})\s*)\|`;
const HAS_SEPARATOR = new RegExp(String.raw`\|${SEPARATOR_CELL}`);
const SEPARATOR_ROW = new RegExp(String.raw`\|?(?:${SEPARATOR_CELL})+`, 'g');

/**
 * A Markdown table flattened into one line (`| a | b | |---|---| | c | d |`) as sentences, `a, b. c, d`: a quote
 * that starts on a row starts on its first cell, not on the `| |` between rows. An empty cell reads as a row's end;
 * a cell ` - ` (nothing to say) stays.
 */
function tableAsSentences(text: string): string {
  if (!HAS_SEPARATOR.test(text)) return text;
  return text
    .replace(SEPARATOR_ROW, '')
    .replace(/[\s.]*\|\s+\|[\s|]*/g, '. ')
    .replace(/:\s*\|\s*/g, ': ')
    .replace(/\s+\|\s+/g, ', ')
    .replace(/^\s*\|\s*|\s*\|\s*$/g, '');
}

/**
 * The offline model's quote: the passage from its sentence that shares the
 * most of the question's terms (the first such), not from its first word — a
 * passage can open on the end of the previous point.
 */
export function answeringPart(passage: string, question: string): string {
  const wanted = new Set(queryTerms(question));
  const sentences = tableAsSentences(passage).split(/(?<=[.!?])\s+|\s+(?=[-*] )/);
  let best = 0;
  let bestShared = 0;
  sentences.forEach((sentence, index) => {
    const shared = new Set(terms(sentence).filter((term) => wanted.has(term))).size;
    if (shared > bestShared) {
      best = index;
      bestShared = shared;
    }
  });
  return sentences.slice(best).join(' ');
}

export const ragInput = z.object({ question: z.string().min(1).max(4000).describe('A question about Runnel') });
export const ragOutput = z.object({ answer: z.string(), sources: z.array(sourceSchema) });

export function ragChain(context: ChainContext, docs: DocsCollection) {
  const model = chatModel(context, (request) => {
    const passages = lastText(request, 'system').split('Passages:\n')[1] ?? '';
    const first = passages.split('\n\n')[0] ?? '';
    const cited = /^\[1\] \(([^)]*)\) (.*)$/s.exec(first);
    if (cited === null) return `${OFFLINE} I found no passage in the docs collection for this question.`;
    return `${OFFLINE} the closest passage, [1] from ${cited[1]}, says: “${quote(answeringPart(cited[2] ?? '', lastText(request, 'human')), 300)}”`;
  });
  const runnable = assign({ sources: pick('question').pipe(docs.retriever(4)) })
    .pipe(assign({ context: lambda((input: Record<string, unknown>) => formatSources(input.sources as Source[]), { name: 'formatSources' }) }))
    .pipe(assign({ answer: prompt.pipe(model).pipe(new StringOutputParser()) }))
    .pipe(pick(['answer', 'sources']))
    .withTypes({ input: ragInput, output: ragOutput });
  return defineChain({
    path: '/rag',
    description: 'Answers questions about Runnel from its own documentation (retrieval from pgvector), with the sources it used and their scores.',
    runnable,
  });
}
