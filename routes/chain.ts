/**
 * A chain's routes, registered under its path (and again under
 * `/{path}/c/{config_hash}/` when config hashes are on). Only enabled
 * endpoints exist; the others answer 404.
 */
import type { FastifyPluginAsync } from 'fastify';
import { streamResponses } from '../src/server/openapi.js';
import type { PreparedChain } from '../src/server/prepared.js';
import { batchHandler } from './batch.js';
import { playgroundRoutes } from './playground.js';
import { invokeHandler } from './invoke.js';
import { schemaHandler } from './schemas.js';
import { countedByStream, streamHandler } from './streams.js';

export interface ChainRoutesOptions {
  chain: PreparedChain;
  /** True for the `/c/{config_hash}/` copy of the routes. */
  hashed: boolean;
  /** The playground bundle's index.html (undefined when it is not built). */
  playgroundTemplate?: string | undefined;
}

const errors = { '4xx': { $ref: 'RunnelError#' }, '5xx': { $ref: 'RunnelError#' } };

export const chainRoutes: FastifyPluginAsync<ChainRoutesOptions> = async (app, { chain, hashed, playgroundTemplate }) => {
  const enabled = new Set(chain.spec.enabledEndpoints);
  const n = chain.name;
  const path = chain.spec.path;
  const tags = [path];
  const hide = hashed; // the /c/{hash}/ copies behave the same; the document lists the plain routes
  const params = hashed ? { params: { type: 'object', properties: { configHash: { type: 'string' } } } } : {};
  const doc = (summary: string, extra: Record<string, unknown>) => ({ schema: { tags, hide, summary, ...params, ...extra } });

  if (enabled.has('invoke')) {
    app.post('/invoke', doc(`Run ${path} on one input`, { body: { $ref: `${n}InvokeRequest#` }, response: { 200: { $ref: `${n}InvokeResponse#` }, ...errors } }), invokeHandler(chain));
  }
  if (enabled.has('batch')) {
    app.post('/batch', doc(`Run ${path} on many inputs`, { body: { $ref: `${n}BatchRequest#` }, response: { 200: { $ref: `${n}BatchResponse#` }, ...errors } }), batchHandler(chain));
  }
  const sse = (kind: 'stream' | 'stream_log' | 'stream_events', request: string, summary: string) =>
    app.post(
      `/${kind}`,
      doc(summary, {
        body: { $ref: `${n}${request}#` },
        response: { 200: { description: 'An event stream', content: { 'text/event-stream': { schema: streamResponses[kind] } } }, ...errors },
      }),
      streamHandler(chain, kind),
    );
  if (enabled.has('stream')) sse('stream', 'StreamRequest', `Stream the output chunks of ${path} (SSE)`);
  if (enabled.has('stream_log')) sse('stream_log', 'StreamLogRequest', `Stream the run log of ${path} as JSON Patch (SSE)`);
  if (enabled.has('stream_events')) sse('stream_events', 'StreamEventsRequest', `Stream the events of every run inside ${path} (SSE)`);
  if (enabled.has('input_schema')) app.get('/input_schema', doc(`JSON Schema of ${path}'s input`, { response: { 200: { type: 'object', additionalProperties: true } } }), schemaHandler(chain, 'input'));
  if (enabled.has('output_schema')) app.get('/output_schema', doc(`JSON Schema of ${path}'s output`, { response: { 200: { type: 'object', additionalProperties: true } } }), schemaHandler(chain, 'output'));
  if (enabled.has('config_schema')) app.get('/config_schema', doc(`JSON Schema of ${path}'s config`, { response: { 200: { type: 'object', additionalProperties: true } } }), schemaHandler(chain, 'config'));
  if (enabled.has('playground')) await app.register(playgroundRoutes, { chain, template: playgroundTemplate });
  // Streams that started count themselves when they end (with 499 for a client gone); Fastify runs this hook
  // for their hijacked replies too, so it skips them. A stream refused before it started is counted here.
  const metrics = app.runnel.metrics;
  app.addHook('onResponse', (request, reply, done) => {
    if (countedByStream.has(request)) {
      done();
      return;
    }
    const endpoint = request.routeOptions.url?.split('/').pop() ?? 'unknown';
    metrics.requests.inc({ chain: path, endpoint, status: String(reply.statusCode) });
    metrics.duration.observe({ chain: path, endpoint }, reply.elapsedTime / 1000);
    done();
  });
};
