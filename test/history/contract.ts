/** The contract every chat history passes; each implementation's test calls it with a factory. */
import { beforeEach, describe, expect, it } from 'vitest';
import { AIMessage, AIMessageChunk, HumanMessage, SystemMessage, ToolMessage, type ChatMessageHistory } from '../../src/index.js';

/**
 * `options.bounded` makes a history that keeps `BOUND` bytes of a conversation (each store counts them its
 * own way: Redis the stored JSON, memory the strings V8 holds; both near the JSON's length for ASCII).
 */
export const BOUND = 20_000;

export function historyContract(name: string, make: (sessionId: string) => ChatMessageHistory, options: { maxMessages: number; bounded: (sessionId: string) => ChatMessageHistory }): void {
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

    it('takes a write back: its messages go, those before and after it stay, an identical earlier turn too', async () => {
      await history.addMessages([new HumanMessage('same'), new AIMessage('answer')]);
      const takeBack = await history.addMessages([new HumanMessage('same'), new AIMessage('answer')]);
      await history.addMessages([new HumanMessage('later')]);
      expect(takeBack).toBeTypeOf('function');
      await (takeBack as () => Promise<void>)();
      expect((await history.getMessages()).map((m) => m.text)).toEqual(['same', 'answer', 'later']);
      // Taken back twice, it removes nothing more.
      await (takeBack as () => Promise<void>)();
      expect((await history.getMessages()).map((m) => m.text)).toEqual(['same', 'answer', 'later']);
    });

    it('keeps only the newest maxMessages', async () => {
      for (let i = 0; i < options.maxMessages + 3; i++) await history.addMessages([new HumanMessage(`m${i}`)]);
      const messages = await history.getMessages();
      expect(messages).toHaveLength(options.maxMessages);
      expect(messages.at(-1)?.text).toBe(`m${options.maxMessages + 2}`);
      expect(messages[0]?.text).toBe('m3');
    });

    // A review: the Redis read bound was the only one, and Runnel wrote past it — then every later turn of the
    // conversation failed reading it; in memory one conversation was bounded by its count alone.
    it('keeps the newest whole messages that fit its bytes, so what it wrote it can read', async () => {
      const bounded = options.bounded(`contract-bytes-${Date.now()}-${n++}`);
      for (let turn = 0; turn < 12; turn += 1) {
        await bounded.addMessages([new HumanMessage(`q${turn} ${'x'.repeat(2_000)}`), new AIMessage(`a${turn} ${'y'.repeat(2_000)}`)]);
        const messages = await bounded.getMessages();
        expect(messages.at(-1)?.text).toMatch(new RegExp(`^a${turn} `));
        expect(messages.at(-2)?.text).toMatch(new RegExp(`^q${turn} `));
      }
      const messages = await bounded.getMessages();
      // About nine of 2 KB fit in 20 KB; the oldest went first.
      expect(messages.length).toBeGreaterThanOrEqual(8);
      expect(messages.length).toBeLessThanOrEqual(10);
      expect(messages.reduce((sum, message) => sum + JSON.stringify(message).length, 0)).toBeLessThanOrEqual(BOUND);
    });

    it('refuses a turn larger than its bytes on its own, writing none of it and keeping the conversation', async () => {
      const bounded = options.bounded(`contract-big-${Date.now()}-${n++}`);
      await bounded.addMessages([new HumanMessage('first'), new AIMessage('answer')]);
      const refused = await bounded.addMessages([new HumanMessage('q'), new AIMessage('z'.repeat(BOUND + 2_000))]).catch((error: unknown) => error);
      expect(refused).toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID', message: expect.stringContaining('nothing of it was saved') });
      expect((await bounded.getMessages()).map((message) => message.text)).toEqual(['first', 'answer']);
    });

    // A review: a trim could keep a turn's answer or tool result without the question and call before it —
    // a tool result whose call went is refused by the providers.
    it('starts what it keeps at a question when a trim cuts a turn', async () => {
      const turn = (i: number) => [
        new HumanMessage(`q${i}`),
        new AIMessage({ content: '', tool_calls: [{ id: `c${i}`, name: 'f', args: {} }] }),
        new ToolMessage({ content: `r${i}`, tool_call_id: `c${i}` }),
        new AIMessage(`a${i}`),
      ];
      for (let i = 0; i < 3; i++) await history.addMessages(turn(i));
      const kept = await history.getMessages();
      // maxMessages cuts the turns of four into the middle of one: its rest goes too.
      expect(kept[0]?.type).toBe('human');
      expect(kept.at(-1)?.text).toBe('a2');
      const bounded = options.bounded(`contract-cut-${Date.now()}-${n++}`);
      const long = (i: number) => [new HumanMessage(`q${i}`), new AIMessage({ content: 'x'.repeat(3_000), tool_calls: [{ id: `c${i}`, name: 'f', args: {} }] }), new ToolMessage({ content: 'y'.repeat(3_000), tool_call_id: `c${i}` }), new AIMessage(`a${i}`)];
      for (let i = 0; i < 6; i++) {
        await bounded.addMessages(long(i));
        const messages = await bounded.getMessages();
        expect(messages[0]?.type, `turn ${i}`).toBe('human');
        expect(messages.at(-1)?.text).toBe(`a${i}`);
      }
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
