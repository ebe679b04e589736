/** The contract every chat history passes; each implementation's test calls it with a factory. */
import { beforeEach, describe, expect, it } from 'vitest';
import { AIMessage, AIMessageChunk, HumanMessage, SystemMessage, ToolMessage, type ChatMessageHistory } from '../../src/index.js';

export function historyContract(name: string, make: (sessionId: string) => ChatMessageHistory, options: { maxMessages: number }): void {
  describe(`${name}: the chat history contract`, () => {
    let n = 0;
    let history: ChatMessageHistory;
    beforeEach(() => {
      history = make(`contract-${Date.now()}-${n++}`);
    });

    it('starts empty and returns what was appended, in order, as whole messages', async () => {
      expect(await history.getMessages()).toEqual([]);
      await history.addMessages([new SystemMessage('be brief'), new HumanMessage('hi')]);
      await history.addMessages([
        new AIMessageChunk({ content: 'hello', tool_call_chunks: [{ index: 0, id: 'c1', name: 'f', args: '{"a":1}' }] }),
        new ToolMessage({ content: 'r', tool_call_id: 'c1' }),
      ]);
      const messages = await history.getMessages();
      expect(messages.map((m) => m.type)).toEqual(['system', 'human', 'ai', 'tool']);
      expect(messages[2]).toBeInstanceOf(AIMessage);
      expect((messages[2] as AIMessage).tool_calls).toEqual([{ name: 'f', args: { a: 1 }, id: 'c1', type: 'tool_call' }]);
      expect(messages.map((m) => m.toJSON())).toEqual(
        [new SystemMessage('be brief'), new HumanMessage('hi'), messages[2] as AIMessage, new ToolMessage({ content: 'r', tool_call_id: 'c1' })].map((m) => m.toJSON()),
      );
    });

    it('keeps only the newest maxMessages', async () => {
      for (let i = 0; i < options.maxMessages + 3; i++) await history.addMessages([new HumanMessage(`m${i}`)]);
      const messages = await history.getMessages();
      expect(messages).toHaveLength(options.maxMessages);
      expect(messages.at(-1)?.text).toBe(`m${options.maxMessages + 2}`);
      expect(messages[0]?.text).toBe('m3');
    });

    it('keeps sessions apart and clears one', async () => {
      const other = make(`contract-other-${Date.now()}-${n++}`);
      await history.addMessages([new HumanMessage('mine')]);
      await other.addMessages([new HumanMessage('theirs')]);
      expect((await history.getMessages()).map((m) => m.text)).toEqual(['mine']);
      await history.clear();
      expect(await history.getMessages()).toEqual([]);
      expect((await other.getMessages()).map((m) => m.text)).toEqual(['theirs']);
    });
  });
}
