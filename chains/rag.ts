/**
 * `/rag`: a question → the closest passages of the `docs` collection
 * (pgvector) → a prompt holding them → the chat model. Answers
 * `{answer, sources}`, each source with its id, metadata, content and score.
 */
import { z } from 'zod';
import { assign, ChatPromptTemplate, defineChain, lambda, pick, StringOutputParser } from '../src/index.js';
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

/** The passages as the prompt shows them: `[n] (source) text`, one paragraph each. */
export function formatSources(sources: readonly Source[]): string {
  if (sources.length === 0) return '(none found)';
  return sources.map((source, i) => `[${i + 1}] (${String(source.metadata.source ?? source.id)}) ${source.content.replace(/\s+/g, ' ').trim()}`).join('\n\n');
}

export const ragInput = z.object({ question: z.string().min(1).max(4000).describe('A question about Runnel') });
export const ragOutput = z.object({ answer: z.string(), sources: z.array(sourceSchema) });

export function ragChain(context: ChainContext, docs: DocsCollection) {
  const model = chatModel(context, (request) => {
    const passages = lastText(request, 'system').split('Passages:\n')[1] ?? '';
    const first = passages.split('\n\n')[0] ?? '';
    const cited = /^\[1\] \(([^)]*)\) (.*)$/s.exec(first);
    if (cited === null) return `${OFFLINE} I found no passage in the docs collection for this question.`;
    return `${OFFLINE} the closest passage, [1] from ${cited[1]}, says: “${quote(cited[2] ?? '', 300)}”`;
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
