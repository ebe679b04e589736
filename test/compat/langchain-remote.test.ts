/**
 * LangChain.js's own client (`RemoteRunnable` of @langchain/core 0.3.80, the
 * last release that has it) against a real listening Runnel server: the same
 * results as calling the chain in-process.
 */
import { RemoteRunnable as LangChainRemote } from 'langchain-core-0.3/runnables/remote';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toArray } from '../helpers.js';
import { chat, documents, echo, joke, startServer, type TestServer } from '../support/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => server.close());

const remote = (path: string) => new LangChainRemote({ url: `${server.url}${path}` });

describe('@langchain/core 0.3.80 RemoteRunnable against Runnel', () => {
  it('invoke and batch give the in-process results', async () => {
    expect(await remote('/echo').invoke({ name: 'Ada' })).toBe(await echo.runnable.invoke({ name: 'Ada' } as never));
    expect(await remote('/echo').batch([{ name: 'a' }, { name: 'b' }])).toEqual(['hello a', 'hello b']);
    expect(await remote('/echo').batch([])).toEqual([]);
    expect(await remote('/joke').invoke({ topic: 'cats' }, { configurable: { temperature: 0.5 }, tags: ['t'], recursionLimit: 7 })).toBe(
      await joke.runnable.invoke({ topic: 'cats' } as never),
    );
  });

  it('stream gives the same chunks', async () => {
    const chunks = await toArray(await remote('/joke').stream({ topic: 'cats' }));
    const local = await toArray(joke.runnable.stream({ topic: 'cats' } as never));
    expect(chunks).toEqual(local);
  });

  it('revives messages and documents into its own classes', async () => {
    const message = (await remote('/chat-model').invoke({ question: 'capital?' })) as { content: string; constructor: { name: string } };
    expect(message.constructor.name).toBe('AIMessage');
    expect(message.content).toBe('Paris is the capital.');
    const docs = (await remote('/documents').invoke('cats')) as { pageContent: string; metadata: object; constructor: { name: string } }[];
    expect(docs[0]?.constructor.name).toBe('Document');
    expect(docs[0]).toMatchObject({ pageContent: 'About cats', metadata: { source: 'a.md' } });
    void documents;
    void chat;
  });

  it('streamEvents (v2) and streamLog work', async () => {
    const events = await toArray(remote('/joke').streamEvents({ topic: 'cats' }, { version: 'v2' }));
    const local = await toArray(joke.runnable.streamEvents({ topic: 'cats' } as never, { runName: '/joke' }));
    expect(events.map((e) => `${e.event}:${e.name}`)).toEqual(local.map((e) => `${e.event}:${e.name}`));
    const patches = await toArray(await remote('/joke').streamLog({ topic: 'cats' }));
    const ops = patches.flatMap((p) => p.ops);
    expect(ops[0]).toMatchObject({ op: 'replace', path: '' });
    expect(ops.some((op) => op.path === '/final_output')).toBe(true);
    // A sub-run's final_output as LangServe's run log has it (a probe found the bare values): a chat model's an
    // LLMResult (which this client revives), a parser's `{output}`, a prompt's its value.
    const finals = Object.fromEntries(ops.filter((op) => op.path.endsWith('/final_output') && op.path !== '/final_output').map((op) => [op.path.split('/')[2], (op as { value?: unknown }).value]));
    const answer = await joke.runnable.invoke({ topic: 'cats' } as never);
    const llm = Object.entries(finals).find(([name]) => name !== 'ChatPromptTemplate' && name !== 'StrOutputParser')?.[1] as { generations: { text: string; message: { content: string } }[][] };
    expect(llm.generations[0]?.[0]?.text).toBe(answer);
    expect(llm.generations[0]?.[0]?.message.content).toBe(answer);
    expect(finals.StrOutputParser).toEqual({ output: answer });
    expect((finals.ChatPromptTemplate as { constructor: { name: string } }).constructor.name).toBe('ChatPromptValue');
  });

  it('surfaces errors readably', async () => {
    await expect(remote('/echo').invoke({ name: 5 })).rejects.toThrow(/422/);
    await expect(remote('/echo').invoke({ name: 5 })).rejects.toThrow(/RUNNEL_ERR_INPUT_INVALID/);
    // Its stream() rejects at the call, reading `message` from the JSON error body.
    await expect(remote('/echo').stream({ name: 5 })).rejects.toThrow(/RemoteRunnable call failed with status code 422: Invalid input/);
    await expect(toArray(await remote('/failing').stream({ when: 'after' }))).rejects.toThrow(/Internal Server Error/);
  });
});
