/** The plain data a message is made of, in LangServe's JSON field names. */
import type { TokenUsage } from '../core/index.js';

/** A text part of a message's content. */
export interface TextBlock {
  type: 'text';
  text: string;
}

/** An image part of a message's content: a URL or a `data:` URL. */
export interface ImageBlock {
  type: 'image_url';
  image_url: string | { url: string; detail?: string };
}

/** A content part; providers may add kinds of their own. */
export type ContentBlock = TextBlock | ImageBlock | ({ type: string } & Record<string, unknown>);

/** A message's content: a string, or a list of parts. */
export type MessageContent = string | ContentBlock[];

/** A tool call the model made, with parsed arguments. */
export interface ToolCall {
  name: string;
  args: Record<string, unknown>;
  id?: string | undefined;
  type?: 'tool_call';
}

/** A tool call whose arguments could not be parsed. */
export interface InvalidToolCall {
  name?: string | undefined;
  args?: string | undefined;
  id?: string | undefined;
  error?: string | undefined;
  type?: 'invalid_tool_call';
}

/** A piece of a tool call as it streams; pieces with the same `index` add up. */
export interface ToolCallChunk {
  name?: string | undefined;
  args?: string | undefined;
  id?: string | undefined;
  index?: number | undefined;
  type?: 'tool_call_chunk';
}

/** Token counts of one model call (the core's {@link TokenUsage}, under LangChain's name). */
export type UsageMetadata = TokenUsage;

/** Fields every message has. */
export interface MessageFields {
  content: MessageContent;
  additional_kwargs?: Record<string, unknown> | undefined;
  response_metadata?: Record<string, unknown> | undefined;
  name?: string | undefined;
  id?: string | undefined;
}
