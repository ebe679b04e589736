/**
 * The OpenAPI document's frame (info, servers, security schemes, the error
 * schema) and each chain's named components: `JokeInvokeRequest`,
 * `JokeInvokeResponse`, `JokeBatchRequest`, ... The routes reference them,
 * and @fastify/swagger assembles the document.
 */
import { errorCodes, type JsonSchema } from '../core/index.js';
import type { ServerConfig } from './config.js';
import type { PreparedChain } from './prepared.js';

/** The document's frame. */
export function openApiDocument(config: ServerConfig): Record<string, unknown> {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Runnel',
      version: '0.1.0',
      description:
        "LLM chains served over HTTP with LangServe's wire protocol. Every chain has /invoke, /batch, /stream, /stream_log, " +
        '/stream_events (Server-Sent Events) and its JSON Schemas. Errors carry a stable `code`.',
    },
    components: {
      ...(config.apiKeys.length > 0
        ? {
            securitySchemes: {
              bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key from RUNNEL_API_KEYS' },
              apiKeyHeader: { type: 'apiKey', in: 'header', name: 'x-api-key' },
            },
          }
        : {}),
    },
    ...(config.apiKeys.length > 0 ? { security: [{ bearerAuth: [] }, { apiKeyHeader: [] }] } : {}),
  };
}

/** The error body, with every code of the registry. */
export const errorSchema: JsonSchema = {
  $id: 'RunnelError',
  title: 'RunnelError',
  type: 'object',
  required: ['code', 'message', 'detail'],
  properties: {
    code: { type: 'string', enum: Object.keys(errorCodes) },
    message: { type: 'string' },
    detail: {
      description:
        "LangServe's `detail`: for a request error (400, 408, 413, 414, 422, 431) a list of `{type, loc, msg}` — `loc` is where the problem is: within the input (`['topic']`), a batch (`['inputs', 2, 'topic']`) or the config (`['config', 'configurable', 'session_id']`); for every other status a string.",
      oneOf: [
        {
          type: 'array',
          items: {
            type: 'object',
            required: ['type', 'loc', 'msg'],
            properties: { type: { type: 'string' }, loc: { type: 'array', items: { type: ['string', 'integer'] } }, msg: { type: 'string' } },
          },
        },
        { type: 'string' },
      ],
    },
  },
};

const frameSchema = (name: string, data: JsonSchema): JsonSchema => ({
  type: 'string',
  description: `Server-Sent Events, each frame \`event: NAME\\r\\ndata: JSON\\r\\n\\r\\n\`. ${name}`,
  contentMediaType: 'text/event-stream',
  'x-frame-data': data,
});

/**
 * A chain's draft-07 schema in the dialect of OpenAPI 3.1, JSON Schema 2020-12: a tuple's `items: [...]` is
 * `prefixItems`, and its `additionalItems` is `items` (a 2020-12 validator refuses the draft-07 forms).
 */
export function inDialect2020(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(inDialect2020);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  const source = schema as Record<string, unknown>;
  for (const [key, value] of Object.entries(source)) {
    // A property named `items` (under `properties`, or a dependency's) is a name, not a keyword: only the
    // values are converted.
    if (['properties', 'patternProperties', '$defs', 'definitions', 'dependencies', 'dependentSchemas', 'dependentRequired'].includes(key)) {
      out[key] = value !== null && typeof value === 'object' ? Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, inDialect2020(sub)])) : value;
    } else if (key === 'items' && Array.isArray(value)) {
      out.prefixItems = value.map(inDialect2020);
      if (source.additionalItems !== undefined) out.items = inDialect2020(source.additionalItems);
    } else if (key === 'additionalItems') {
      // Without a tuple, draft-07 ignores it; with one, it became `items` above.
    } else if (key === 'enum' || key === 'const' || key === 'default' || key === 'examples' || key === 'required') {
      out[key] = value;
    } else {
      out[key] = inDialect2020(value);
    }
  }
  return out;
}

function strip(schema: JsonSchema): JsonSchema {
  const { title: _title, $schema: _s, ...rest } = schema;
  return inDialect2020(rest) as JsonSchema;
}

/**
 * A config schema for the request bodies: what it requires is left to the description. The `/c/{config_hash}/`
 * routes share these bodies, and there a required field (a chat's `session_id`) may come from the hash instead.
 */
function optionalConfig(schema: JsonSchema): JsonSchema {
  const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
  const configurable = properties.configurable;
  const needed = (configurable?.required as string[] | undefined) ?? [];
  if (schema.required === undefined && needed.length === 0) return schema;
  const { required: _required, ...rest } = schema;
  const { required: _inner, ...openConfigurable } = configurable ?? {};
  return {
    ...rest,
    description: `Required: ${needed.map((key) => `\`configurable.${key}\``).join(', ')} — in this body, or in the \`/c/{config_hash}/\` of the URL.`,
    properties: { ...properties, ...(configurable === undefined ? {} : { configurable: openConfigurable }) },
  };
}

