import { expect, it } from 'vitest';
import { ChatPromptTemplate, FakeListChatModel, StringOutputParser, type StreamEvent } from '../../src/index.js';
import { toArray } from '../helpers.js';

it('pins the streamEvents sequence of prompt | model | parser', async () => {
  const prompt = ChatPromptTemplate.fromMessages([['system', 'You are funny.'], ['human', 'A joke about {topic}']]);
  const model = new FakeListChatModel({ responses: ['Cats purr'] });
  const chain = prompt.pipe(model).pipe(new StringOutputParser());
  const events = await toArray(chain.streamEvents({ topic: 'cats' }, { runName: '/joke' }));

  expect(events.map((e) => `${e.event} ${e.name}`)).toEqual([
    'on_chain_start /joke',
    'on_prompt_start ChatPromptTemplate',
    'on_prompt_end ChatPromptTemplate',
    'on_chat_model_start FakeListChatModel',
    'on_chat_model_stream FakeListChatModel',
    'on_parser_start StrOutputParser',
    'on_parser_stream StrOutputParser',
    'on_chain_stream /joke',
    'on_chat_model_stream FakeListChatModel',
    'on_parser_stream StrOutputParser',
    'on_chain_stream /joke',
    // The final chunk carries usage and no text: the parser yields nothing for it.
    'on_chat_model_stream FakeListChatModel',
    'on_chat_model_end FakeListChatModel',
    'on_parser_end StrOutputParser',
    'on_chain_end /joke',
  ]);

  const [root, promptStart, , modelStart] = events as [StreamEvent, StreamEvent, StreamEvent, StreamEvent];
  expect(root.parent_ids).toEqual([]);
  for (const event of events) expect(event.parent_ids).toEqual(event.name === '/joke' ? [] : [root.run_id]);
  expect(promptStart.tags).toEqual(['seq:step:1']);
  expect(modelStart.tags).toEqual(['seq:step:2']);
  expect(JSON.parse(JSON.stringify(modelStart.data))).toEqual({
    input: {
      messages: [
        [
          { type: 'system', content: 'You are funny.', additional_kwargs: {}, response_metadata: {}, name: null, id: null },
          { type: 'human', content: 'A joke about cats', additional_kwargs: {}, response_metadata: {}, name: null, id: null },
        ],
      ],
    },
  });
  expect(events.filter((e) => e.event === 'on_parser_stream').map((e) => e.data.chunk)).toEqual(['Cats', ' purr']);
  expect(events.find((e) => e.event === 'on_chat_model_end')?.data.output).toMatchObject({ content: 'Cats purr', usage_metadata: { output_tokens: 2 } });
  expect(events.at(-1)?.data.output).toBe('Cats purr');
});
