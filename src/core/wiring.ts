/**
 * Late-bound constructors of the combinators. `Runnable`'s methods (`pipe`,
 * `withRetry`, ...) build combinators that themselves extend `Runnable`;
 * each combinator module fills its entry here when loaded, which breaks the
 * import cycle. `src/core/index.ts` loads them all.
 * @internal
 */
import type { RunnableConfig } from './config.js';
import type { RunListeners } from './events.js';
import type { ZodType } from 'zod';
import type { Runnable } from './runnable.js';
import type { RetryOptions } from './retry.js';
import type { FallbackOptions } from './fallbacks.js';
import type { ConfigurableFieldSpec, AlternativesOptions } from './configurable.js';

type AnyRunnable = Runnable<never, unknown>;

export interface Wiring {
  coerce(thing: unknown): AnyRunnable;
  sequence(steps: unknown[]): AnyRunnable;
  binding(
    bound: AnyRunnable,
    options: {
      config?: RunnableConfig;
      kwargs?: Record<string, unknown>;
      listeners?: RunListeners;
      inputSchema?: ZodType;
      outputSchema?: ZodType;
    },
  ): AnyRunnable;
  retry(bound: AnyRunnable, options: RetryOptions): AnyRunnable;
  fallbacks(bound: AnyRunnable, options: FallbackOptions): AnyRunnable;
  each(bound: AnyRunnable): AnyRunnable;
  pick(keys: string | string[]): AnyRunnable;
  assign(mapping: Record<string, unknown>): AnyRunnable;
  configurableFields(bound: AnyRunnable, fields: Record<string, ConfigurableFieldSpec>): AnyRunnable;
  configurableAlternatives(bound: AnyRunnable, options: AlternativesOptions): AnyRunnable;
}

export const wiring = {} as Wiring;
