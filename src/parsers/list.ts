/** `CommaSeparatedListOutputParser`: a list out of "a, b, c", streamed an item at a time. */
import { z, type ZodType } from 'zod';
import { Runnable, type RunType } from '../core/index.js';
import { textOf } from './text.js';

const split = (text: string): string[] =>
  text
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');

/**
 * Splits a model's answer on commas. Streamed, each item comes as a
 * one-element array once the comma after it has arrived (chunks concatenate
 * into the whole list).
 *
 * @example
 * prompt.pipe(model).pipe(new CommaSeparatedListOutputParser()); // ['red', 'green', 'blue']
 */
export class CommaSeparatedListOutputParser extends Runnable<unknown, string[]> {
  readonly name = 'CommaSeparatedListOutputParser';
  override readonly runType: RunType = 'parser';

  override get outputSchema(): ZodType {
    return z.array(z.string());
  }

  /** Text telling the model how to answer. */
  getFormatInstructions(): string {
    return 'Your response should be a list of comma separated values, eg: `foo, bar, baz`';
  }

  protected override async _call(input: unknown): Promise<string[]> {
    return split(textOf(input, this.name));
  }

  protected override async *_transform(inputs: AsyncIterable<unknown>): AsyncGenerator<string[]> {
    let buffer = '';
    for await (const chunk of inputs) {
      buffer += textOf(chunk, this.name);
      const comma = buffer.lastIndexOf(',');
      if (comma === -1) continue;
      for (const item of split(buffer.slice(0, comma))) yield [item];
      buffer = buffer.slice(comma + 1);
    }
    for (const item of split(buffer)) yield [item];
  }
}
