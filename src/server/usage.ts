/**
 * Model accounting for `/metrics`: for chains with a chat model, a usage
 * handler adds the tokens each model call spent at its provider to
 * `runnel_model_tokens_total` (cache hits spend none), and a model-call
 * handler times each call to the provider and counts its failures and tokens
 * by provider and model. Both go through the config (`onUsage`,
 * `onModelCall`), not callbacks, so the runs stay unobserved and stream on
 * the fast path.
 */
import { mergeConfigs, type ModelCallHandler, type RunnableConfig, type TokenUsage, type UsageHandler } from '../core/index.js';
import { addUsage } from '../messages/index.js';
import type { RunMeter } from '../runs/index.js';
import type { RunnelState } from './app.js';
import type { Metrics } from './metrics.js';
import type { PreparedChain } from './prepared.js';

/** One meter per chain (a chain belongs to one app): requests share it rather than make their own. */
const meters = new WeakMap<PreparedChain, RunMeter>();

/**
 * The handlers a run of `chain` meters its model calls with (none for a chain without a model).
 *
 * @example
 * await chain.spec.runnable.invoke(input, { ...config, ...usageMeter(state, chain) });
 */
export function usageMeter(state: RunnelState, chain: PreparedChain): RunMeter {
  if (!chain.hasModel) return {};
  let meter = meters.get(chain);
  if (meter === undefined) {
    meter = modelMeter(state.metrics, chain.spec.path);
    meters.set(chain, meter);
  }
  return meter;
}

/**
 * The handlers that count the model calls and tokens of chain `path` in `metrics` (a server's, or a worker
 * process's own).
 *
 * @example
 * const meter = modelMeter(metrics, '/joke');
 */
export function modelMeter(metrics: Metrics, path: string): RunMeter {
  return {
    onUsage: (usage) => {
      metrics.tokens.inc({ chain: path, direction: 'in' }, usage.input_tokens);
      metrics.tokens.inc({ chain: path, direction: 'out' }, usage.output_tokens);
    },
    onModelCall: (call) => metrics.modelCall(call),
  };
}

/**
 * The config a route runs `config` with: `meter`'s handlers added to those the chain's
 * `perRequestConfigModifier` set (`onUsage`, `onModelCall`: each is called, neither replaces the other), then
 * the route's `own` keys (its signal, its collector of saves) in place.
 *
 * @example
 * await chain.spec.runnable.invoke(input, metered(config, usageMeter(state, chain), { signal }));
 */
export function metered(config: RunnableConfig, meter: RunMeter, own?: RunnableConfig): RunnableConfig {
  // Most chains set no handler of their own: a copy, not a merge, on the hot path.
  if (config.onUsage === undefined && config.onModelCall === undefined) return { ...config, ...meter, ...own };
  return { ...mergeConfigs(config, meter), ...own };
}

/**
 * The run's handlers for `/metrics` (as {@link usageMeter}), whose usage handler also adds up what one
 * request's model calls spent, for answers that report it (OpenAI's `usage`), and keeps the finish reason of
 * its last model call. `total()` is undefined while no model call reported any (a chain without a model, a
 * cached answer); so is `finishReason()` while no call finished at its provider.
 *
 * @example
 * const tally = usageTally(state, chain);
 * await chain.spec.runnable.invoke(input, { ...config, onUsage: tally.onUsage, onModelCall: tally.onModelCall });
 * tally.total(); // { input_tokens: 12, output_tokens: 5, total_tokens: 17 }
 * tally.finishReason(); // 'stop'
 */
export function usageTally(
  state: RunnelState,
  chain: PreparedChain,
): { onUsage: UsageHandler; onModelCall: NonNullable<RunnableConfig['onModelCall']>; total(): TokenUsage | undefined; finishReason(): string | undefined } {
  const { onUsage: meter, onModelCall: timer } = usageMeter(state, chain);
  const last = lastFinishReason(timer);
  let sum: TokenUsage | undefined;
  return {
    onUsage: (usage, model) => {
      sum = addUsage(sum, usage);
      meter?.(usage, model);
    },
    onModelCall: last.onModelCall,
    total: () => sum,
    finishReason: last.finishReason,
  };
}

/**
 * A model-call handler that keeps the finish reason of the last model answer it hears (a cached one's too),
 * passing each call on to `next`: what a frontend says of how the run's answer ended.
 *
 * @example
 * const last = lastFinishReason(runConfig.onModelCall);
 * await chain.invoke(input, { ...runConfig, onModelCall: last.onModelCall });
 * last.finishReason(); // 'length'
 */
export function lastFinishReason(next: ModelCallHandler | undefined): { onModelCall: ModelCallHandler; finishReason(): string | undefined } {
  let reason: string | undefined;
  return {
    onModelCall: (call) => {
      if (call.finishReason !== undefined) reason = call.finishReason;
      next?.(call);
    },
    finishReason: () => reason,
  };
}
