/** `/joke`: a joke about a topic — prompt | chat model | string parser. */
import { z } from 'zod';
import { ChatPromptTemplate, defineChain, StringOutputParser } from '../src/index.js';
import { chatModel, lastText, lastUserText, OFFLINE, quote, type ChainContext } from './model.js';

const prompt = ChatPromptTemplate.fromMessages([
  ['system', 'You are a comedian. Answer with one short, clean joke.'],
  ['human', 'Tell me a joke about {topic}'],
]);

export function jokeChain(context: ChainContext) {
  const model = chatModel(context, (request) => {
    const topic = quote(lastText(request, 'human').replace(/^Tell me a joke about /, ''), 80);
    return `${OFFLINE} why did the ${topic} cross the road? To get to the other side.`;
  });
  return defineChain({
    path: '/joke',
    description: 'Tells a short joke about a topic: ChatPromptTemplate | chat model | StringOutputParser.',
    runnable: prompt.pipe(model).pipe(new StringOutputParser()),
    inputSchema: z.object({ topic: z.string().min(1).max(200).describe('What the joke is about') }),
    // Each message is a new topic.
    messages: { toInput: ({ turns }) => ({ input: { topic: lastUserText(turns) } }) },
  });
}
