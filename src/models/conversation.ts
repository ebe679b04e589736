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
 * The calls of the answer at `index` that a tool message after it answers, before the next user message or
 * answer with calls of its own (system messages and answers of text alone between them do not end the
 * search: Anthropic moves the first out and merges the second into this answer's turn); a call without an id
 * is kept, as the adapters name it.
 *
 * @example
 * answeredCalls([question, answerWithTwoCalls, resultOfTheFirst], 1) // the first call only
 */
export function answeredCalls(messages: readonly BaseMessage[], index: number): ToolCall[] {
  const calls = (messages[index] as AIMessage).tool_calls;
  if (calls.length === 0) return calls;
  const answered = new Set<string>();
  for (let next = index + 1; next < messages.length; next++) {
    const message = messages[next] as BaseMessage;
    if (message.type === 'tool') answered.add((message as ToolMessage).tool_call_id);
    else if (message.type !== 'system' && !(message.type === 'ai' && (message as AIMessage).tool_calls.length === 0)) break;
  }
  return calls.filter((call) => call.id === undefined || call.id === '' || answered.has(call.id));
}

/**
 * Where the request's question begins: the index after the conversation's last answer (an AI message, or a
 * `ChatMessage` of role `assistant`), 0 when there is none. The user messages from there on are what this
 * request asks about (a file and then "summarise the above" are one question), whose content the adapters
 * refuse rather than leave out when they cannot send a part of it; the ones before are its history.
 *
 * @example
 * questionStart([question, answer, file, followUp]) // 2
 */
export function questionStart(messages: readonly BaseMessage[]): number {
  for (let at = messages.length - 1; at >= 0; at--) {
    const message = messages[at] as BaseMessage;
    if (message.type === 'ai' || (message.type === 'chat' && (message as ChatMessage).role === 'assistant')) return at + 1;
  }
  return 0;
}
