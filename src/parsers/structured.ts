/**
 * `StructuredOutputParser.fromZod(schema)`: JSON out of a model's text,
 * checked against a zod schema, with format instructions to put in the prompt.
 */
import { z, type ZodType } from 'zod';
import { Runnable, RunnelError, toJsonSchema, type RunType } from '../core/index.js';
import { parseJsonText } from './json.js';
import { textOf } from './text.js';

/**
 * Parses and validates a model's JSON answer. A failure is
 * `RUNNEL_ERR_OUTPUT_PARSE` whose `detail` carries the raw text and the zod
 * issues.
 *
 * @example
 * const parser = StructuredOutputParser.fromZod(z.object({ name: z.string(), age: z.number() }));
 * const prompt = PromptTemplate.fromTemplate('{question}\n{format}', { partialVariables: { format: parser.getFormatInstructions() } });
 */
export class StructuredOutputParser<T> extends Runnable<unknown, T> {
  readonly name = 'StructuredOutputParser';
  override readonly runType: RunType = 'parser';
  readonly schema: ZodType<T>;

  constructor(schema: ZodType<T>) {
    super();
    this.schema = schema;
  }

  static fromZod<T>(schema: ZodType<T>): StructuredOutputParser<T> {
    return new StructuredOutputParser(schema);
  }

  override get outputSchema(): ZodType {
    return this.schema;
  }

  /** Text telling the model the exact JSON to answer with. */
  getFormatInstructions(): string {
    const schema = JSON.stringify(toJsonSchema(this.schema));
    return [
      'Respond with one JSON value that conforms to the JSON Schema below, and nothing else.',
      'Wrap it in a ```json code fence.',
      '',
      '```json',
      schema,
      '```',
    ].join('\n');
  }

  /** Parses and validates `text`. */
  parse(text: string): T {
    const value = parseJsonText(text, this.name);
    const result = this.schema.safeParse(value);
    if (result.success) return result.data;
    throw new RunnelError('RUNNEL_ERR_OUTPUT_PARSE', `${this.name}: the model's output does not match the schema: ${z.prettifyError(result.error)}`, {
      detail: {
        text,
        issues: result.error.issues.map((issue) => ({
          type: issue.code,
          loc: issue.path.map((part) => (typeof part === 'number' ? part : String(part))),
          msg: issue.message,
        })),
      },
    });
  }

  protected override async _call(input: unknown): Promise<T> {
    return this.parse(textOf(input, this.name));
  }

  /** Whether a model's answer parses and meets the schema (a model before this parser in a sequence keeps one that does not out of its cache). */
  accepts(answer: unknown): boolean {
    try {
      this.parse(textOf(answer, this.name));
      return true;
    } catch {
      return false;
    }
  }
}
