/**
 * What of a conversation both adapters send, beyond each message's own conversion. The tool calls of an answer
 * that a result answers: both APIs refuse a call whose result does not follow it (OpenAI: `An assistant message
 * with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'`; Anthropic: `tool_use`
 * ids without `tool_result` blocks after them), a 400. Sent before, a chat whose history keeps a model's call
 * nobody answered (the client asked something else instead of sending the tool's result) failed every later
 * turn. And which user message the request asks about: its content is refused where the adapter cannot send a
 * part of it, an earlier message's part left out.
 */
import type { AIMessage, BaseMessage, ChatMessage, ToolCall, ToolMessage } from '../messages/index.js';

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

/**
 * The index of the conversation's last user message (a `HumanMessage`, or a `ChatMessage` of role `user`), -1
 * when there is none: the message this request asks about, whose content the adapters refuse rather than leave
 * out when they cannot send a part of it.
 *
 * @example
 * lastUserMessage([question, answer, followUp]) // 2
 */
export function lastUserMessage(messages: readonly BaseMessage[]): number {
  for (let at = messages.length - 1; at >= 0; at--) {
    const message = messages[at] as BaseMessage;
    if (message.type === 'human' || (message.type === 'chat' && (message as ChatMessage).role === 'user')) return at;
  }
  return -1;
}
