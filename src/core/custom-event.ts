/**
 * `dispatchCustomEvent(name, data)`: lets code inside a lambda or generator
 * report progress. The event appears in `streamEvents` as `on_custom_event`
 * under the run of the function that dispatched it.
 */
import { SCOPE, scopeStorage, type RunnableConfig, type Scope } from './config.js';
import { RunnelError } from './errors.js';

/**
 * Emits `on_custom_event` named `name` with `data` under the current run.
 * Call it inside a lambda or generator (or pass the config it received).
 *
 * @example
 * lambda(async (doc: string) => {
 *   dispatchCustomEvent('progress', { step: 'parsing' });
 *   return parse(doc);
 * });
 */
export function dispatchCustomEvent(name: string, data: unknown, config?: RunnableConfig): void {
  const scope = (config as { [SCOPE]?: Scope } | undefined)?.[SCOPE] ?? scopeStorage.getStore();
  if (scope?.parent === undefined) {
    throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', 'dispatchCustomEvent must be called inside a running lambda or generator');
  }
  scope.parent.custom(name, data);
}
