/**
 * A retriever's events next to @langchain/core's for the same step: its start and end carry the query as
 * LangChain's do, `data.input` `{query}`, and its output is the documents.
 */
import { Document as LcDocument } from '@langchain/core/documents';
import { BaseRetriever } from '@langchain/core/retrievers';
import { RunnableLambda, RunnableSequence } from '@langchain/core/runnables';
import { expect, it } from 'vitest';
import { Document, HashingEmbeddings, lambda, MemoryVectorStore, sequence } from '../../src/index.js';
import { toArray } from '../helpers.js';

class CatsRetriever extends BaseRetriever {
  lc_namespace = ['test'];
  override async _getRelevantDocuments(): Promise<LcDocument[]> {
    return [new LcDocument({ pageContent: 'cats purr' })];
  }
}

const inputsOf = (events: { event: string; data: { input?: unknown } }[]): [string, unknown][] =>
  events.filter((e) => e.event.startsWith('on_retriever_')).map((e) => [e.event, e.data.input]);

it('shows a retriever run input as {query}, as LangChain does', async () => {
  const store = new MemoryVectorStore(new HashingEmbeddings());
  await store.addDocuments([new Document({ pageContent: 'cats purr' }), new Document({ pageContent: 'dogs bark' })]);
  const chain = sequence(store.asRetriever({ k: 1 }), lambda((docs: Document[]) => docs.length, { name: 'count' }));
  const lcChain = RunnableSequence.from([new CatsRetriever(), RunnableLambda.from((docs: LcDocument[]) => docs.length)]);

  const lcEvents = await toArray(lcChain.streamEvents('cats', { version: 'v2' }));
  expect(inputsOf(lcEvents)).toEqual([
    ['on_retriever_start', { query: 'cats' }],
    ['on_retriever_end', { query: 'cats' }],
  ]);
  const events = await toArray(chain.streamEvents('cats'));
  expect(inputsOf(events)).toEqual(inputsOf(lcEvents));
  const end = events.find((e) => e.event === 'on_retriever_end');
  expect((end?.data.output as Document[]).map((d) => d.pageContent)).toEqual(['cats purr']);
  // The retriever itself still searches for the bare string.
  expect(await chain.invoke('dogs')).toBe(1);
});
