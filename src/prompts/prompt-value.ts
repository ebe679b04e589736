/**
 * What a prompt produces: a `PromptValue` that reads as a string (for text
 * models) or as messages (for chat models).
 */
import { HumanMessage, type BaseMessage } from '../messages/index.js';

/** A formatted prompt. */
export interface PromptValue {
  toString(): string;
  toMessages(): BaseMessage[];
  toJSON(): Record<string, unknown>;
}

/** A prompt formatted as text. Serialized as `{"type": "StringPromptValue", "text": ...}`. */
export class StringPromptValue implements PromptValue {
  constructor(readonly text: string) {}

  toString(): string {
    return this.text;
  }

  toMessages(): BaseMessage[] {
    return [new HumanMessage(this.text)];
  }

  toJSON(): Record<string, unknown> {
    return { type: 'StringPromptValue', text: this.text };
  }
}

const ROLE_LABELS: Record<string, string> = { human: 'Human', ai: 'AI', AIMessageChunk: 'AI', system: 'System', tool: 'Tool' };

/** A prompt formatted as messages. Serialized as `{"type": "ChatPromptValueConcrete", "messages": [...]}`. */
export class ChatPromptValue implements PromptValue {
  constructor(readonly messages: BaseMessage[]) {}

  toString(): string {
    return this.messages
      .map((message) => `${message.type === 'chat' ? (message as BaseMessage & { role: string }).role : (ROLE_LABELS[message.type] ?? message.type)}: ${message.text}`)
      .join('\n');
  }

  toMessages(): BaseMessage[] {
    return this.messages;
  }

  toJSON(): Record<string, unknown> {
    return { type: 'ChatPromptValueConcrete', messages: this.messages.map((message) => message.toJSON()) };
  }
}

/** True for prompt values. */
export function isPromptValue(value: unknown): value is PromptValue {
  return value instanceof StringPromptValue || value instanceof ChatPromptValue;
}
