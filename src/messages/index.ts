/** Messages: classes, JSON schemas, coercion and chunk merging. */
export { BaseMessage, HumanMessage, SystemMessage, ToolMessage, ChatMessage, isBaseMessage, MESSAGE_TYPES, type MessageType, type ToolMessageFields } from './base.js';
export { addUsage, AIMessage, AIMessageChunk, continuesToolCall, mergeToolCallChunks, parseToolCallChunks, type AIMessageFields, type AIMessageChunkFields } from './ai.js';
export {
  coerceMessage,
  coerceMessages,
  contentSchema,
  messageLikeSchema,
  messagesSchema,
  typedMessageSchema,
  aiMessageOutputSchema,
  aiMessageChunkOutputSchema,
  type MessageLike,
} from './schema.js';
export { parsePartialJson } from './partial-json.js';
export type * from './types.js';
