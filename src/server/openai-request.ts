/**
 * The body of `POST /v1/chat/completions`, OpenAI's chat-completions request:
 * a zod schema (the route's OpenAPI body comes from it) and the parse that
 * turns a body into a conversation for a chain's messages adapter, or a
 * `RUNNEL_ERR_BODY_INVALID` whose detail item names the field the way
 * OpenAI's `param` does (`messages[1].content`) and says which OpenAI error
 * code fits (`missing_required_parameter`, `invalid_type`, `invalid_value`).
 */
import { z } from 'zod';
import { nestedDeeperThan, RunnelError, type ErrorDetailItem } from '../core/index.js';
import { checkSessionId } from '../history/index.js';
import type { ChatTurn, Conversation } from './registry.js';

const textPart = z.object({ type: z.literal('text'), text: z.string() });
const content = z.union([z.string(), z.array(textPart)], { error: 'expected a string or an array of {"type": "text", "text"} parts' });
/** An assistant's content may also hold its refusal, as OpenAI's answers do: read as its text. */
const refusalPart = z.object({ type: z.literal('refusal'), refusal: z.string() });
const assistantContent = z.union([z.string(), z.array(z.union([textPart, refusalPart]))], {
  error: 'expected a string or an array of {"type": "text", "text"} or {"type": "refusal", "refusal"} parts',
});
// `null` is "not given", as OpenAI reads it: the Python SDK's `message.model_dump()` writes every unset field so.
const name = z.string().nullish().describe('Accepted and ignored.');

const toolCall = z.object({
  id: z.string(),
  type: z.literal('function'),
  function: z.object({ name: z.string(), arguments: z.string().describe('The arguments as a JSON object, encoded as a string') }),
});

const message = z.discriminatedUnion(
  'role',
  [
    z.object({ role: z.literal('system'), content, name }),
    z.object({ role: z.literal('developer'), content, name }).describe('Read as a system message.'),
    z.object({ role: z.literal('user'), content, name }),
    z.object({ role: z.literal('assistant'), content: assistantContent.nullish(), name, tool_calls: z.array(toolCall).nullish(), refusal: z.string().nullish() }),
    z.object({ role: z.literal('tool'), content, tool_call_id: z.string() }),
  ],
  { error: "expected one of 'system', 'developer', 'user', 'assistant', 'tool'" },
);

const functionTool = z.object({
  type: z.literal('function'),
  function: z.object({
    // As OpenAI's API takes them (the providers Runnel calls refuse other names).
    name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'expected 1 to 64 letters, digits, underscores or dashes'),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional().describe('JSON Schema of the arguments'),
    strict: z.boolean().nullish().describe('Accepted and ignored.'),
  }),
});

/** A number from `min` to `max`, said so when it is not. */
const range = (min: number, max: number) => {
  const error = `expected a number from ${min} to ${max}`;
  return z.number({ error }).min(min, error).max(max, error);
};

/**
 * OpenAI's `seed`: any 64-bit integer, which clients draw at random. Not zod's `int()`, whose range is
 * JavaScript's safe integers (±2^53): a seed past it was a 400. A JSON number that large reads as the nearest
 * double, ±2^63 at the ends; ignored, its precision does not matter.
 */
const int64Error = 'expected an integer from -9223372036854775808 to 9223372036854775807';
const int64 = z
  .number({ error: int64Error })
  .min(-(2 ** 63), int64Error)
  .max(2 ** 63, int64Error)
  .refine(Number.isInteger, int64Error)
  .meta({ type: 'integer' });

const ignored = (schema: z.ZodType) => schema.nullish().describe('Accepted and ignored: the chain decides how its model is called.');

/**
 * OpenAI's chat-completions request, as far as Runnel reads it; other fields are accepted and ignored.
 *
 * @example
 * chatCompletionRequestSchema.safeParse({ model: 'joke', messages: [{ role: 'user', content: 'cats' }] }).success // true
 */
