/**
 * What a provider's finish reason means, whatever its words: one place that knows OpenAI's and Anthropic's
 * (and compatible servers') reasons, for the cache (a cut answer is not stored) and for the frontends'
 * own finish reasons (`/v1`'s `finish_reason`, the AI SDK's `finishReason`).
 */

/**
 * - `length`: cut at a token limit (OpenAI's `length`, Anthropic's `max_tokens`, a context window);
 * - `content_filter`: stopped by a filter (OpenAI's `content_filter`, Anthropic's `refusal`: its classifier);
 * - `tool_calls`: ended asking for tools (`tool_calls`, `tool_use`);
 * - `paused`: Anthropic's `pause_turn` (a long server tool turn, to be continued);
 * - `stop`: any other end, an unknown one included (for the frontends' own names; the cache keeps only what
 *   {@link finishedWhole} knows).
 */
export type FinishKind = 'stop' | 'length' | 'content_filter' | 'tool_calls' | 'paused';

/**
 * The kind of a provider's finish reason.
 *
 * @example
 * finishKind('max_tokens') // 'length'
 */
export function finishKind(reason: string | undefined): FinishKind {
  switch (reason) {
    case 'length':
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'content_filter':
    case 'refusal':
      return 'content_filter';
    case 'tool_calls':
    case 'tool_use':
      return 'tool_calls';
    case 'pause_turn':
      return 'paused';
    default:
      return 'stop';
  }
}

/**
 * Whether `reason` says the model finished its answer: a stop (`stop`, `end_turn`, `stop_sequence`) or a turn
 * that asks for tools (`tool_calls`, `tool_use`, `function_call`). Not a cut (a limit, a filter, a pause), nor
 * a reason this list does not know — a compatible server's `abort` or `error` (vLLM's, OpenRouter's) ends an
 * answer the server gave up on — nor none at all.
 */
export function finishedWhole(reason: string | undefined): boolean {
  switch (reason) {
    case 'stop':
    case 'end_turn':
    case 'stop_sequence':
    case 'tool_calls':
    case 'tool_use':
    case 'function_call':
      return true;
    default:
      return false;
  }
}
