/**
 * The OpenAI-compatible routes, under `/v1`: `GET /v1/models` (the chains
 * served as chat models), `GET /v1/models/{model}`, and
 * `POST /v1/chat/completions`. The same API keys as every route (as bearer
 * tokens), and every error — authentication, rate limits, unknown routes
 * included — in OpenAI's shape. docs/frontends.md is the contract.
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { logDependencyFailure, sendErrorAnswer } from '../src/server/error-reply.js';
import { toOpenAIError } from '../src/server/openai-errors.js';
import type { PreparedChain } from '../src/server/prepared.js';
import { chatCompletionsHandler, findModel, isModel, servedChain } from './chat-completions.js';

const tags = ['OpenAI-compatible'];
const errors = {
  '4xx': {
    description:
      'A request error in OpenAI\'s shape: a bad body (400, `param` names the field), no or a wrong API key (401 `invalid_api_key`), an unknown model (404 `model_not_found`), too many requests (429).',
    $ref: 'OpenAIError#',
  },
  '5xx': { description: 'The chain failed (502, 504), Redis or Postgres is unavailable or the server is shutting down (503, with `retry-after`), or a bug (500).', $ref: 'OpenAIError#' },
};

const modelOf = (chain: PreparedChain, created: number) => ({ id: chain.spec.path.slice(1), object: 'model', created, owned_by: 'runnel' });

/** A method a route does not take: 405 with `allow`, in OpenAI's shape. */
function refuse(allow: string) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    request.server.runnel.metrics.error('RUNNEL_ERR_METHOD_NOT_ALLOWED');
    const message = `Method Not Allowed: this route takes ${allow}`;
    return reply.code(405).header('allow', allow).header('x-request-id', request.id).send({ error: { message, type: 'invalid_request_error', param: null, code: 'RUNNEL_ERR_METHOD_NOT_ALLOWED' } });
  };
}

export const openAIRoutes: FastifyPluginAsync = async (app) => {
  const chains = app.runnel.chains;
  // Models exist since the server started.
  const created = Math.floor(Date.now() / 1000);

  // Every answer names its request, as OpenAI's do: the SDKs give it as `_request_id`, and it is what the log
  // lines carry (a client's own valid `x-request-id` is kept).
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });
  app.setErrorHandler((error, request, reply) => {
    const { status, code, body, internal } = toOpenAIError(error);
    // A request whose client went away was counted as such (499): the error its run ended with reaches nobody.
    if (!request.countedByHandler) app.runnel.metrics.error(code);
    if (internal) request.log.error({ err: error }, 'chat completion failed');
    else logDependencyFailure(request, error);
    sendErrorAnswer(request, reply, { status, code, body, error });
  });
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '';
    // A route of another method (TRACE, OPTIONS, PROPFIND… on /v1/chat/completions): 405 with `allow`, as the
    // other routes answer it — not a 404 that says the route is not there.
    const allow = request.server.runnel.allowedMethods(path);
    if (allow !== undefined && !allow.split(', ').includes(request.method)) return refuse(allow)(request, reply);
    const message = `Invalid URL (${request.method} ${path})`;
    void reply.code(404).header('x-request-id', request.id).send({ error: { message, type: 'invalid_request_error', param: null, code: 'RUNNEL_ERR_NOT_FOUND' } });
  });

  app.get(
    '/models',
    { schema: { tags, summary: 'The chains served as chat models', response: { 200: { description: 'Every chain with a messages adapter and `chat_completions` enabled', $ref: 'OpenAIModelList#' }, ...errors } } },
    async () => ({ object: 'list', data: chains.filter(isModel).map((chain) => modelOf(chain, created)) }),
  );
  const oneModel = {
    tags,
    summary: 'One chain served as a chat model',
    params: { type: 'object', properties: { model: { type: 'string', description: 'The model id: a chain path without the leading slash (`joke`; `team/summarise` for a nested path)' } } },
    response: { 200: { description: 'The model', $ref: 'OpenAIModel#' }, ...errors },
  };
  app.get<{ Params: { model: string } }>('/models/:model', { schema: oneModel }, async (request) => modelOf(findModel(chains, request.params.model), created));
  // A nested chain's model id holds a `/`: the same answer, under the documented route's name.
  app.get<{ Params: { '*': string } }>('/models/*', { schema: { hide: true } }, async (request) => modelOf(findModel(chains, request.params['*']), created));
  app.post(
    '/chat/completions',
    {
      schema: {
        tags,
        summary: 'Run a chain as an OpenAI chat model',
        description:
          "OpenAI's chat completions, served by the chain the `model` names: the messages go through the chain's messages adapter; `stream: true` answers with Server-Sent Events. See docs/frontends.md for what is read and what is ignored.",
        body: { $ref: 'OpenAIChatCompletionRequest#' },
        response: {
          200: {
            description: 'The answer: a `chat.completion`, or with `stream: true` Server-Sent Events of `chat.completion.chunk` ending with `data: [DONE]`',
            content: {
              'application/json': { schema: { $ref: 'OpenAIChatCompletion#' } },
              'text/event-stream': {
                schema: {
                  type: 'string',
                  contentMediaType: 'text/event-stream',
                  description: 'Frames `data: JSON\\n\\n`, each an OpenAIChatCompletionChunk; then `data: [DONE]`. A failure after the stream started is one frame `data: {"error": {...}}`, then the end.',
                },
              },
            },
          },
          ...errors,
        },
      },
    },
    chatCompletionsHandler(),
  );
  const hidden = { schema: { hide: true }, config: { refusesMethod: true } };
  app.route({ method: ['POST', 'PUT', 'PATCH', 'DELETE'], url: '/models', ...hidden, handler: refuse('GET, HEAD') });
  app.route({ method: ['POST', 'PUT', 'PATCH', 'DELETE'], url: '/models/*', ...hidden, handler: refuse('GET, HEAD') });
  app.route({ method: ['GET', 'PUT', 'PATCH', 'DELETE'], url: '/chat/completions', ...hidden, handler: refuse('POST') });

  // Requests that reached a chain count in `/metrics` under it, as the chain's own routes do; streams count themselves.
  const metrics = app.runnel.metrics;
  app.addHook('onResponse', (request, reply, done) => {
    const chain = servedChain.get(request);
    if (chain !== undefined && !request.countedByHandler) metrics.route(chain, 'chat_completions').answered(reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
};
