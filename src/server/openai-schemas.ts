/**
 * The OpenAPI components of the OpenAI-compatible routes: the request (from
 * its zod schema, which also parses it), the answers and the error shape.
 * `buildApp` adds them to the document; `routes/openai.ts` refers to them.
 */
import { toJsonSchema, type JsonSchema } from '../core/index.js';
import { openAIErrorSchema } from './openai-errors.js';
import { chatCompletionRequestSchema } from './openai-request.js';

const usage: JsonSchema = {
  type: 'object',
  description: "Tokens the chain's model calls spent at their provider for this answer (0 when none reported any: no model, or a cached answer)",
  required: ['prompt_tokens', 'completion_tokens', 'total_tokens'],
  properties: {
    prompt_tokens: { type: 'integer' },
    completion_tokens: { type: 'integer' },
    total_tokens: { type: 'integer' },
    prompt_tokens_details: {
      type: 'object',
      description: 'When a model call reported it: the prompt tokens its provider read from its prompt cache',
      properties: { cached_tokens: { type: 'integer' } },
    },
    completion_tokens_details: {
      type: 'object',
      description: 'When a model call reported it: the completion tokens its model spent reasoning',
      properties: { reasoning_tokens: { type: 'integer' } },
    },
  },
};

const toolCall: JsonSchema = {
  type: 'object',
  required: ['id', 'type', 'function'],
  properties: {
    id: { type: 'string' },
    type: { type: 'string', enum: ['function'] },
    function: { type: 'object', required: ['name', 'arguments'], properties: { name: { type: 'string' }, arguments: { type: 'string', description: 'JSON text' } } },
  },
};

const head = {
  id: { type: 'string', description: '`chatcmpl-` and the run id' },
  created: { type: 'integer', description: 'Unix seconds' },
  model: { type: 'string' },
  system_fingerprint: { type: 'null' },
};

const finishReason = { type: ['string', 'null'], enum: ['stop', 'length', 'tool_calls', 'content_filter', null] };

/** The components, each with its `$id`. */
export const openAIComponents: JsonSchema[] = [
  { $id: 'OpenAIChatCompletionRequest', ...toJsonSchema(chatCompletionRequestSchema, { io: 'input' }), title: 'OpenAIChatCompletionRequest' },
  {
    $id: 'OpenAIChatCompletion',
    title: 'OpenAIChatCompletion',
    type: 'object',
    required: ['id', 'object', 'created', 'model', 'choices', 'usage'],
    properties: {
      ...head,
      object: { type: 'string', enum: ['chat.completion'] },
      choices: {
        type: 'array',
        items: {
          type: 'object',
          required: ['index', 'message', 'finish_reason', 'logprobs'],
          properties: {
            index: { type: 'integer' },
            message: {
              type: 'object',
              required: ['role', 'content', 'refusal'],
              properties: {
                role: { type: 'string', enum: ['assistant'] },
                content: { type: ['string', 'null'], description: "The chain's answer as text: a string output, a message's text, or other outputs as JSON" },
                refusal: { type: 'null' },
                tool_calls: { type: 'array', items: toolCall, description: 'Only from chains that take the client\'s tools' },
              },
            },
            finish_reason: finishReason,
            logprobs: { type: 'null' },
          },
        },
      },
      usage,
    },
  },
  {
    $id: 'OpenAIChatCompletionChunk',
    title: 'OpenAIChatCompletionChunk',
    type: 'object',
    description:
      'One `data:` frame of a streamed answer. First `delta: {role: "assistant", content: ""}`, then `{content}` (and `{tool_calls}`) deltas, then an empty delta with `finish_reason`, then — with `stream_options.include_usage` — a chunk with `choices: []` and `usage`, then `data: [DONE]`. A failure after the stream started is one frame `{"error": {...}}` (OpenAIError), and the stream ends.',
    required: ['id', 'object', 'created', 'model', 'choices'],
    properties: {
      ...head,
      object: { type: 'string', enum: ['chat.completion.chunk'] },
      choices: {
        type: 'array',
        items: {
          type: 'object',
          required: ['index', 'delta', 'finish_reason'],
          properties: {
            index: { type: 'integer' },
            delta: {
              type: 'object',
              properties: {
                role: { type: 'string', enum: ['assistant'] },
                content: { type: 'string' },
                tool_calls: {
                  type: 'array',
                  items: {
                    type: 'object',
                    required: ['index'],
                    properties: { index: { type: 'integer' }, id: { type: 'string' }, type: { type: 'string', enum: ['function'] }, function: { type: 'object', properties: { name: { type: 'string' }, arguments: { type: 'string' } } } },
                  },
                },
              },
            },
            finish_reason: finishReason,
            logprobs: { type: 'null' },
          },
        },
      },
      usage: { anyOf: [usage, { type: 'null' }] },
    },
  },
  {
    $id: 'OpenAIModel',
    title: 'OpenAIModel',
    type: 'object',
    required: ['id', 'object', 'created', 'owned_by'],
    properties: {
      id: { type: 'string', description: "A chain's path without the leading slash" },
      object: { type: 'string', enum: ['model'] },
      created: { type: 'integer', description: 'Unix seconds: when this server started' },
      owned_by: { type: 'string', enum: ['runnel'] },
    },
  },
  { $id: 'OpenAIModelList', title: 'OpenAIModelList', type: 'object', required: ['object', 'data'], properties: { object: { type: 'string', enum: ['list'] }, data: { type: 'array', items: { $ref: 'OpenAIModel#' } } } },
  openAIErrorSchema,
];
