/**
 * A chain's routes, registered under its path (and again under
 * `/{path}/c/{config_hash}/` when config hashes are on). Only enabled
 * endpoints exist; the others answer 404.
 */
import type { FastifyInstance, FastifyPluginAsync, onResponseHookHandler } from 'fastify';
import { errorBody } from '../src/server/http-errors.js';
import { decodeConfigHash } from '../src/server/request.js';
import { streamResponses } from '../src/server/openapi.js';
import type { PreparedChain } from '../src/server/prepared.js';
import { batchHandler } from './batch.js';
import { playgroundRoutes } from './playground.js';
import { invokeHandler } from './invoke.js';
import { schemaHandler } from './schemas.js';
import { streamHandler } from './streams.js';
import { uiResumeHandler, uiStreamHandler } from './ui-stream.js';

export interface ChainRoutesOptions {
  chain: PreparedChain;
  /** True for the `/c/{config_hash}/` copy of the routes. */
  hashed: boolean;
  /** The playground bundle's index.html as it is now (undefined when it is not built). */
  playgroundTemplate?: () => string | undefined;
}

/** The error answers every chain route documents: one body, `RunnelError`, whose `code` says which. */
const errors = {
  '4xx': {
    description:
      'A request error, with a stable `code`: the body, input or config does not validate (422, `detail` lists each problem with its `loc`), a bad config hash (400), no or a wrong API key (401), a body over the limit (413), too many requests (429).',
    $ref: 'RunnelError#',
  },
  '5xx': {
    description:
      'The chain failed: a model provider failed, timed out or rate-limited it (502, 504; 429 is passed on as a 4xx), Redis or Postgres is unavailable or the server is shutting down (503, with `retry-after`), or a bug (500, with a generic message).',
    $ref: 'RunnelError#',
  },
};

/** The error answers of the schema routes (GET): no body to refuse, nothing run. */
const schemaErrors = {
  '4xx': { description: 'A bad config hash (400, on the `/c/{config_hash}/` copies), no or a wrong API key (401), too many requests (429).', $ref: 'RunnelError#' },
  '5xx': { description: 'A bug (500, with a generic message).', $ref: 'RunnelError#' },
};

/** Every method a route does not take answers 405 with `allow`, as LangServe (Starlette) does. */
const OTHER_METHODS = { POST: ['GET', 'PUT', 'PATCH', 'DELETE'], GET: ['POST', 'PUT', 'PATCH', 'DELETE'] } as const;

