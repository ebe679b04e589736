/**
 * `/agent`: a tool-calling agent with a calculator (a real expression
 * parser, never `eval`) and `search_docs` over the `docs` collection. It
 * calls tools until it can answer, and every model and tool run shows in
 * `/stream_events`.
 */
import { z } from 'zod';
import { calculatorTool, createToolCallingAgent, defineChain, messagesSchema, tool, type ChatRequest, type FakeResponse } from '../src/index.js';
import { formatSources } from './rag.js';
import type { DocsCollection } from './docs.js';
import { chatModel, lastText, lastUserText, OFFLINE, quote, type ChainContext } from './model.js';

/** The first arithmetic expression in a question ("what is (3 + 4) * 12?" → "(3 + 4) * 12"). */
export function findExpression(text: string): string | undefined {
  for (const match of text.matchAll(/[-+*/^%().\d\s×÷]+/g)) {
    const candidate = match[0].trim().replace(/^[^\d(-]+|[^\d)]+$/g, '');
    if (/\d\s*[-+*/^%×÷]+\s*[-(\d.]/.test(candidate)) return candidate;
  }
  return undefined;
}

/** The offline agent: a calculation goes to the calculator, anything else to search_docs, and tool results become the answer. */
function offlineAgent(request: ChatRequest): FakeResponse {
  const last = request.messages.at(-1);
  if (last?.type === 'tool') {
    const calls = request.messages.filter((m) => m.type === 'tool').slice(-1);
    const result = quote(calls[0]?.text ?? '', 400);
    return { content: `${OFFLINE} the tool answered: ${result}` };
  }
  const question = lastText(request, 'human');
  const expression = findExpression(question);
  if (expression !== undefined) return { tool_calls: [{ name: 'calculator', args: { expression } }] };
  return { tool_calls: [{ name: 'search_docs', args: { query: question } }] };
}

export function agentChain(context: ChainContext, docs: DocsCollection) {
  const searchDocs = tool(async ({ query }) => formatSources(await docs.search(query, 3)), {
    name: 'search_docs',
    description: 'Searches Runnel’s documentation; returns the closest passages, numbered, with their sources.',
    schema: z.object({ query: z.string().min(1).max(1000).describe('What to look for') }),
  });
  const agent = createToolCallingAgent({
    model: chatModel(context, offlineAgent),
    tools: [calculatorTool(), searchDocs],
    system: 'You are Runnel’s assistant. Use the calculator for arithmetic and search_docs for questions about Runnel; cite what the tools return.',
    maxIterations: 6,
  });
  return defineChain({
    path: '/agent',
    description: 'A tool-calling agent: a calculator and a search over Runnel’s docs. Send {input}.',
    runnable: agent,
    inputSchema: z.object({ input: z.string().min(1).max(4000).describe('A question or a calculation'), chat_history: messagesSchema.optional() }),
    // The client keeps the conversation: its earlier turns are the chat history. Tool calls show as tool parts.
    messages: {
      stream: 'events',
      toInput: ({ turns }) => ({
        input: {
          input: lastUserText(turns),
          chat_history: turns
            .slice(0, turns.findLastIndex((turn) => turn.role === 'user'))
            .filter((turn) => (turn.role === 'user' || turn.role === 'assistant') && turn.text !== '')
            .map((turn) => ({ type: turn.role === 'user' ? 'human' : 'ai', content: turn.text })),
        },
      }),
    },
  });
}
