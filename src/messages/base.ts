/**
 * Messages: what a chat model reads and writes. Each serializes to
 * LangServe's plain JSON (`toJSON`), always with `additional_kwargs` so
 * LangChain.js clients revive it.
 */
import type { ContentBlock, MessageContent, MessageFields } from './types.js';

/** The `type` tags of messages on the wire. */
export type MessageType = 'human' | 'ai' | 'system' | 'tool' | 'chat' | 'AIMessageChunk';

/** Every `type` a message's JSON may carry, as LangServe and LangChain.js write it (chunks included). */
export const MESSAGE_TYPES: ReadonlySet<string> = new Set(['human', 'ai', 'system', 'tool', 'chat', 'generic', 'AIMessageChunk', 'HumanMessageChunk', 'SystemMessageChunk', 'ToolMessageChunk', 'ChatMessageChunk']);

function textOf(content: MessageContent): string {
  if (typeof content === 'string') return content;
  return content
    .filter((block): block is ContentBlock & { text: string } => block.type === 'text' && typeof block.text === 'string')
    .map((block) => block.text)
    .join('');
}

/** What every message has: content, provider extras, name and id. */
export abstract class BaseMessage {
  abstract readonly type: MessageType;
  readonly content: MessageContent;
  readonly additional_kwargs: Record<string, unknown>;
  readonly response_metadata: Record<string, unknown>;
  readonly name: string | undefined;
  readonly id: string | undefined;

  constructor(fields: string | MessageFields) {
    const f: MessageFields = typeof fields === 'string' ? { content: fields } : fields;
    this.content = f.content;
    this.additional_kwargs = f.additional_kwargs ?? {};
    this.response_metadata = f.response_metadata ?? {};
    this.name = f.name ?? undefined;
    this.id = f.id ?? undefined;
  }

  /** The text of the content (text parts joined, images left out). */
  get text(): string {
    return textOf(this.content);
  }

  /** Fields of this kind of message beyond the common ones, for `toJSON`. */
  protected extraJSON(): Record<string, unknown> {
    return {};
  }

  /** The message as LangServe's JSON. */
  toJSON(): Record<string, unknown> {
    return {
      type: this.type,
      content: this.content,
      additional_kwargs: this.additional_kwargs,
      response_metadata: this.response_metadata,
      name: this.name ?? null,
      id: this.id ?? null,
      ...this.extraJSON(),
    };
  }
}

/**
 * A message from the user.
 * @example new HumanMessage('What is Runnel?')
 */
export class HumanMessage extends BaseMessage {
  readonly type = 'human';
}

/**
 * Instructions for the model.
 * @example new SystemMessage('You are terse.')
 */
export class SystemMessage extends BaseMessage {
  readonly type = 'system';
}

/** Fields of a {@link ToolMessage}. */
export interface ToolMessageFields extends MessageFields {
  tool_call_id: string;
  artifact?: unknown;
  status?: 'success' | 'error';
}

/**
 * A tool's result, answering the tool call with `tool_call_id`.
 * @example new ToolMessage({ content: '42', tool_call_id: 'call_1' })
 */
export class ToolMessage extends BaseMessage {
  readonly type = 'tool';
  readonly tool_call_id: string;
  readonly artifact: unknown;
  readonly status: 'success' | 'error';

  constructor(fields: ToolMessageFields) {
    super(fields);
    this.tool_call_id = fields.tool_call_id;
    this.artifact = fields.artifact;
    this.status = fields.status ?? 'success';
  }

  protected override extraJSON(): Record<string, unknown> {
    return { tool_call_id: this.tool_call_id, artifact: this.artifact ?? null, status: this.status };
  }
}

/**
 * A message with an arbitrary role.
 * @example new ChatMessage({ content: 'Too long.', role: 'critic' })
 */
export class ChatMessage extends BaseMessage {
  readonly type = 'chat';
  readonly role: string;

  constructor(fields: MessageFields & { role: string }) {
    super(fields);
    this.role = fields.role;
  }

  protected override extraJSON(): Record<string, unknown> {
    return { role: this.role };
  }
}

/** True when `value` is a message. */
export function isBaseMessage(value: unknown): value is BaseMessage {
  return value instanceof BaseMessage;
}