export const chainRoutes: FastifyPluginAsync<ChainRoutesOptions> = async (app, { chain, hashed, playgroundTemplate }) => {
  const enabled = new Set(chain.spec.enabledEndpoints);
  const n = chain.name;
  const path = chain.spec.path;
  const tags = [path];
  const params = hashed
    ? {
        params: {
          type: 'object',
          properties: {
            config_hash: {
              type: 'string',
              description: 'A config for the run: lz-string `compressToEncodedURIComponent(JSON.stringify(config))`; the body\'s `config` is merged over it.',
            },
          },
        },
      }
    : {};
  countRequests(app, path);
  if (hashed) {
    // The GET routes under the hash check it too (the schemas): one that does not decode is a 400 there as on
    // POST, whose handlers decode it themselves. After authentication and the rate limit (a pre-handler), and
    // not on the public playground pages, which read their hash in the browser: no decoding for a caller
    // without a key.
    app.addHook('preHandler', async (request) => {
      if ((request.method === 'GET' || request.method === 'HEAD') && request.routeOptions.config?.public !== true) {
        decodeConfigHash((request.params as { config_hash?: string }).config_hash);
      }
    });
  }
  const doc = (summary: string, extra: Record<string, unknown>) => ({ schema: { tags, summary: hashed ? `${summary}, with the config of the URL` : summary, ...params, ...extra } });
  const refuseOtherMethods = (url: string, allowed: 'POST' | 'GET'): void => {
    const allow = allowed === 'GET' ? 'GET, HEAD' : 'POST';
    app.route({
      method: [...OTHER_METHODS[allowed]],
      url,
      schema: { hide: true },
      config: { refusesMethod: true },
      handler: async (request, reply) => {
        app.runnel.metrics.error('RUNNEL_ERR_METHOD_NOT_ALLOWED');
        return reply.code(405).header('allow', allow).header('x-request-id', request.id).send(errorBody(405, 'RUNNEL_ERR_METHOD_NOT_ALLOWED', 'Method Not Allowed'));
      },
    });
  };

  if (enabled.has('invoke')) {
    app.post(
      '/invoke',
      doc(`Run ${path} on one input`, { body: { $ref: `${n}InvokeRequest#` }, response: { 200: { description: 'The output, and the run id', $ref: `${n}InvokeResponse#` }, ...errors } }),
      invokeHandler(chain),
    );
    refuseOtherMethods('/invoke', 'POST');
  }
  if (enabled.has('batch')) {
    app.post(
      '/batch',
      doc(`Run ${path} on many inputs`, { body: { $ref: `${n}BatchRequest#` }, response: { 200: { description: 'The outputs in input order, and a run id for each', $ref: `${n}BatchResponse#` }, ...errors } }),
      batchHandler(chain),
    );
    refuseOtherMethods('/batch', 'POST');
  }
  const sse = (kind: 'stream' | 'stream_log' | 'stream_events', request: string, summary: string, description: string) => {
    app.post(
      `/${kind}`,
      doc(summary, {
        body: { $ref: `${n}${request}#` },
        response: { 200: { description, content: { 'text/event-stream': { schema: streamResponses[kind] } } }, ...errors },
      }),
      streamHandler(chain, kind),
    );
    refuseOtherMethods(`/${kind}`, 'POST');
  };
  if (enabled.has('stream')) {
    sse('stream', 'StreamRequest', `Stream the output chunks of ${path} (SSE)`, 'Server-sent events: `metadata` (the run id), one `data` per output chunk, then `end` — or an `error` frame if the run fails after the stream started.');
  }
  if (enabled.has('stream_log')) {
    sse('stream_log', 'StreamLogRequest', `Stream the run log of ${path} as JSON Patch (SSE)`, 'Server-sent events: `data` frames of `{ops}` (JSON Patch) that build the run log — the root run and every sub-run passing the filters — then `end`.');
  }
  if (enabled.has('stream_events')) {
    sse('stream_events', 'StreamEventsRequest', `Stream the events of every run inside ${path} (SSE)`, 'Server-sent events: one `data` frame per run event (`on_chain_start`, `on_chat_model_stream`, ...) passing the filters, then `end`.');
  }
  const schemaRoute = (kind: 'input' | 'output' | 'config', description: string) => {
    app.get(`/${kind}_schema`, doc(`JSON Schema of ${path}'s ${kind}`, { response: { 200: { description, type: 'object', additionalProperties: true }, ...schemaErrors } }), schemaHandler(chain, kind));
    refuseOtherMethods(`/${kind}_schema`, 'GET');
  };
  if (enabled.has('input_schema')) schemaRoute('input', `What ${path} takes as \`input\` (JSON Schema, draft-07)`);
  if (enabled.has('output_schema')) schemaRoute('output', `What ${path} answers as \`output\` (JSON Schema, draft-07)`);
  if (enabled.has('config_schema')) schemaRoute('config', `What a client may set in \`config\` for ${path}: its configurable fields and allowed keys (JSON Schema)`);
  if (enabled.has('ui_stream') && chain.spec.messages !== undefined) {
    app.post(
      '/ui_stream',
      doc(`Chat with ${path} as the AI SDK's useChat does (UI message stream)`, {
        description:
          "What the AI SDK's `DefaultChatTransport` sends: the chat's `id`, its `messages` (UI messages; their text parts are read), `trigger` and `messageId`. The chain's messages adapter makes its input. Add `on_disconnect: \"continue\"` (the transport's `body` option) to make the run durable, so a reloaded page resumes it.",
        body: {
          type: 'object',
          required: ['id', 'messages'],
          properties: {
            id: { type: 'string', description: 'The chat id' },
            messages: { type: 'array', items: { type: 'object', properties: { id: { type: 'string' }, role: { type: 'string', enum: ['user', 'assistant', 'system'] }, parts: { type: 'array', items: { type: 'object', additionalProperties: true } } } } },
            trigger: { type: 'string', enum: ['submit-message', 'regenerate-message'] },
            messageId: { type: 'string' },
            on_disconnect: { type: 'string', enum: ['cancel', 'continue'], default: 'cancel' },
            config: { type: 'object', additionalProperties: true },
          },
          additionalProperties: true,
        },
        response: {
          200: {
            description:
              'The UI message stream (header `x-vercel-ai-ui-message-stream: v1`): `data:` frames of JSON parts — `start`, `start-step`, `text-start`, `text-delta`, `text-end`, `tool-input-start`, `tool-input-available`, `tool-output-available`, `finish-step`, `finish` (or `error`, or `abort` for a cancelled run) — then `data: [DONE]`.',
            content: { 'text/event-stream': { schema: { type: 'string' } } },
          },
          ...errors,
        },
      }),
      uiStreamHandler(chain),
    );
    refuseOtherMethods('/ui_stream', 'POST');
    app.get(
      '/ui_stream/:chat_id/stream',
      {
        config: { endpoint: 'ui_stream_resume' },
        ...doc(`Resume ${path}'s durable UI message stream of a chat`, {
        description: "The AI SDK transport's reconnect (`resume: true`): the chat's durable stream from its start, or 204 when none is under way.",
        params: { type: 'object', properties: { chat_id: { type: 'string', description: 'The chat id' }, ...(hashed ? { config_hash: { type: 'string' } } : {}) } },
        response: { 200: { description: 'The UI message stream, as `POST /ui_stream` sends it', content: { 'text/event-stream': { schema: { type: 'string' } } } }, 204: { description: 'No stream of this chat is under way', type: 'null' }, ...errors },
        }),
      },
      uiResumeHandler(chain),
    );
    refuseOtherMethods('/ui_stream/:chat_id/stream', 'GET');
  }
  if (enabled.has('playground')) await app.register(playgroundRoutes, { chain, template: playgroundTemplate ?? (() => undefined) });
};

/**
 * Every route `app` registers from now on counts itself in `/metrics` when it answers, under the chain's
 * `path` and an endpoint decided once here rather than per request: the route's `config.endpoint`
 * (`ui_stream_resume`), else `endpointOf(url)`, else the URL's last fixed part (`invoke`, also under
 * /c/:config_hash/; `playground` for its pages and assets). Streams that started count themselves when they end, and requests whose client went
 * away count a 499; Fastify runs this hook for those too, so it skips them. A stream refused before it
 * started is counted here.
 */
export function countRequests(app: FastifyInstance, path: string, endpointOf?: (url: string) => string): void {
  const metrics = app.runnel.metrics;
  app.addHook('onRoute', (route) => {
    const endpoint = route.config?.endpoint ?? endpointOf?.(route.url) ?? route.url.split('/').filter((part) => part !== '' && part !== '*' && !part.startsWith(':')).pop() ?? 'unknown';
    const requests = metrics.route(path, endpoint);
    const count: onResponseHookHandler = (request, reply, done) => {
      if (!request.countedByHandler) requests.answered(reply.statusCode, reply.elapsedTime / 1000);
      done();
    };
    route.onResponse = route.onResponse === undefined ? [count] : [...[route.onResponse].flat(), count];
  });
}
