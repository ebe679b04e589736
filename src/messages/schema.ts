/**
 * Messages as JSON: zod schemas of every shape Runnel accepts (LangServe's
 * typed messages, the JS client's extras, OpenAI-style `{role, content}`,
 * `["human", "hi"]` tuples, plain strings) and the coercion of such data into
 * message objects. Data is parsed and validated, never revived: a payload in
 * LangChain's `lc` constructor format is simply invalid.
 */
import { z } from 'zod';
import { nestedDeeperThan, RunnelError } from '../core/index.js';
import { AIMessage, AIMessageChunk } from './ai.js';
import { BaseMessage, ChatMessage, HumanMessage, SystemMessage, ToolMessage } from './base.js';
import type { MessageContent } from './types.js';

const textBlock = z.object({ type: z.literal('text'), text: z.string() }).loose();
const imageBlock = z
  .object({
    type: z.literal('image_url'),
    image_url: z.union([z.string(), z.object({ url: z.string(), detail: z.string().optional() }).loose()]),
  })
  .loose();
const otherBlock = z.object({ type: z.string() }).loose();

/** A message's content: a string or a list of parts. */
export const contentSchema = z.union([z.string(), z.array(z.union([textBlock, imageBlock, otherBlock]))]);

const record = z.record(z.string(), z.unknown());
const common = {
  content: contentSchema,
  additional_kwargs: record.optional(),
  response_metadata: record.optional(),
  name: z.string().nullish(),
  id: z.string().nullish(),
  example: z.boolean().optional(),
};

const toolCallSchema = z.object({
  name: z.string(),
  args: record,
  id: z.string().nullish(),
  type: z.literal('tool_call').optional(),
});
const invalidToolCallSchema = z.object({
  name: z.string().nullish(),
  args: z.string().nullish(),
  id: z.string().nullish(),
  error: z.string().nullish(),
  type: z.literal('invalid_tool_call').optional(),
});
const toolCallChunkSchema = z.object({
  name: z.string().nullish(),
  args: z.string().nullish(),
  id: z.string().nullish(),
  index: z.number().int().nullish(),
  type: z.literal('tool_call_chunk').optional(),
});
const usageSchema = z.object({ input_tokens: z.number(), output_tokens: z.number(), total_tokens: z.number() }).loose();

const humanSchema = z.object({ type: z.enum(['human', 'HumanMessageChunk']), ...common }).loose();
const systemSchema = z.object({ type: z.enum(['system', 'SystemMessageChunk']), ...common }).loose();
const aiSchema = z
  .object({
    type: z.enum(['ai', 'AIMessageChunk']),
    ...common,
    tool_calls: z.array(toolCallSchema).optional(),
    invalid_tool_calls: z.array(invalidToolCallSchema).optional(),
    tool_call_chunks: z.array(toolCallChunkSchema).optional(),
    usage_metadata: usageSchema.nullish(),
  })
  .loose();
const toolSchema = z
  .object({
    type: z.enum(['tool', 'ToolMessageChunk']),
    ...common,
    tool_call_id: z.string(),
    artifact: z.unknown().optional(),
    status: z.enum(['success', 'error']).optional(),
  })
  .loose();
const chatSchema = z.object({ type: z.enum(['chat', 'generic', 'ChatMessageChunk']), ...common, role: z.string() }).loose();

/** A message in LangServe's JSON (`type` tags), as clients send it. */
export const typedMessageSchema = z.discriminatedUnion('type', [humanSchema, systemSchema, aiSchema, toolSchema, chatSchema]);

const roleSchema = z
  .object({
    role: z.enum(['user', 'human', 'assistant', 'ai', 'system', 'developer', 'tool']),
    content: contentSchema.nullable(),
    name: z.string().optional(),
    tool_call_id: z.string().optional(),
    tool_calls: z.array(z.unknown()).optional(),
  })
  .loose();

const tupleSchema = z.tuple([z.enum(['human', 'user', 'ai', 'assistant', 'system', 'developer']), z.string()]);

/** Anything accepted where one message is expected. */
export const messageLikeSchema = z.union([typedMessageSchema, roleSchema, tupleSchema, z.string()]);

/** A list of messages, as a prompt placeholder or a chat model accepts it. */
export const messagesSchema = z.array(messageLikeSchema);

/**
 * The JSON of an AI message as Runnel sends it; `type` is an enum with `ai`,
 * which LangServe's chat playground looks for.
 */
export const aiMessageOutputSchema = z.object({
  type: z.enum(['ai']),
  content: contentSchema,
  additional_kwargs: record,
  response_metadata: record,
  name: z.string().nullable(),
  id: z.string().nullable(),
  tool_calls: z.array(toolCallSchema),
  invalid_tool_calls: z.array(invalidToolCallSchema),
  usage_metadata: usageSchema.nullable(),
});

/** The JSON of an AI message chunk, as `/stream` sends each one. */
export const aiMessageChunkOutputSchema = aiMessageOutputSchema.extend({
  type: z.enum(['AIMessageChunk']),
  tool_call_chunks: z.array(toolCallChunkSchema),
});

/** A message is a "message-like" value: a message object or any accepted JSON shape. */
export type MessageLike = BaseMessage | z.input<typeof messageLikeSchema>;

const undef = <T>(value: T | null | undefined): T | undefined => (value === null ? undefined : value);

