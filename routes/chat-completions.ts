/**
 * `POST /v1/chat/completions`: a chain as an OpenAI chat model. The body's
 * messages become a conversation, the chain's messages adapter makes its
 * input, and the run is the one `/invoke` or `/stream` would make — config,
 * input check, usage metering, cache, history, and a client that goes away
 * aborting it down to the model's request, leaving nothing cached or saved.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { invokeAnswering, RunnelError } from '../src/core/index.js';
import { prepareConversationRun } from '../src/server/conversation-run.js';
import { toOpenAIError } from '../src/server/openai-errors.js';
import { bodyError, parseChatCompletionRequest } from '../src/server/openai-request.js';
import { chatCompletion, CompletionChunks, completionUsage, errorChunk, type CompletionHead } from '../src/server/openai-response.js';
import type { PreparedChain } from '../src/server/prepared.js';
import { disconnectSignal } from '../src/server/request.js';
import { metered, usageTally } from '../src/server/usage.js';
import { sendLiveStream } from './streams.js';

/** True for a chain served as a model: it has a messages adapter and the endpoint is enabled. */
export const isModel = (chain: PreparedChain): boolean => chain.spec.messages !== undefined && chain.spec.enabledEndpoints.includes('chat_completions');

/** The chain at the path a model id names, model or not. */
const chainNamed = (chains: readonly PreparedChain[], model: string): PreparedChain | undefined => chains.find((c) => c.spec.path === `/${model}`);

/** The chain a model id names, or 404 `model_not_found`. */
export function findModel(chains: readonly PreparedChain[], model: string): PreparedChain {
  const chain = chainNamed(chains, model);
  if (chain !== undefined && isModel(chain)) return chain;
  // A chain that is there but not a model says why: its author's first try of /v1 is on a chain without an adapter.
  const why =
    chain === undefined
      ? 'does not exist'
      : chain.spec.messages === undefined
        ? `is the chain ${chain.spec.path}, which has no messages adapter (defineChain's messages), so it is not served as a model`
        : `is the chain ${chain.spec.path}, whose enabledEndpoints leave out chat_completions`;
  const message = `The model '${model}' ${why}: GET /v1/models lists the chains served as models`;
  throw new RunnelError('RUNNEL_ERR_NOT_FOUND', message, { detail: [{ type: 'model_not_found', loc: ['model'], msg: message }] });
}

/** The chain each request ran, for its count in `/metrics`. */
export const servedChain = new WeakMap<FastifyRequest, string>();

export function chatCompletionsHandler() {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    // A body that names a model counts under its chain whatever else is wrong with it, as a bad body on
    // `/invoke` counts under its chain (a probe: `n: 2` sent to a model was counted nowhere).
    const named = (request.body as { model?: unknown } | null | undefined)?.model;
    const known = typeof named === 'string' ? chainNamed(request.server.runnel.chains, named) : undefined;
    if (known !== undefined && isModel(known)) servedChain.set(request, known.spec.path);
    const asked = parseChatCompletionRequest(request.body);
    const chain = findModel(request.server.runnel.chains, asked.model);
    servedChain.set(request, chain.spec.path);
    const tools = chain.spec.messages?.tools === true;
    if (asked.offersTools && !tools) {
      throw bodyError(`The model '${asked.model}' (${chain.spec.path}) takes no tools: send the request without \`tools\``, { code: 'tools_not_supported', loc: ['tools'] });
    }
    const run = await prepareConversationRun(request, chain, { conversation: asked.conversation, endpoint: 'chat_completions' });
    const head: CompletionHead = { id: `chatcmpl-${run.runId}`, created: Math.floor(Date.now() / 1000), model: asked.model };
    const tally = usageTally(request.server.runnel, chain);

    if (!asked.stream) {
      const connection = disconnectSignal(request, reply, 'chat_completions', chain.spec.path);
      try {
        // A run that fails keeps no chat turn a step of it saved, as on /invoke.
        const output = await invokeAnswering(chain.spec.runnable, run.input, metered(run.config, { onUsage: tally.onUsage, onModelCall: tally.onModelCall }, { signal: connection.signal }));
        return chatCompletion(head, output, { tools, usage: completionUsage(tally.total()), finishReason: tally.finishReason() });
      } finally {
        connection.dispose();
      }
    }

    const chunks = new CompletionChunks(head, { tools, includeUsage: asked.includeUsage });
    let started = false;
    // OpenAI's first chunk (the role) goes out with the first of the answer, or with its end or error.
    const opening = (): string => {
      if (started) return '';
      started = true;
      return chunks.start();
    };
    await sendLiveStream(request, reply, {
      chain,
      endpoint: 'chat_completions',
      runId: run.runId,
      config: run.config,
      // The tally meters `/metrics` too, so it is the stream's meter; it keeps the last model call's finish
      // reason (a chain ending in a parser streams no message to read it from).
      meter: { onUsage: tally.onUsage, onModelCall: tally.onModelCall },
      items: (runConfig) => chain.spec.runnable.stream(run.input, runConfig),
      // A run that fails before its first piece (the provider's 429 or 5xx) is an HTTP error, as OpenAI answers
      // one: the SDKs retry it. Once the stream is open, a failure is an error frame.
      errorBeforeOpen: (error) => toOpenAIError(error),
      format: {
        item: (sse, piece) => sse.sendRaw(opening() + chunks.next(piece)),
        end: (sse) => sse.sendRaw(opening() + chunks.end(completionUsage(tally.total()), tally.finishReason())),
        error: (sse, error) => sse.sendRaw(opening() + errorChunk(toOpenAIError(error).body)),
      },
    });
  };
}
