/** `/joke`: a joke about a topic — prompt | chat model | string parser. */
import { ChatPromptTemplate, defineChain, StringOutputParser } from '../src/index.js';
import { model } from './model.js';

const prompt = ChatPromptTemplate.fromMessages([
  ['system', 'You are a comedian. Answer with one short, clean joke.'],
  ['human', 'Tell me a joke about {topic}'],
]);

export const joke = defineChain({
  path: '/joke',
  description: 'Tells a short joke about a topic.',
  runnable: prompt.pipe(model).pipe(new StringOutputParser()),
});