export const chatCompletionRequestSchema = z.object({
  model: z.string().min(1).describe("The chain's path without the leading slash (`joke`, `team/summarise`); `GET /v1/models` lists them"),
  messages: z.array(message).min(1).max(1_000).describe('The conversation, oldest first (at most 1,000 messages, as on /ui_stream); the chain reads it through its messages adapter'),
  stream: z.boolean().nullish().describe('Answer with Server-Sent Events of `chat.completion.chunk`'),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
  metadata: z
    .record(z.string(), z.string())
    .nullish()
    .describe('`session_id` names the conversation for chains that keep it on the server (`chat`); scoped to the caller, like `session_id` on /invoke'),
  tools: z.array(functionTool).nullish().describe('Function tools, for chains that take them; others answer 400 `tools_not_supported`'),
  tool_choice: z
    .union([z.enum(['auto', 'none']), z.enum(['required']), z.object({ type: z.literal('function'), function: z.object({ name: z.string() }) })])
    .nullish()
    .describe("`auto` (default) or `none` (the chain gets no tools); `required` and a named function are refused: the chain decides whether it calls a tool"),
  n: z.number().int().min(1).max(1).nullish().describe('Only 1'),
  // Ignored, but held to OpenAI's ranges: a value OpenAI would refuse is a client's mistake, said as OpenAI says it.
  temperature: ignored(range(0, 2)),
  top_p: ignored(range(0, 1)),
  max_tokens: ignored(z.number({ error: 'expected an integer of at least 1' }).int('expected an integer of at least 1').min(1, 'expected an integer of at least 1')),
  max_completion_tokens: ignored(z.number({ error: 'expected an integer of at least 1' }).int('expected an integer of at least 1').min(1, 'expected an integer of at least 1')),
  presence_penalty: ignored(range(-2, 2)),
  frequency_penalty: ignored(range(-2, 2)),
  stop: ignored(z.union([z.string(), z.array(z.string()).max(4)], { error: 'expected a string or an array of at most 4 strings' })),
  seed: ignored(int64),
  user: ignored(z.string()),
  parallel_tool_calls: ignored(z.boolean()),
  // What no chain gives is refused, not ignored: a client that asked for JSON, log probabilities or audio would
  // take the plain text answer for what it asked for.
  response_format: z
    .object({ type: z.string() })
    .loose()
    .nullish()
    .describe('Only `{"type": "text"}`: the chain decides the form of its answer; `json_object` and `json_schema` are refused (400 `unsupported_value`)'),
  logprobs: z.boolean().nullish().describe('Only `false`: answers carry no log probabilities (`logprobs` is `null`)'),
  top_logprobs: z.number().int().min(0).max(20).nullish().describe('Only 0'),
  modalities: z.array(z.string()).nullish().describe('Only `["text"]`'),
  audio: z.object({}).loose().nullish().describe('Refused: answers are text'),
});

/** The parameter of `request` that asks for what a chain's answer cannot be (JSON mode, log probabilities, audio), and why. */
function unsupportedAsk(request: z.infer<typeof chatCompletionRequestSchema>): { param: string; message: string } | undefined {
  const format = request.response_format?.type;
  if (format !== undefined && format !== 'text') {
    return { param: 'response_format', message: `response_format ${JSON.stringify(format)} is not supported: the chain decides the form of its answer (only "text" is taken)` };
  }
  if (request.logprobs === true) return { param: 'logprobs', message: 'logprobs is not supported: answers carry no log probabilities' };
  if ((request.top_logprobs ?? 0) > 0) return { param: 'top_logprobs', message: 'top_logprobs is not supported: answers carry no log probabilities' };
  if (request.modalities?.some((modality) => modality !== 'text') === true) return { param: 'modalities', message: 'Only text answers are supported (modalities ["text"])' };
  if (request.audio != null) return { param: 'audio', message: 'audio is not supported: answers are text' };
  return undefined;
}

/** What a chat-completions request asks for, read from its body. */
export interface ChatCompletionRequest {
  /** The model id: a chain's path without the leading slash. */
  model: string;
  stream: boolean;
  includeUsage: boolean;
  /** The conversation for the adapter (its tools set only when the request offers some and allows their use). */
  conversation: Conversation;
  /** True when the request sent tools (whether or not `tool_choice: none` keeps them from the chain). */
  offersTools: boolean;
}

/**
 * A body error the way OpenAI locates it: `code` fits OpenAI's codes, `loc` is the parameter's path.
 *
 * @example
 * throw bodyError('This model takes no tools', { code: 'tools_not_supported', loc: ['tools'] });
 */
export function bodyError(message: string, item: { code: string; loc: (string | number)[] }): RunnelError {
  const detail: ErrorDetailItem[] = [{ type: item.code, loc: item.loc, msg: message }];
  return new RunnelError('RUNNEL_ERR_BODY_INVALID', message, { detail });
}

/**
 * A location as OpenAI spells a parameter.
 *
 * @example
 * paramOf(['messages', 1, 'content']) // 'messages[1].content'
 */
