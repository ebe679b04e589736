/**
 * F-string templates: `{name}` is a variable, `{{` and `}}` are literal
 * braces. `PromptTemplate` formats one into a `StringPromptValue`.
 */
import { z, type ZodType } from 'zod';
import { Runnable, RunnelError, type RunType } from '../core/index.js';
import { StringPromptValue } from './prompt-value.js';

type Part = { literal: string } | { variable: string };

/** Splits a template into literal text and variables; throws on an unbalanced brace. */
export function parseTemplate(template: string): Part[] {
  const parts: Part[] = [];
  let literal = '';
  for (let i = 0; i < template.length; i++) {
    const ch = template[i];
    const next = template[i + 1];
    if (ch === '{' && next === '{') {
      literal += '{';
      i++;
    } else if (ch === '}' && next === '}') {
      literal += '}';
      i++;
    } else if (ch === '{') {
      const end = template.indexOf('}', i);
      const name = end === -1 ? '' : template.slice(i + 1, end).trim();
      if (end === -1 || name === '' || name.includes('{')) {
        throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Invalid template: unmatched '{' at ${i} in ${JSON.stringify(template)}`);
      }
      if (literal !== '') parts.push({ literal });
      literal = '';
      parts.push({ variable: name });
      i = end;
    } else if (ch === '}') {
      throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Invalid template: single '}' at ${i} in ${JSON.stringify(template)} (write '}}' for a brace)`);
    } else {
      literal += ch;
    }
  }
  if (literal !== '') parts.push({ literal });
  return parts;
}

/** Parsed templates by text: a chat prompt formats the same few templates on every call. */
const parsed = new Map<string, readonly Part[]>();
/** Templates remembered at most (a prompt built from changing text must not grow the map without bound). */
const PARSED_MAX = 1000;

/** {@link parseTemplate}, remembered for the template's text (the parts are shared: read them, do not change them). */
export function parseTemplateOnce(template: string): readonly Part[] {
  let parts = parsed.get(template);
  if (parts === undefined) {
    parts = parseTemplate(template);
    if (parsed.size >= PARSED_MAX) parsed.clear();
    parsed.set(template, parts);
  }
  return parts;
}

/** The variables of a template, each once, in order of appearance. */
export function templateVariables(template: string): string[] {
  return [...new Set(parseTemplate(template).flatMap((part) => ('variable' in part ? [part.variable] : [])))];
}

/** The text of a variable's value: strings as they are, other values as JSON. */
export function valueText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  return JSON.stringify(value) ?? '';
}

/**
 * The values a prompt is formatted with: `values`, and the partial variables they do not give — a function
 * among those is called at each formatting, for its value (LangChain's function partials: a date, say). A
 * function's promise is awaited by `invoke`; `format` and `formatMessages`, synchronous, refuse it.
 */
export function withPartials(partials: Readonly<Record<string, unknown>>, values: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const all: Record<string, unknown> = {};
  for (const name in partials) {
    if (!Object.hasOwn(partials, name) || Object.hasOwn(values, name)) continue;
    const value = partials[name];
    all[name] = typeof value === 'function' ? (value as () => unknown)() : value;
  }
  return Object.assign(all, values);
}

/** `values` with the promises of async partial variables settled: `values` itself, at once, when it holds none. */
export function settledPartials(values: Record<string, unknown>): Record<string, unknown> | Promise<Record<string, unknown>> {
  for (const name in values) if (values[name] instanceof Promise) return settleAll(values);
  return values;
}

async function settleAll(values: Record<string, unknown>): Promise<Record<string, unknown>> {
  for (const name in values) {
    const value = values[name];
    if (value instanceof Promise) values[name] = await value;
  }
  return values;
}

/** Refuses a promise among the values of a synchronous formatting (an async function partial): `invoke` awaits it. */
export function refusePending(values: Readonly<Record<string, unknown>>): void {
  for (const name in values) {
    const value = values[name];
    if (!(value instanceof Promise)) continue;
    value.catch(() => undefined);
    throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Partial variable '${name}' is an async function: format the prompt with invoke(), which awaits it`);
  }
}

/** The error for a variable the input lacks, naming it. */
export function missingVariable(name: string): RunnelError {
  return new RunnelError('RUNNEL_ERR_INPUT_INVALID', `Missing value for prompt variable '${name}'`, {
    detail: [{ type: 'missing', loc: [name], msg: 'Field required' }],
  });
}

/** Fills a parsed template from `values`; a missing variable raises an error that names it. */
export function formatParts(parts: readonly Part[], values: Readonly<Record<string, unknown>>): string {
  let out = '';
  for (const part of parts) {
    if ('literal' in part) {
      out += part.literal;
      continue;
    }
    if (!Object.hasOwn(values, part.variable) || values[part.variable] === undefined) throw missingVariable(part.variable);
    out += valueText(values[part.variable]);
  }
  return out;
}

/** The input object a prompt expects. */
export function requireInputObject(input: unknown, who: string): Record<string, unknown> {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw new RunnelError('RUNNEL_ERR_INPUT_INVALID', `${who} expects an object of prompt variables`, {
      detail: [{ type: 'dict_type', loc: [], msg: 'Input should be an object' }],
    });
  }
  return input as Record<string, unknown>;
}

/** Options of {@link PromptTemplate.fromTemplate}. */
export interface PromptTemplateOptions {
  /** Values fixed ahead of time; the input may still override them. */
  partialVariables?: Record<string, unknown>;
}

/**
 * A text prompt from an f-string template.
 *
 * @example
 * const prompt = PromptTemplate.fromTemplate('Tell me a joke about {topic}');
 * (await prompt.invoke({ topic: 'cats' })).toString(); // 'Tell me a joke about cats'
 */
export class PromptTemplate extends Runnable<Record<string, unknown>, StringPromptValue> {
  readonly name = 'PromptTemplate';
  override readonly runType: RunType = 'prompt';
  readonly template: string;
  readonly inputVariables: string[];
  readonly partialVariables: Readonly<Record<string, unknown>>;
  private readonly parts: Part[];

  constructor(template: string, options: PromptTemplateOptions = {}) {
    super();
    this.template = template;
    this.parts = parseTemplate(template);
    this.partialVariables = options.partialVariables ?? {};
    this.inputVariables = templateVariables(template).filter((name) => !Object.hasOwn(this.partialVariables, name));
  }

  static fromTemplate(template: string, options?: PromptTemplateOptions): PromptTemplate {
    return new PromptTemplate(template, options);
  }

  /** A copy with some variables fixed. */
  partial(values: Record<string, unknown>): PromptTemplate {
    return new PromptTemplate(this.template, { partialVariables: { ...this.partialVariables, ...values } });
  }

  /** The formatted text. */
  format(values: Record<string, unknown>): string {
    const all = withPartials(this.partialVariables, values);
    refusePending(all);
    return formatParts(this.parts, all);
  }

  override get inputSchema(): ZodType {
    const shape: Record<string, ZodType> = {};
    for (const name of templateVariables(this.template)) {
      shape[name] = Object.hasOwn(this.partialVariables, name) ? z.string().optional() : z.string();
    }
    return z.object(shape);
  }

  override get outputSchema(): ZodType {
    return z.object({ type: z.enum(['StringPromptValue']), text: z.string() });
  }

  protected override async _call(input: Record<string, unknown>): Promise<StringPromptValue> {
    const values = settledPartials(withPartials(this.partialVariables, requireInputObject(input, this.name)));
    return new StringPromptValue(formatParts(this.parts, values instanceof Promise ? await values : values));
  }
}
