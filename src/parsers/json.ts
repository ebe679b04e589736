/**
 * `JsonOutputParser`: JSON out of a model's text. Streamed, it yields ever
 * more complete objects as the model types (each a snapshot that replaces
 * the one before), tolerating a ```json fence around the JSON.
 */
import { isDeepStrictEqual } from 'node:util';
import { z, type ZodType } from 'zod';
import { asSnapshot, Runnable, RunnelError, type RunType } from '../core/index.js';
import { parsePartialJson } from '../messages/index.js';
import { stripFences, textOf } from './text.js';

/** Parses complete JSON text (fences allowed) or throws `RUNNEL_ERR_OUTPUT_PARSE` carrying the text. */
export function parseJsonText(text: string, who: string): unknown {
  const body = stripFences(text).trim();
  try {
    return JSON.parse(body) as unknown;
  } catch (error) {
    throw new RunnelError('RUNNEL_ERR_OUTPUT_PARSE', `${who} could not parse the model's output as JSON`, {
      cause: error,
      detail: { text, issues: [{ type: 'json_invalid', loc: [], msg: (error as Error).message }] },
    });
  }
}

function snapshot(value: unknown): unknown {
  return value !== null && typeof value === 'object' ? asSnapshot(structuredClone(value)) : value;
}

/**
 * Parses a model's text as JSON.
 *
 * @example
 * for await (const partial of prompt.pipe(model).pipe(new JsonOutputParser()).stream(input)) render(partial);
 */
export class JsonOutputParser<T = unknown> extends Runnable<unknown, T> {
  readonly name: string = 'JsonOutputParser';
  override readonly runType: RunType = 'parser';
  protected readonly schema: ZodType | undefined;

  constructor(options: { schema?: ZodType<T> } = {}) {
    super();
    this.schema = options.schema;
  }

  override get outputSchema(): ZodType {
    return this.schema ?? z.unknown();
  }

  protected override async _call(input: unknown): Promise<T> {
    return parseJsonText(textOf(input, this.name), this.name) as T;
  }

  /** Whether a model's answer parses (a model before this parser in a sequence keeps one that does not out of its cache). */
  accepts(answer: unknown): boolean {
    try {
      parseJsonText(textOf(answer, this.name), this.name);
      return true;
    } catch {
      return false;
    }
  }

  protected override async *_transform(inputs: AsyncIterable<unknown>): AsyncGenerator<T> {
    let text = '';
    let last: unknown;
    let yielded = false;
    for await (const chunk of inputs) {
      text += textOf(chunk, this.name);
      const parsed = parsePartialJson(stripFences(text));
      if (parsed === undefined || (yielded && isDeepStrictEqual(parsed, last))) continue;
      last = parsed;
      yielded = true;
      yield snapshot(parsed) as T;
    }
    // The whole text must be JSON: a stream that never parsed fails like invoke would.
    const final = parseJsonText(text, this.name);
    if (!yielded || !isDeepStrictEqual(final, last)) yield snapshot(final) as T;
  }
}