export function paramOf(loc: readonly (string | number)[]): string {
  return loc.reduce<string>((out, part) => (typeof part === 'number' ? `${out}[${part}]` : out === '' ? part : `${out}.${part}`), '');
}

/**
 * Content parts other than text are refused by name, before the schema's general message could hide which;
 * so is a message that is not an object (`["hi"]` was told its role was wrong).
 */
function checkParts(body: Record<string, unknown>): void {
  if (!Array.isArray(body.messages)) return;
  body.messages.forEach((entry: unknown, i) => {
    if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) {
      throw bodyError(`Invalid 'messages[${i}]': expected an object with a role and content, such as {"role": "user", "content": "..."}`, { code: 'invalid_type', loc: ['messages', i] });
    }
    const { content: parts, role } = entry as { content?: unknown; role?: unknown };
    if (!Array.isArray(parts)) return;
    parts.forEach((part: unknown, j) => {
      const type = (part as { type?: unknown } | null)?.type;
      if (type !== 'text' && !(type === 'refusal' && role === 'assistant') && typeof type === 'string') {
        throw bodyError(`Only text content parts are supported: messages[${i}].content[${j}] is ${JSON.stringify(type)}. Send images, audio and files' contents as text, or use a chain that takes them.`, {
          code: 'invalid_value',
          loc: ['messages', i, 'content', j, 'type'],
        });
      }
    });
  });
}

/** The first problem zod found, as OpenAI words it. */
function firstIssue(error: z.ZodError, body: unknown): RunnelError {
  const issue = error.issues[0] as z.core.$ZodIssue;
  const loc = issue.path.map((part) => (typeof part === 'number' ? part : String(part)));
  const param = paramOf(loc);
  // Missing, whatever the schema's own message says (a union's names the shapes it takes): the field is not in
  // the object the client sent.
  if ((issue.code === 'invalid_type' && issue.message.endsWith('received undefined')) || absent(body, issue.path)) {
    return bodyError(`Missing required parameter: '${param}'.`, { code: 'missing_required_parameter', loc });
  }
  const kind = issue.code === 'invalid_type' || issue.code === 'invalid_union' ? 'invalid_type' : 'invalid_value';
  return bodyError(`Invalid '${param}': ${issue.message}`, { code: kind, loc });
}

/** Whether `path` names a field missing from an object of `value` (its parent is there, and an object). */
function absent(value: unknown, path: readonly PropertyKey[]): boolean {
  if (path.length === 0) return false;
  let parent: unknown = value;
  for (const part of path.slice(0, -1)) {
    if (parent === null || typeof parent !== 'object') return false;
    parent = (parent as Record<PropertyKey, unknown>)[part];
  }
  const last = path.at(-1) as PropertyKey;
  return parent !== null && typeof parent === 'object' && !Array.isArray(parent) && !Object.hasOwn(parent, last);
}

const textOf = (value: z.infer<typeof assistantContent> | null | undefined): string =>
  value === null || value === undefined ? '' : typeof value === 'string' ? value : value.map((part) => (part.type === 'text' ? part.text : part.refusal)).join('');

/** An assistant turn's tool calls, their JSON arguments parsed. */
function toolCallsOf(calls: z.infer<typeof toolCall>[], index: number): NonNullable<ChatTurn['tool_calls']> {
  return calls.map((call, j) => {
    let args: unknown;
    try {
      // Nested past the limit: refused as an argument that is not JSON (a value thousands deep would overflow
      // whatever walks it later).
      // No arguments at all (`""`, which some providers and clients send for a tool without parameters, and
      // OpenAI takes) is the empty object.
      const text = call.function.arguments;
      args = text.trim() === '' ? {} : nestedDeeperThan(text) ? undefined : JSON.parse(text);
    } catch {
      args = undefined;
    }
    if (args === null || typeof args !== 'object' || Array.isArray(args)) {
      throw bodyError(`Invalid 'messages[${index}].tool_calls[${j}].function.arguments': expected a JSON object encoded as a string`, {
        code: 'invalid_value',
        loc: ['messages', index, 'tool_calls', j, 'function', 'arguments'],
      });
    }
    return { id: call.id, name: call.function.name, args: args as Record<string, unknown> };
  });
}

/**
 * The turns of a conversation: developer messages read as system, text parts joined, tool calls parsed. A tool
 * message answers a call of the assistant message it follows (other tool messages between), as OpenAI requires:
 * one that answers no call there is refused here, the client's mistake, not sent on for the provider to refuse
 * (a 502 then).
 */
