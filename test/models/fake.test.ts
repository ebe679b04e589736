import { describe, expect, it } from 'vitest';
import { FakeListChatModel, FakeToolCallingModel, ScriptedChatModel } from '../../src/index.js';
import { toArray } from '../helpers.js';

const texts = (calls: readonly (readonly { text: string }[])[]): string[] => calls.map((messages) => messages.map((m) => m.text).join('|'));

describe('the fakes keep a bounded record of their calls', () => {
  it('keeps the last 100 calls by default, oldest first, however many calls a long-lived model serves', async () => {
    const model = new FakeListChatModel({ responses: ['ok'] });
    for (let i = 0; i < 1000; i++) {
      if (i % 2 === 0) await model.invoke(`q${i}`);
      else await toArray(model.stream(`q${i}`));
    }
    expect(model.calls).toHaveLength(100);
    expect(texts(model.calls)).toEqual(Array.from({ length: 100 }, (_, i) => `q${900 + i}`));
  });

  it('keeps as many as recordCalls says, and none with 0', async () => {
    const five = new ScriptedChatModel({ respond: ({ messages }) => `echo ${messages.at(-1)?.text}`, recordCalls: 5 });
    const none = new FakeToolCallingModel({ responses: ['done'], recordCalls: 0 });
    for (let i = 0; i < 20; i++) {
      expect((await five.invoke(`m${i}`)).text).toBe(`echo m${i}`);
      expect((await none.invoke(`m${i}`)).text).toBe('done');
    }
    expect(texts(five.calls)).toEqual(['m15', 'm16', 'm17', 'm18', 'm19']);
    expect(none.calls).toEqual([]);
    expect(() => new FakeListChatModel({ responses: ['x'], recordCalls: -1 })).toThrow(/recordCalls/);
  });
});
