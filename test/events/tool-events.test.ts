/**
 * A tool's events next to @langchain/core's for the same step: a tool starts and ends, it does not stream
 * (LangChain has no on_tool_stream), so its run-log entry's streamed_output stays empty; at the root, the
 * log's streamed_output holds its output.
 */
import { tool as lcTool } from '@langchain/core/tools';
import { RunnableLambda, RunnableSequence } from '@langchain/core/runnables';
import { expect, it } from 'vitest';
import { z } from 'zod';
import { lambda, sequence, tool, type RunLogPatch, type StreamEvent } from '../../src/index.js';
import { toArray } from '../helpers.js';

const schema = z.object({ q: z.string() });
const search = tool(({ q }) => `found ${q}`, { name: 'search', description: 'Searches', schema });
const chain = sequence(lambda((q: string) => ({ q }), { name: 'ask' }), search);
const lcChain = RunnableSequence.from([
  RunnableLambda.from((q: string) => ({ q })).withConfig({ runName: 'ask' }),
  lcTool(({ q }: { q: string }) => `found ${q}`, { name: 'search', description: 'Searches', schema }),
]);

const ofTool = (events: { event: string; name: string }[]): string[] => events.filter((e) => e.name === 'search').map((e) => e.event);

it('emits a tool run as LangChain does: start and end, no on_tool_stream', async () => {
  const events = await toArray(chain.streamEvents('cats'));
  const lcEvents = await toArray(lcChain.streamEvents('cats', { version: 'v2' }));
  expect(ofTool(lcEvents)).toEqual(['on_tool_start', 'on_tool_end']);
  expect(ofTool(events)).toEqual(ofTool(lcEvents));
  expect(events.find((e: StreamEvent) => e.event === 'on_tool_end')?.data).toEqual({ input: { q: 'cats' }, output: 'found cats' });
  // The chain's own output still streams.
  expect(events.filter((e) => e.event === 'on_chain_stream' && e.parent_ids.length === 0).map((e) => e.data.chunk)).toEqual(['found cats']);
});

it('adds nothing to a tool log entry streamed_output, as LangChain streamLog does', async () => {
  const ops = (await toArray(chain.streamLog('cats'))).flatMap((patch: RunLogPatch) => patch.ops);
  const lcOps = (await toArray(lcChain.streamLog('cats'))).flatMap((patch) => patch.ops);
  const paths = (list: { path: string }[]): string[] => list.map((op) => op.path).filter((path) => path.startsWith('/logs/search'));
  expect(paths(lcOps)).toEqual(['/logs/search', '/logs/search/final_output', '/logs/search/end_time']);
  expect(paths(ops)).toEqual(paths(lcOps));
  expect(ops.find((op) => op.path === '/logs/search/final_output')?.value).toEqual({ output: 'found cats' });
});

// A review: a tool served as a chain (the root) streamed nothing on /stream_log once tools stopped emitting
// stream events; LangChain's log has its output as the stream's one chunk.
it('streams a root tool\'s output in the log, as LangChain streamLog does', async () => {
  const root = (ops: { op: string; path: string; value?: unknown }[]) => ops.filter((op) => op.path === '/streamed_output/-').map((op) => op.value);
  const ops = (await toArray(search.streamLog({ q: 'x' }))).flatMap((patch: RunLogPatch) => patch.ops);
  const lcOps = (await toArray(lcTool(({ q }: { q: string }) => `found ${q}`, { name: 'search', description: 'Searches', schema }).streamLog({ q: 'x' }))).flatMap((patch) => patch.ops);
  expect(root(lcOps)).toEqual(['found x']);
  expect(root(ops)).toEqual(root(lcOps));
  expect(ops.find((op) => op.path === '/final_output')?.value).toBe('found x');
});
