/**
 * A chat frontend's conversation as a run of a chain: the chain's messages
 * adapter makes the input (and the `configurable` values, such as a
 * `session_id`), and then everything `/invoke` does before it runs applies —
 * the config resolved (identity, cache scope, `cache-control`, the server's
 * per-request modifier, required configurable fields), the input checked
 * against the chain's schema, and no new runs while the server drains.
 */
import type { FastifyRequest } from 'fastify';
import { RunnelError, type RunnableConfig } from '../core/index.js';
import type { PreparedChain } from './prepared.js';
import type { Conversation, Endpoint } from './registry.js';
import { checkAcceptingRuns, requestContext } from './request.js';

/** A run ready to start. */
export interface ConversationRun {
  input: never;
  config: RunnableConfig;
  runId: string;
}

/**
 * Prepares the run of `chain` for `conversation`, or throws what the client must hear: the adapter's
 * refusal, a bad input or config, the server draining.
 *
 * @example
 * const { input, config } = await prepareConversationRun(request, chain, { conversation, endpoint: 'chat_completions' });
 * const output = await chain.spec.runnable.invoke(input, { ...config, signal });
 */
export async function prepareConversationRun(
  request: FastifyRequest,
  chain: PreparedChain,
  options: {
    conversation: Conversation;
    endpoint: Endpoint;
    /** The client's own config, where the route takes one (`/ui_stream`: the `/c/{hash}/` URL and the body's `config`). */
    client?: { hash?: unknown; body?: unknown; bodyLoc?: (string | number)[] };
  },
): Promise<ConversationRun> {
  const adapter = chain.spec.messages;
  if (adapter === undefined) throw new RunnelError('RUNNEL_ERR_NOT_FOUND', `${chain.spec.path} does not take conversations`);
  const { input, configurable } = adapter.toInput(options.conversation);
  const server = conversationConfigurable(options.conversation, configurable);
  const { config, runId } = await chain.resolveConfig(
    { ...options.client, server: server === undefined ? undefined : { configurable: server } },
    requestContext(request, options.endpoint, chain.spec.path),
  );
  chain.checkInput(input);
  checkAcceptingRuns(request);
  return { input: input as never, config, runId };
}

/**
 * The server's `configurable` for a conversation's run: the adapter's, and — when the client asks for another
 * answer (`regenerate`) — no model cache, as `cache-control: no-cache` asks: the same answer again from the
 * cache is not another one.
 */
export function conversationConfigurable(conversation: Conversation, configurable: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (conversation.trigger !== 'regenerate') return configurable;
  return { ...configurable, cache: false };
}
