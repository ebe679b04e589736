/**
 * Token accounting for `/metrics`: for chains with a chat model, a callback
 * adds each model run's usage to `runnel_model_tokens_total`. Chains without
 * a model get no callback, so their runs stay unobserved (and fast).
 */
import type { EventCallback, RunnableConfig } from '../core/index.js';
import type { RunnelState } from './app.js';
import type { PreparedChain } from './prepared.js';

export function usageCallbacks(state: RunnelState, chain: PreparedChain, config: RunnableConfig): { callbacks?: EventCallback[] } {
  if (!chain.hasModel) return {};
  const count: EventCallback = (event) => {
    if (event.event !== 'on_chat_model_end') return;
    const usage = (event.data.output as { usage_metadata?: { input_tokens?: number; output_tokens?: number } } | undefined)?.usage_metadata;
    if (usage === undefined) return;
    state.metrics.tokens.inc({ chain: chain.spec.path, direction: 'in' }, usage.input_tokens ?? 0);
    state.metrics.tokens.inc({ chain: chain.spec.path, direction: 'out' }, usage.output_tokens ?? 0);
  };
  return { callbacks: [...(config.callbacks ?? []), count] };
}