function turnsOf(messages: z.infer<typeof message>[]): ChatTurn[] {
  // The ids of the calls the latest assistant message made, while only tool messages follow it.
  let calls: ReadonlySet<string> = new Set();
  return messages.map((m, index): ChatTurn => {
    if (m.role !== 'tool') calls = new Set(m.role === 'assistant' ? (m.tool_calls ?? []).map((call) => call.id) : []);
    else if (!calls.has(m.tool_call_id)) {
      throw bodyError(`Invalid parameter: messages[${index}] with role 'tool' must answer a tool call of the assistant message before it, and none there has id ${JSON.stringify(m.tool_call_id)}.`, {
        code: 'invalid_value',
        loc: ['messages', index, 'tool_call_id'],
      });
    }
    switch (m.role) {
      case 'system':
      case 'developer':
        return { role: 'system', text: textOf(m.content) };
      case 'user':
        return { role: 'user', text: textOf(m.content) };
      case 'assistant':
        return { role: 'assistant', text: textOf(m.content), ...(m.tool_calls?.length ? { tool_calls: toolCallsOf(m.tool_calls, index) } : {}) };
      case 'tool':
        return { role: 'tool', text: textOf(m.content), tool_call_id: m.tool_call_id };
    }
  });
}

/**
 * Reads a chat-completions body: what it asks for, or `RUNNEL_ERR_BODY_INVALID` naming the first field
 * that is wrong. Unknown fields are accepted and ignored.
 *
 * @example
 * const { model, conversation, stream } = parseChatCompletionRequest({ model: 'joke', messages: [{ role: 'user', content: 'cats' }] });
 * // model 'joke', conversation.turns [{ role: 'user', text: 'cats' }], stream false
 */
export function parseChatCompletionRequest(body: unknown): ChatCompletionRequest {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw bodyError(body === undefined ? 'The body must be JSON: a chat-completions request' : 'The body must be a JSON object: a chat-completions request', { code: 'invalid_type', loc: [] });
  }
  checkParts(body as Record<string, unknown>);
  const parsed = chatCompletionRequestSchema.safeParse(body);
  if (!parsed.success) throw firstIssue(parsed.error, body);
  const request = parsed.data;
  const choice = request.tool_choice;
  if (choice === 'required' || (typeof choice === 'object' && choice !== null)) {
    throw bodyError("tool_choice must be 'auto' or 'none': the chain decides whether it calls a tool, so it cannot be made to", { code: 'invalid_value', loc: ['tool_choice'] });
  }
  const asked = unsupportedAsk(request);
  if (asked !== undefined) throw bodyError(asked.message, { code: 'unsupported_value', loc: [asked.param] });
  // As OpenAI answers it: a client that asks for usage in a stream it did not ask for would wait for a chunk.
  if (request.stream_options != null && request.stream !== true) {
    throw bodyError("The 'stream_options' parameter is only allowed when 'stream' is enabled.", { code: 'invalid_value', loc: ['stream_options'] });
  }
  const sessionId = request.metadata?.session_id;
  if (sessionId !== undefined) {
    try {
      checkSessionId(sessionId);
    } catch {
      throw bodyError("Invalid 'metadata.session_id': 1-128 letters, digits or _ . : -", { code: 'invalid_value', loc: ['metadata', 'session_id'] });
    }
  }
  // Two tools of one name: the model's call of it could mean either (Anthropic's API refuses them; so does Runnel).
  const named = new Map<string, number>();
  (request.tools ?? []).forEach(({ function: f }, i) => {
    const first = named.get(f.name);
    if (first !== undefined) throw bodyError(`Invalid 'tools[${i}].function.name': tools[${first}] is named '${f.name}' too; tool names must be unique`, { code: 'invalid_value', loc: ['tools', i, 'function', 'name'] });
    named.set(f.name, i);
  });
  const tools = (request.tools ?? []).map(({ function: f }) => ({
    name: f.name,
    ...(f.description === undefined ? {} : { description: f.description }),
    ...(f.parameters === undefined ? {} : { parameters: f.parameters }),
  }));
  const conversation: Conversation = { id: sessionId, turns: turnsOf(request.messages), ...(tools.length > 0 && choice !== 'none' ? { tools } : {}) };
  return {
    model: request.model,
    stream: request.stream === true,
    includeUsage: request.stream_options?.include_usage === true,
    conversation,
    offersTools: tools.length > 0,
  };
}