function fromTyped(data: z.infer<typeof typedMessageSchema>): BaseMessage {
  const fields = {
    content: data.content as MessageContent,
    additional_kwargs: data.additional_kwargs,
    response_metadata: data.response_metadata,
    name: undef(data.name),
    id: undef(data.id),
  };
  switch (data.type) {
    case 'human':
    case 'HumanMessageChunk':
      return new HumanMessage(fields);
    case 'system':
    case 'SystemMessageChunk':
      return new SystemMessage(fields);
    case 'tool':
    case 'ToolMessageChunk':
      return new ToolMessage({ ...fields, tool_call_id: data.tool_call_id, artifact: data.artifact, status: data.status });
    case 'chat':
    case 'generic':
    case 'ChatMessageChunk':
      return new ChatMessage({ ...fields, role: data.role });
    default: {
      const ai = {
        ...fields,
        tool_calls: data.tool_calls?.map((call) => ({ name: call.name, args: call.args, id: undef(call.id) })),
        invalid_tool_calls: data.invalid_tool_calls?.map((call) => ({
          name: undef(call.name),
          args: undef(call.args),
          id: undef(call.id),
          error: undef(call.error),
        })),
        usage_metadata: undef(data.usage_metadata) as AIMessage['usage_metadata'],
      };
      if (data.type === 'AIMessageChunk') {
        return new AIMessageChunk({
          ...ai,
          tool_call_chunks: data.tool_call_chunks?.map((chunk) => ({
            name: undef(chunk.name),
            args: undef(chunk.args),
            id: undef(chunk.id),
            index: undef(chunk.index),
          })),
        });
      }
      return new AIMessage(ai);
    }
  }
}

function fromRole(data: z.infer<typeof roleSchema>): BaseMessage {
  const content = (data.content ?? '') as MessageContent;
  switch (data.role) {
    case 'user':
    case 'human':
      return new HumanMessage({ content, name: data.name });
    case 'system':
    case 'developer':
      return new SystemMessage({ content, name: data.name });
    case 'tool':
      return new ToolMessage({ content, tool_call_id: data.tool_call_id ?? '', name: data.name });
    default: {
      const toolCalls = (data.tool_calls ?? []).flatMap((call) => {
        const parsed = z
          .object({ id: z.string().optional(), function: z.object({ name: z.string(), arguments: z.string() }) })
          .safeParse(call);
        if (!parsed.success) return [];
        // Arguments nested past the limit are refused as unparseable ones are: a value thousands deep would
        // overflow whatever walks it later (the model cache's key).
        if (nestedDeeperThan(parsed.data.function.arguments)) return [];
        try {
          return [{ name: parsed.data.function.name, args: JSON.parse(parsed.data.function.arguments) as Record<string, unknown>, id: parsed.data.id }];
        } catch {
          return [];
        }
      });
      return new AIMessage({ content, name: data.name, tool_calls: toolCalls });
    }
  }
}

function fromTuple([role, content]: z.infer<typeof tupleSchema>): BaseMessage {
  if (role === 'human' || role === 'user') return new HumanMessage(content);
  if (role === 'ai' || role === 'assistant') return new AIMessage(content);
  return new SystemMessage(content);
}

/**
 * Turns a message-like value into a message, or throws
 * `RUNNEL_ERR_INPUT_INVALID` with the problems located under `loc`.
 *
 * @example
 * coerceMessage({ role: 'user', content: 'hi' }) // HumanMessage
 * coerceMessage(['ai', 'hello'])                 // AIMessage
 */
export function coerceMessage(value: unknown, loc: (string | number)[] = []): BaseMessage {
  if (value instanceof BaseMessage) return value;
  if (typeof value === 'string') return new HumanMessage(value);
  const typed = typedMessageSchema.safeParse(value);
  if (typed.success) return fromTyped(typed.data);
  const role = roleSchema.safeParse(value);
  if (role.success) return fromRole(role.data);
  const tuple = tupleSchema.safeParse(value);
  if (tuple.success) return fromTuple(tuple.data);
  const hasType = value !== null && typeof value === 'object' && 'type' in value;
  const issues = hasType ? typed.error.issues : [{ code: 'invalid_type', path: [], message: 'Expected a message: {type, content}, {role, content}, [role, content] or a string' }];
  throw new RunnelError('RUNNEL_ERR_INPUT_INVALID', `Invalid message${loc.length > 0 ? ` at ${loc.join('.')}` : ''}: ${issues[0]?.message ?? 'invalid'}`, {
    detail: issues.map((issue) => ({ type: issue.code, loc: [...loc, ...issue.path.map((p) => (typeof p === 'number' ? p : String(p)))], msg: issue.message })),
  });
}

/** Turns a list of message-likes into messages (see {@link coerceMessage}). */
export function coerceMessages(values: unknown, loc: (string | number)[] = []): BaseMessage[] {
  if (!Array.isArray(values)) {
    throw new RunnelError('RUNNEL_ERR_INPUT_INVALID', `Expected a list of messages${loc.length > 0 ? ` at ${loc.join('.')}` : ''}`, {
      detail: [{ type: 'list_type', loc, msg: 'Expected a list of messages' }],
    });
  }
  return values.map((value, index) => coerceMessage(value, [...loc, index]));
}
