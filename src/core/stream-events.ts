/**
 * `streamEvents`: runs a runnable with a channel in its event sink and yields
 * what its runs emit. Reading is pull-driven: the run advances only when the
 * reader has taken every queued event, so a slow reader slows the run down
 * (events that runs emit while one output chunk is pending are queued).
 */
import { once } from './async.js';
import { scopeWith, type Scope } from './config.js';
import { eventFilter, EventSink, runTypeOf, type EventFilters, type StreamEvent } from './events.js';
import type { Runnable } from './runnable.js';

const noop = (): void => {};

/**
 * Runs `runnable` and yields its events, each mapped with the time it was
 * emitted (ms since the epoch). Shared by `streamEvents` and `streamLog`.
 * @internal
 */
export async function* runEvents<I, T>(
  runnable: Runnable<I, unknown>,
  input: I,
  base: Scope,
  options: { filters?: EventFilters | undefined; map: (event: StreamEvent, time: number) => T },
): AsyncGenerator<T> {
  const { filters, map } = options;
  const queue: T[] = [];
  const accept = eventFilter(filters);
  let wake: (() => void) | undefined;
  const channel = (event: StreamEvent, time: number): void => {
    if (accept !== undefined && !accept(event, runTypeOf(event))) return;
    queue.push(map(event, time));
    if (wake !== undefined) {
      const resume = wake;
      wake = undefined;
      resume();
    }
  };
  const scope = scopeWith(base, { sink: EventSink.extend(base.sink, { channel }) });
  const source = runnable._streamIn(once(input), scope, { value: input });
  let pending: Promise<void> | undefined;
  let done = false;
  let failure: { error: unknown } | undefined;
  try {
    for (;;) {
      while (queue.length > 0) yield queue.shift() as T;
      if (done) {
        if (failure !== undefined) throw failure.error;
        return;
      }
      pending ??= source.next().then(
        (result) => {
          pending = undefined;
          if (result.done === true) done = true;
        },
        (error: unknown) => {
          pending = undefined;
          done = true;
          failure = { error };
        },
      );
      const step = pending;
      await new Promise<void>((resolve) => {
        wake = resolve;
        step.then(resolve, resolve);
      });
      wake = undefined;
    }
  } finally {
    if (!done) source.return(undefined).catch(noop);
  }
}

const eventOnly = (event: StreamEvent): StreamEvent => event;

/** `Runnable.streamEvents`: the events alone. @internal */
export function streamEvents<I>(runnable: Runnable<I, unknown>, input: I, scope: Scope, filters?: EventFilters): AsyncGenerator<StreamEvent> {
  return runEvents(runnable, input, scope, { filters, map: eventOnly });
}
