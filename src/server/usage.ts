/**
 * Token accounting for `/metrics`: for chains with a chat model, a usage
 * handler adds the tokens each model call spent at its provider to
 * `runnel_model_tokens_total` (cache hits spend none). It goes through
 * `onUsage`, not callbacks, so the runs stay unobserved and stream on the
 * fast path.
 */
import type { RunnableConfig, TokenUsage, UsageHandler } from '../core/index.js';
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

/**
 * The run's usage handler for `/metrics` (as {@link usageMeter}) that also adds up what one request's model
 * calls spent, for answers that report it (OpenAI's `usage`). `total()` is undefined while no model call
 * reported any (a chain without a model, a cached answer).
 *
 * @example
 * const tally = usageTally(state, chain);
 * await chain.spec.runnable.invoke(input, { ...config, onUsage: tally.onUsage });
 * tally.total(); // { input_tokens: 12, output_tokens: 5, total_tokens: 17 }
 */
export function usageTally(state: RunnelState, chain: PreparedChain): { onUsage: UsageHandler; total(): TokenUsage | undefined } {
  const meter = usageMeter(state, chain).onUsage;
  let sum: TokenUsage | undefined;
  return {
    onUsage: (usage, model) => {
      sum = {
        input_tokens: (sum?.input_tokens ?? 0) + usage.input_tokens,
        output_tokens: (sum?.output_tokens ?? 0) + usage.output_tokens,
        total_tokens: (sum?.total_tokens ?? 0) + usage.total_tokens,
      };
      meter?.(usage, model);
    },
    total: () => sum,
  };
}
