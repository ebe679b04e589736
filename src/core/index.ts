/**
 * The Runnable core: the protocol (`Runnable`), its composition, config,
 * events, schemas and errors. Loading this module wires every combinator.
 */
export { Runnable, batchItemOf, isRunnable, scopeFor } from './runnable.js';
export { MAX_JSON_DEPTH, MAX_STORED_JSON_DEPTH, nestedDeeperThan } from './json-depth.js';
export type { BatchOptions, GeneratorFunc, RunnableFunc, RunnableLike } from './runnable.js';
export type { Run } from './run.js';
export { publicMetadata } from './run.js';
export { lambda, RunnableLambda, type LambdaOptions } from './lambda.js';
export { generator, RunnableGenerator } from './generator.js';
export { sequence, RunnableSequence } from './sequence.js';
export { parallel, RunnableParallel, RunnableParallel as RunnableMap } from './parallel.js';
export { passthrough, assign, pick, RunnablePassthrough, RunnableAssign, RunnablePick } from './passthrough.js';
export { branch, RunnableBranch } from './branch.js';
export { RunnableBinding, type BindingOptions } from './binding.js';
export { RunnableRetry, type RetryOptions } from './retry.js';
export { RunnableWithFallbacks, type FallbackOptions } from './fallbacks.js';
export {
  RunnableConfigurableFields,
  RunnableConfigurableAlternatives,
  type ConfigurableFieldSpec,
  type AlternativesOptions,
} from './configurable.js';
export { RunnableEach } from './each.js';
export { toRunnable } from './coerce.js';
export { dispatchCustomEvent } from './custom-event.js';
export { mergeConfigs, DEFAULT_RECURSION_LIMIT, type ModelCall, type ModelCallHandler, type RunConfig, type RunnableConfig, type SaveHandler, type TakeBack, type TokenUsage, type UsageHandler } from './config.js';
export type { EventCallback, EventFilters, RunInfo, RunListeners, RunType, StreamEvent } from './events.js';
export { lifecycleCallback } from './events.js';
export type { PatchOp, RunLogPatch } from './stream-log.js';
export { concat, ChunkSum, collect, asSnapshot, type Mergeable } from './merge.js';
export { Graph, type GraphEdge, type GraphNode } from './graph.js';
export { toJsonSchema, specJsonSchema, type ConfigSpec, type JsonSchema } from './schema.js';
export { errorCodes, RunnelError, isRunnelError, isAbortError, abortError, type ErrorCode, type ErrorDetailItem } from './errors.js';
export { abortable, mapChunks, SKIP, raceAbort, sleep, withIdleTimeout, IdleGuard, once, onAbort, RunController, CancelToken, isCancelToken, toAbortSignal, type Cancellation } from './async.js';
export { callInScope } from './in-scope.js';
export { heldBytes } from './held-bytes.js';
export { canonicalJson } from './canonical.js';
export { cutText } from './text.js';
export { invokeAnswering, Saves } from './saves.js';
