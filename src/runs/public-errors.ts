/**
 * What a run's events say of an error, as the server sends them: the error
 * frame of a stream says "Internal Server Error" for anything that is not
 * a Runnel error (its message may hold what a client must not read — a
 * connection string, a path, a key), and so do the `on_*_error` events of
 * `/stream_events` and the `error` entries of `/stream_log`. Runnel's own
 * errors keep their code and message, as their error frames do. In process,
 * `streamEvents` and `streamLog` keep every message.
 */
import type { RunLogPatch, StreamEvent } from '../core/index.js';

/** As a Runnel error reads in an event (`CODE: message`), so a client that reads the code finds one. */
const INTERNAL = 'RUNNEL_ERR_INTERNAL: Internal Server Error';

/** An event's error text as a client may read it: a Runnel error's (`RUNNEL_ERR_…: message`), else masked. */
function publicText(text: unknown): unknown {
  if (typeof text !== 'string') return text;
  return text.startsWith('RUNNEL_ERR_') && !text.startsWith('RUNNEL_ERR_INTERNAL') ? text : INTERNAL;
}

function publicEvent(event: StreamEvent): StreamEvent {
  if (!event.event.endsWith('_error') || event.data.error === undefined) return event;
  const error = publicText(event.data.error) as string;
  return error === event.data.error ? event : { ...event, data: { ...event.data, error } };
}

function publicPatch(patch: RunLogPatch): RunLogPatch {
  if (!patch.ops.some((op) => op.path.endsWith('/error'))) return patch;
  return { ...patch, ops: patch.ops.map((op) => (op.path.endsWith('/error') && 'value' in op ? { ...op, value: publicText(op.value) } : op)) };
}

/** `/stream_events`' events or `/stream_log`'s patches, their errors as a client may read them. */
export async function* publicErrors<T>(kind: 'stream_events' | 'stream_log', items: AsyncIterable<T>): AsyncGenerator<T> {
  const map = (kind === 'stream_events' ? publicEvent : publicPatch) as unknown as (item: T) => T;
  for await (const item of items) yield map(item);
}
