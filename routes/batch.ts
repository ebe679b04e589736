/**
 * `POST /{path}/batch`: `{inputs: [...], config?: {} | [{}...]}` → outputs in
 * input order with one run id each. At most `RUNNEL_MAX_BATCH` inputs; a
 * bad item, a non-list `inputs` or `config: null` is a 422 (LangServe: 500).
 * A single config's `run_id` names the first item's run; a list naming one run twice is a 422.
 * A batch that fails keeps none of its items' chat history turns.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { batchItemOf, RunnelError, Saves } from '../src/core/index.js';
import type { PreparedChain } from '../src/server/prepared.js';
import { bodyObject, checkAcceptingRuns, decodeConfigHash, disconnectSignal, refuseWebhook, required, requestContext } from '../src/server/request.js';
import { metered, usageMeter } from '../src/server/usage.js';

export function batchHandler(chain: PreparedChain) {
  return async (request: FastifyRequest<{ Params: { config_hash?: string } }>, reply: FastifyReply) => {
    const body = bodyObject(request.body, request.url);
    refuseWebhook(body, chain.spec.path);
    const inputs = required(body, 'inputs');
    if (!Array.isArray(inputs)) {
      throw new RunnelError('RUNNEL_ERR_BODY_INVALID', 'inputs must be a list', { detail: [{ type: 'list_type', loc: ['inputs'], msg: 'Input should be a valid list' }] });
    }
    const limit = request.server.runnel.config.maxBatch;
    if (inputs.length > limit) {
      throw new RunnelError('RUNNEL_ERR_BATCH_TOO_LARGE', `A batch takes at most ${limit} inputs, got ${inputs.length}`, {
        detail: [{ type: 'too_long', loc: ['inputs'], msg: `List should have at most ${limit} items` }],
      });
    }
    const bodyConfig = body.config;
    if (Object.hasOwn(body, 'config') && (bodyConfig === null || typeof bodyConfig !== 'object')) {
      throw new RunnelError('RUNNEL_ERR_CONFIG_INVALID', "Value for 'config' key must be a dict or list if provided", {
        detail: [{ type: 'dict_or_list', loc: ['config'], msg: 'config must be an object or a list of objects' }],
      });
    }
    if (Array.isArray(bodyConfig) && bodyConfig.length !== inputs.length) {
      throw new RunnelError('RUNNEL_ERR_CONFIG_INVALID', `Number of configs (${bodyConfig.length}) must match number of inputs (${inputs.length})`, {
        detail: [{ type: 'length', loc: ['config'], msg: `Number of configs (${bodyConfig.length}) must match number of inputs (${inputs.length})` }],
      });
    }
    const hash = decodeConfigHash(request.params.config_hash);
    const context = requestContext(request, 'batch', chain.spec.path);
    // Every bad input is listed, not only the first: a client fixes its batch in one round.
    let invalid: RunnelError | undefined;
    const problems: unknown[] = [];
    for (let i = 0; i < inputs.length; i++) {
      try {
        chain.checkInput(inputs[i], ['inputs', i]);
      } catch (error) {
        if (!(error instanceof RunnelError) || error.code !== 'RUNNEL_ERR_INPUT_INVALID') throw error;
        invalid ??= error;
        problems.push(...(Array.isArray(error.detail) ? error.detail : []));
      }
    }
    if (invalid !== undefined) throw new RunnelError('RUNNEL_ERR_INPUT_INVALID', invalid.message, { detail: problems });
    const resolved = [];
    const seen = new Set<string>();
    for (let i = 0; i < inputs.length; i++) {
      // A run_id shared by every item (a single config's, the hash's) names the first run only, as LangChain's
      // getConfigList has it: the other items get their own ids.
      const one = Array.isArray(bodyConfig) ? bodyConfig[i] : i === 0 ? bodyConfig : withoutRunId(bodyConfig);
      const item = await chain.resolveConfig({ hash: i === 0 ? hash : withoutRunId(hash), body: one, bodyLoc: Array.isArray(bodyConfig) ? ['config', i] : ['config'] }, context);
      if (seen.has(item.runId)) {
        const key = typeof one === 'object' && one !== null && Object.hasOwn(one, 'runId') ? 'runId' : 'run_id';
        throw new RunnelError('RUNNEL_ERR_CONFIG_INVALID', `config[${i}]: run_id ${item.runId} names another item's run too; each run needs its own id`, {
          detail: [{ type: 'value_error', loc: ['config', i, key], msg: 'run_id must differ from the other items\' run ids' }],
        });
      }
      seen.add(item.runId);
      resolved.push(item);
    }
    checkAcceptingRuns(request);
    const connection = disconnectSignal(request, reply, 'batch', chain.spec.path);
    // An item's saves go to its own config's collector (the chain's `perRequestConfigModifier` may set one) once
    // the batch has answered.
    const saves = resolved.map(() => new Saves());
    const meter = usageMeter(request.server.runnel, chain);
    try {
      const output = await chain.spec.runnable.batch(
        inputs as never[],
        resolved.map(({ config }, i) => metered(config, meter, { signal: connection.signal, onSave: saves[i]!.onSave })),
      );
      resolved.forEach(({ config }, i) => saves[i]!.passTo(config.onSave));
      const runIds = resolved.map(({ runId }) => runId);
      return { output, metadata: { run_ids: runIds, responses: runIds.map((run_id) => ({ run_id, feedback_tokens: [] })) } };
    } catch (error) {
      // Its client is told the batch failed, and may send it again: the turns its succeeded items saved go.
      await Promise.all(saves.map((itemSaves) => itemSaves.takeBack()));
      // One item's failure fails the batch, as LangServe's does: the answer says which item (an internal
      // error's message stays in the log).
      const index = batchItemOf(error);
      if (index === undefined || !(error instanceof RunnelError) || error.code === 'RUNNEL_ERR_INTERNAL' || error.code === 'RUNNEL_ERR_ABORTED') throw error;
      throw new RunnelError(error.code, `inputs[${index}]: ${error.message}`, { detail: error.detail, cause: error.cause });
    } finally {
      connection.dispose();
    }
  };
}

/** `config` without its run id (either spelling); anything not an object as it is, for the config checks to judge. */
function withoutRunId<T>(config: T): T {
  if (config === null || typeof config !== 'object' || Array.isArray(config)) return config;
  const { run_id: _snake, runId: _camel, ...rest } = config as Record<string, unknown>;
  return rest as T;
}
