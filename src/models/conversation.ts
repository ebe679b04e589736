/**
 * The tool calls of an answer in a conversation that both adapters send: those a result answers. Both APIs
 * refuse a call whose result does not follow it (OpenAI: `An assistant message with 'tool_calls' must be
 * followed by tool messages responding to each 'tool_call_id'`; Anthropic: `tool_use` ids without
 * `tool_result` blocks after them), a 400. Sent before, a chat whose history keeps a model's call nobody
 * answered (the client asked something else instead of sending the tool's result) failed every later turn.
 */
import type { AIMessage, BaseMessage, ToolCall, ToolMessage } from '../messages/index.js';

/**
 * The calls of the answer at `index` that a tool message right after it (among the tool messages that
 * follow it) answers; a call without an id is kept, as the adapters name it.
 *
 * @example
 * answeredCalls([question, answerWithTwoCalls, resultOfTheFirst], 1) // the first call only
 */
export function answeredCalls(messages: readonly BaseMessage[], index: number): ToolCall[] {
  const calls = (messages[index] as AIMessage).tool_calls;
  if (calls.length === 0) return calls;
  const answered = new Set<string>();
  for (let next = index + 1; next < messages.length && messages[next]?.type === 'tool'; next++) answered.add((messages[next] as ToolMessage).tool_call_id);
  return calls.filter((call) => call.id === undefined || call.id === '' || answered.has(call.id));
}
