/**
 * Taking back a write known to have run (a failed `/batch`'s) leaves nothing else in Redis: the mark that stops
 * a write whose outcome is unknown is of no use there, and was set for an hour at every take-back (a review: a
 * failed batch of 1,000 items left 1,000 keys behind). A write whose outcome is unknown still gets its mark.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { AIMessage, HumanMessage, RedisChatMessageHistory } from '../../src/index.js';

const namespace = `runnel-test-marks-${randomUUID()}`;
let client: Redis;
beforeAll(() => {
  client = new Redis('redis://127.0.0.1:6379');
});
afterAll(async () => {
  const keys = await client.keys(`${namespace}*`);
  if (keys.length > 0) await client.del(...keys);
  await client.quit();
});

it('takes back a write that ran without leaving a mark', async () => {
  const history = new RedisChatMessageHistory({ client, namespace, sessionId: 's1' });
  await history.addMessages([new HumanMessage('kept'), new AIMessage('yes')]);
  const takeBack = await history.addMessages([new HumanMessage('taken back'), new AIMessage('no')]);
  await (takeBack as () => Promise<void>)();
  expect((await history.getMessages()).map((m) => m.text)).toEqual(['kept', 'yes']);
  expect(await client.keys(`${namespace}.void:*`)).toEqual([]);
});