/** The named components of one chain. */
export function chainComponents(chain: PreparedChain): JsonSchema[] {
  const n = chain.name;
  const input = strip(chain.inputSchema);
  const output = strip(chain.outputSchema);
  const config = optionalConfig(strip(chain.configSchema));
  const filters = Object.fromEntries(
    ['include_names', 'include_types', 'include_tags', 'exclude_names', 'exclude_types', 'exclude_tags'].map((k) => [k, { anyOf: [{ type: 'array', items: { type: 'string' } }, { type: 'null' }] }]),
  );
  const onDisconnect = {
    type: 'string',
    enum: ['cancel', 'continue'],
    default: 'cancel',
    description:
      '`continue` makes the run durable: it goes on if this connection drops, every frame carries an `id`, and a client rejoins through `runs/{run_id}/stream` with `Last-Event-ID` (503 `RUNNEL_ERR_REDIS_UNAVAILABLE` when it cannot be stored, before any frame)',
  };
  // Any JSON: the LangChain JS client sends a list on /batch (one per input).
  const kwargs = { description: 'Accepted and ignored.' };
  const runMeta = { type: 'object', required: ['run_id', 'feedback_tokens'], properties: { run_id: { type: 'string', format: 'uuid' }, feedback_tokens: { type: 'array', maxItems: 0 } } };
  return [
    { $id: `${n}Input`, ...input },
    { $id: `${n}Output`, ...output },
    { $id: `${n}Config`, ...config },
    { $id: `${n}InvokeRequest`, type: 'object', required: ['input'], properties: { input: { $ref: `${n}Input#` }, config: { $ref: `${n}Config#` }, kwargs } },
    { $id: `${n}InvokeResponse`, type: 'object', required: ['output', 'metadata'], properties: { output: { $ref: `${n}Output#` }, metadata: runMeta } },
    {
      $id: `${n}BatchRequest`,
      type: 'object',
      required: ['inputs'],
      properties: {
        inputs: { type: 'array', items: { $ref: `${n}Input#` } },
        config: { anyOf: [{ $ref: `${n}Config#` }, { type: 'array', items: { $ref: `${n}Config#` } }] },
        kwargs,
      },
    },
    {
      $id: `${n}BatchResponse`,
      type: 'object',
      required: ['output', 'metadata'],
      properties: {
        output: { type: 'array', items: { $ref: `${n}Output#` } },
        metadata: { type: 'object', properties: { run_ids: { type: 'array', items: { type: 'string' } }, responses: { type: 'array', items: runMeta } } },
      },
    },
    { $id: `${n}StreamRequest`, type: 'object', required: ['input'], properties: { input: { $ref: `${n}Input#` }, config: { $ref: `${n}Config#` }, kwargs, on_disconnect: onDisconnect } },
    { $id: `${n}StreamLogRequest`, type: 'object', required: ['input'], properties: { input: { $ref: `${n}Input#` }, config: { $ref: `${n}Config#` }, kwargs, ...filters } },
    {
      $id: `${n}StreamEventsRequest`,
      type: 'object',
      required: ['input'],
      properties: { input: { $ref: `${n}Input#` }, config: { $ref: `${n}Config#` }, kwargs, ...filters, on_disconnect: onDisconnect },
    },
  ];
}

/** The event-stream responses of the three streaming routes. */
export const streamResponses = {
  stream: frameSchema('`event: metadata` {"run_id"} before the first chunk, one `event: data` per output chunk, then `event: end` (or one `event: error` {"status_code", "message", "code"}).', { description: 'an output chunk' }),
  stream_log: frameSchema('`event: data` frames of {"ops": [JSON Patch operations]} building {id, streamed_output, final_output, logs, name, type}; then `event: end`.', {
    type: 'object',
    properties: { ops: { type: 'array', items: { type: 'object', properties: { op: { type: 'string' }, path: { type: 'string' }, value: {} } } } },
  }),
  stream_events: frameSchema('`event: data` frames of {"event", "name", "run_id", "parent_ids", "tags", "metadata", "data"}; then `event: end`.', {
    type: 'object',
    properties: { event: { type: 'string' }, name: { type: 'string' }, run_id: { type: 'string' }, parent_ids: { type: 'array', items: { type: 'string' } }, tags: { type: 'array', items: { type: 'string' } }, metadata: { type: 'object' }, data: { type: 'object' } },
  }),
};
