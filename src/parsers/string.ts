/** `StringOutputParser`: a model's answer as plain text, streamed token by token. */
import { z, type ZodType } from 'zod';
import { mapChunks, Runnable, SKIP, type RunType } from '../core/index.js';
import { textOf } from './text.js';

/**
 * Turns messages (and message chunks, as they stream) into their text.
 *
 * @example
 * prompt.pipe(model).pipe(new StringOutputParser());
 */
export class StringOutputParser extends Runnable<unknown, string> {
  // Its runs are named as LangChain's (Python's and JS's) are: a LangServe client filters events and reads
  // `/logs/StrOutputParser` by that name.
  readonly name = 'StrOutputParser';
  override readonly runType: RunType = 'parser';

  override get outputSchema(): ZodType {
    return z.string();
  }

  protected override async _call(input: unknown): Promise<string> {
    return textOf(input, this.name);
  }

  protected override _transform(inputs: AsyncIterable<unknown>): AsyncGenerator<string> {
    return mapChunks(inputs, (chunk) => {
      const text = textOf(chunk, this.name);
      return text === '' ? SKIP : text;
    });
  }
}
