/**
 * `tool(func, {name, description, schema})`: a function a model can call, as
 * a runnable of run type `tool`. Called with a model's tool call, it answers
 * with a `ToolMessage` — also when the arguments are invalid or the function
 * fails, so the model can read the error and try again instead of the run
 * crashing.
 */
import type { z, ZodType } from 'zod';
import { callInScope, isAbortError, Runnable, RunnelError, type Run, type RunConfig, type RunType } from '../core/index.js';
import { ToolMessage, type ToolCall } from '../messages/index.js';

/** Options of {@link tool}. */
export interface ToolOptions<S extends ZodType> {
  name: string;
  description: string;
  /** The arguments' schema; models receive it as JSON Schema. */
  schema: S;
}

function isToolCall(value: unknown): value is ToolCall & { id?: string } {
  return (
    value !== null &&
    typeof value === 'object' &&
    (value as { type?: unknown }).type === 'tool_call' &&
    typeof (value as { name?: unknown }).name === 'string' &&
    typeof (value as { args?: unknown }).args === 'object'
  );
}

function describeIssues(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : '(arguments)'}: ${issue.message}`).join('; ');
}

function contentOf(result: unknown): string {
  if (typeof result === 'string') return result;
  return JSON.stringify(result) ?? '';
}

/** A tool: see {@link tool}. */
export class StructuredTool<S extends ZodType = ZodType, O = unknown> extends Runnable<z.input<S> | ToolCall, O | ToolMessage> {
  readonly name: string;
  override readonly runType: RunType = 'tool';
  readonly description: string;
  readonly schema: S;
  private readonly func: (args: z.output<S>, config: RunConfig) => O | Promise<O>;

  constructor(func: (args: z.output<S>, config: RunConfig) => O | Promise<O>, options: ToolOptions<S>) {
    super();
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(options.name)) {
      throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Tool names are 1-64 letters, digits, '_' or '-': ${JSON.stringify(options.name)}`);
    }
    this.func = func;
    this.name = options.name;
    this.description = options.description;
    this.schema = options.schema;
  }

  override get inputSchema(): ZodType {
    return this.schema;
  }

  protected override async _call(input: z.input<S> | ToolCall, run: Run): Promise<O | ToolMessage> {
    if (!isToolCall(input)) {
      const parsed = this.schema.safeParse(input);
      if (!parsed.success) {
        throw new RunnelError('RUNNEL_ERR_INPUT_INVALID', `Invalid arguments for tool ${this.name}: ${describeIssues(parsed.error)}`, {
          detail: parsed.error.issues.map((issue) => ({ type: issue.code, loc: issue.path.map(String), msg: issue.message })),
        });
      }
      return await callInScope(run.scope, this.func, parsed.data);
    }
    const answer = (content: string, status: 'success' | 'error', artifact?: unknown): ToolMessage =>
      new ToolMessage({ content, tool_call_id: input.id ?? '', name: this.name, status, artifact });
    const parsed = this.schema.safeParse(input.args);
    if (!parsed.success) return answer(`Error: invalid arguments for ${this.name}: ${describeIssues(parsed.error)}. Fix them and call again.`, 'error');
    try {
      const result = await callInScope(run.scope, this.func, parsed.data);
      return answer(contentOf(result), 'success', typeof result === 'string' ? undefined : result);
    } catch (error) {
      // The run's own cancellation or timeout ends it; a step inside the tool that timed out on its own (a nested
      // runnable's `timeout`) is a failure of the tool, for the model to read, as any other.
      if (isAbortError(error) && run.signal?.aborted === true) throw error;
      return answer(`Error: ${this.name} failed: ${error instanceof Error ? error.message : String(error)}`, 'error');
    }
  }
}

/**
 * Makes a tool of a function (LangChain.js's `tool(func, {...})`).
 *
 * @example
 * const add = tool(({ a, b }) => a + b, {
 *   name: 'add',
 *   description: 'Adds two numbers',
 *   schema: z.object({ a: z.number(), b: z.number() }),
 * });
 */
export function tool<S extends ZodType, O>(
  func: (args: z.output<S>, config: RunConfig) => O | Promise<O>,
  options: ToolOptions<S>,
): StructuredTool<S, O> {
  return new StructuredTool(func, options);
}
