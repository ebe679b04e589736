/**
 * Token accounting for `/metrics`: for chains with a chat model, a usage
 * handler adds the tokens each model call spent at its provider to
 * `runnel_model_tokens_total` (cache hits spend none). It goes through
 * `onUsage`, not callbacks, so the runs stay unobserved and stream on the
 * fast path.
 */
import type { RunnableConfig, UsageHandler } from '../core/index.js';
import type { RunnelState } from './app.js';
import type { PreparedChain } from './prepared.js';

export function usageMeter(state: RunnelState, chain: PreparedChain): Pick<RunnableConfig, 'onUsage'> {
  if (!chain.hasModel) return {};
  const count: UsageHandler = (usage) => {
    state.metrics.tokens.inc({ chain: chain.spec.path, direction: 'in' }, usage.input_tokens);
    state.metrics.tokens.inc({ chain: chain.spec.path, direction: 'out' }, usage.output_tokens);
  };
  return { onUsage: count };
}
