/** `POST /{path}/invoke`: `{input, config?, kwargs?}` → `{output, metadata: {run_id, feedback_tokens}}`. */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { invokeAnswering } from '../src/core/index.js';
import type { PreparedChain } from '../src/server/prepared.js';
import { bodyObject, checkAcceptingRuns, decodeConfigHash, disconnectSignal, refuseWebhook, required, requestContext } from '../src/server/request.js';
import { metered, usageMeter } from '../src/server/usage.js';

export function invokeHandler(chain: PreparedChain) {
  return async (request: FastifyRequest<{ Params: { config_hash?: string } }>, reply: FastifyReply) => {
    const body = bodyObject(request.body, request.url);
    refuseWebhook(body, chain.spec.path);
    const input = required(body, 'input');
    const { config, runId } = await chain.resolveConfig(
      { hash: decodeConfigHash(request.params.config_hash), body: body.config, bodyLoc: ['config'] },
      requestContext(request, 'invoke', chain.spec.path),
    );
    chain.checkInput(input);
    checkAcceptingRuns(request);
    const connection = disconnectSignal(request, reply, 'invoke', chain.spec.path);
    try {
      // A run that fails keeps no chat turn a step of it saved (a history inside the chain, a step after it failing).
      const output = await invokeAnswering(chain.spec.runnable, input as never, metered(config, usageMeter(request.server.runnel, chain), { signal: connection.signal }));
      // undefined is JSON's null (the key would be left out of the answer, whose contract is {output, metadata}).
      return { output: output ?? null, metadata: { run_id: runId, feedback_tokens: [] } };
    } finally {
      connection.dispose();
    }
  };
}
