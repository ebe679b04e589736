/**
 * Sends an error answer, whatever its body's shape (Runnel's, or OpenAI's on
 * `/v1/*`), with what its status asks of the connection: `retry-after` on a
 * 503, `connection: close` while draining, and a lingering close when the
 * request's body is still arriving.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ErrorCode } from '../core/index.js';
import { answerAndLinger } from './connection-limits.js';

/**
 * Answers `status` with `body`; `code` is the Runnel code behind it.
 *
 * @example
 * app.setErrorHandler((error, request, reply) => {
 *   const { status, body } = toHttpError(error);
 *   sendErrorAnswer(request, reply, { status, code: body.code, body });
 * });
 */
export function sendErrorAnswer(request: FastifyRequest, reply: FastifyReply, answer: { status: number; code: ErrorCode; body: object }): void {
  if (answer.status === 503) reply.header('retry-after', '1');
  // Draining: the client should take its next request to another replica.
  if (answer.code === 'RUNNEL_ERR_SHUTTING_DOWN') reply.header('connection', 'close');
  // An answer that closes the connection while the body still arrives (one over the limit) reads the rest first.
  if (!request.raw.complete && !request.raw.readableEnded && reply.getHeader('connection') === 'close') {
    answerAndLinger(request, reply, { status: answer.status, body: answer.body });
    return;
  }
  void reply.code(answer.status).type('application/json; charset=utf-8').send(answer.body);
}
