/**
 * `GET /{path}/history/{session_id}`: the caller's conversation;
 * `DELETE` forgets it. Only for chains registered with a `history` accessor;
 * a caller reaches only its own sessions (the identity is part of the key).
 */
import type { FastifyPluginAsync } from 'fastify';
import { checkSessionId } from '../src/history/index.js';
import type { PreparedChain } from '../src/server/prepared.js';
import { countRequests } from './chain.js';

/** Where a bad session id is: the URL's path, not a config the request never sent. */
const PATH_LOC = ['path', 'session_id'];

export const historyRoutes: FastifyPluginAsync<{ chain: PreparedChain }> = async (app, { chain }) => {
  const access = chain.spec.history;
  if (access === undefined) return;
  countRequests(app, chain.spec.path);
  const tags = [chain.spec.path];
  const params = { type: 'object', required: ['session_id'], properties: { session_id: { type: 'string' } } };
  const errors = { '4xx': { $ref: 'RunnelError#' }, '5xx': { $ref: 'RunnelError#' } };
  app.get<{ Params: { session_id: string } }>(
    '/history/:session_id',
    { schema: { tags, summary: `The caller's conversation in ${chain.spec.path}`, params, response: { 200: { type: 'object', properties: { session_id: { type: 'string' }, messages: { type: 'array', items: { type: 'object' } } } }, ...errors } } },
    async (request) => {
      const sessionId = checkSessionId(request.params.session_id, PATH_LOC);
      const messages = await access(sessionId, { identity: request.identity }).getMessages();
      return { session_id: sessionId, messages };
    },
  );
  app.delete<{ Params: { session_id: string } }>(
    '/history/:session_id',
    { schema: { tags, summary: `Forget the caller's conversation in ${chain.spec.path}`, params, response: { 204: { type: 'null', description: 'Forgotten' }, ...errors } } },
    async (request, reply) => {
      const sessionId = checkSessionId(request.params.session_id, PATH_LOC);
      await access(sessionId, { identity: request.identity }).clear();
      return reply.code(204).send();
    },
  );
};
