/**
 * `streamLog`: the run as a growing JSON document, sent as JSON Patch
 * operations — LangServe's `/stream_log`. A view of the same events
 * `streamEvents` yields: the root run fills `streamed_output` and
 * `final_output`, every sub-run that passes the filters gets an entry under
 * `/logs/{name}` (`name:2` for a repeated name).
 */
import type { Scope } from './config.js';
import { eventFilter, runTypeOf, type EventFilters } from './events.js';
import { concat, isPlainObject } from './merge.js';
import type { Runnable } from './runnable.js';
import { runEvents } from './stream-events.js';

/** One JSON Patch operation. */
export interface PatchOp {
  op: 'add' | 'replace' | 'remove';
  path: string;
  value?: unknown;
}

/** One step of a run log: a batch of patch operations. */
export interface RunLogPatch {
  ops: PatchOp[];
}

function textOf(chunk: unknown): string | undefined {
  if (typeof chunk === 'string') return chunk;
  if (chunk !== null && typeof chunk === 'object') {
    const content = (chunk as { content?: unknown; text?: unknown }).content ?? (chunk as { text?: unknown }).text;
    if (typeof content === 'string') return content;
  }
  return undefined;
}

/** A message's text, as LangChain's `ChatGeneration.text`: its string content, or its text parts joined. */
function generationText(message: unknown): string {
  const content = (message as { content?: unknown } | null)?.content;
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((part: unknown) => (typeof part === 'string' ? part : (part as { type?: unknown; text?: unknown } | null)?.type === 'text' ? String((part as { text?: unknown }).text ?? '') : '')).join('');
}

/**
 * A sub-run's `final_output` as LangServe's run log has it (its tracer's `outputs`): a chat model's run gives
 * an `LLMResult`, a retriever's `{documents}`, a prompt's its value, a tool's `{output}`; any other run its output
 * when that is an object of fields, else `{output}`. (The root's `final_output` is the output itself.)
 */
export function logOutput(type: string, output: unknown): unknown {
  if (type === 'llm') {
    const chunk = (output as { type?: unknown } | null)?.type === 'AIMessageChunk';
    return { generations: [[{ text: generationText(output), generation_info: null, type: chunk ? 'ChatGenerationChunk' : 'ChatGeneration', message: output ?? null }]], llm_output: null, run: null, type: 'LLMResult' };
  }
  if (type === 'retriever') return { documents: output ?? [] };
  // A tool's is always wrapped (LangChain's tracer sets `{output}` on a tool run whatever the output).
  if (type === 'tool') return { output: output ?? null };
  if (type === 'prompt' || isPlainObject(output)) return output ?? null;
  return { output: output ?? null };
}

const escapeKey = (key: string): string => key.replace(/~/g, '~0').replace(/\//g, '~1');

/**
 * The run type as LangChain's run logs name it: a chat model's run is an
 * `llm` run there (Python and JS alike), so `include_types: ["llm"]` finds
 * model logs; `stream_events` keeps `on_chat_model_*`.
 */
function logRunType(event: Parameters<typeof runTypeOf>[0]): string {
  const type = runTypeOf(event);
  return type === 'chat_model' ? 'llm' : type;
}

/** `Runnable.streamLog`. @internal */
export async function* streamLog<I>(
  runnable: Runnable<I, unknown>,
  input: I,
  scope: Scope,
  filters?: EventFilters,
): AsyncGenerator<RunLogPatch> {
  const accept = eventFilter(filters);
  const keys = new Map<string, string>();
  const seen = new Map<string, number>();
  let rootId: string | undefined;
  let final: unknown;
  let streamed = false;

  for await (const [event, time] of runEvents(runnable, input, scope, { map: (e, t) => [e, t] as const })) {
    const phase = event.event.slice(event.event.lastIndexOf('_') + 1);
    // The first event is the root's start: its input is known, so it starts before anything inside it.
    rootId ??= event.run_id;
    if (event.run_id === rootId) {
      if (phase === 'start') {
        yield {
          ops: [
            {
              op: 'replace',
              path: '',
              value: { id: event.run_id, streamed_output: [], final_output: null, logs: {}, name: event.name, type: logRunType(event) },
            },
          ],
        };
      } else if (phase === 'stream') {
        final = streamed ? concat(final, event.data.chunk) : event.data.chunk;
        streamed = true;
        yield {
          ops: [
            // JSON Patch needs a value: an undefined chunk is null, as /invoke answers it.
            { op: 'add', path: '/streamed_output/-', value: event.data.chunk ?? null },
            { op: 'replace', path: '/final_output', value: final ?? null },
          ],
        };
      } else if (phase === 'end' && !streamed) {
        const output = event.data.output ?? null;
        // A prompt, a retriever and a tool emit no stream events: at the root, their output is the stream's one
        // chunk, as LangChain's log has it (a tool served as a chain streamed nothing here).
        const type = runTypeOf(event);
        const whole = type === 'prompt' || type === 'retriever' || type === 'tool';
        yield { ops: whole ? [{ op: 'add', path: '/streamed_output/-', value: output }, { op: 'replace', path: '/final_output', value: output }] : [{ op: 'replace', path: '/final_output', value: output }] };
      }
      continue;
    }
    if (event.event === 'on_custom_event') continue;
    if (phase === 'start') {
      if (accept !== undefined && !accept(event, logRunType(event))) continue;
      const count = (seen.get(event.name) ?? 0) + 1;
      seen.set(event.name, count);
      const key = count === 1 ? event.name : `${event.name}:${count}`;
      keys.set(event.run_id, key);
      yield {
        ops: [
          {
            op: 'add',
            path: `/logs/${escapeKey(key)}`,
            value: {
              id: event.run_id,
              name: event.name,
              type: logRunType(event),
              tags: event.tags,
              metadata: event.metadata,
              start_time: new Date(time).toISOString(),
              streamed_output: [],
              streamed_output_str: [],
              final_output: null,
              end_time: null,
            },
          },
        ],
      };
      continue;
    }
    const key = keys.get(event.run_id);
    if (key === undefined) continue;
    const path = `/logs/${escapeKey(key)}`;
    if (phase === 'stream') {
      const ops = [{ op: 'add', path: `${path}/streamed_output/-`, value: event.data.chunk ?? null }] as RunLogPatch['ops'];
      // Only a model's tokens are strings of the log (LangChain's tracer adds them from its token callback): a
      // parser's text chunks, there too, were counted twice by a client adding up every streamed_output_str.
      const text = logRunType(event) === 'llm' ? textOf(event.data.chunk) : undefined;
      if (text !== undefined) ops.unshift({ op: 'add', path: `${path}/streamed_output_str/-`, value: text });
      yield { ops };
    } else if (phase === 'end') {
      yield {
        ops: [
          { op: 'add', path: `${path}/final_output`, value: logOutput(logRunType(event), event.data.output) },
          { op: 'add', path: `${path}/end_time`, value: new Date(time).toISOString() },
        ],
      };
    } else if (phase === 'error') {
      yield {
        ops: [
          { op: 'add', path: `${path}/error`, value: event.data.error ?? null },
          { op: 'add', path: `${path}/end_time`, value: new Date(time).toISOString() },
        ],
      };
    }
  }
}
