/**
 * Chat prompts: a list of message templates (`['system', 'You are {role}']`),
 * literal messages, placeholders for message lists (`['placeholder',
 * '{history}']`, `MessagesPlaceholder`) and few-shot examples, formatted into
 * a `ChatPromptValue`.
 */
import { z, type ZodType } from 'zod';
import { Runnable, RunnelError, type RunType } from '../core/index.js';
import {
  AIMessage,
  BaseMessage,
  ChatMessage,
  coerceMessages,
  HumanMessage,
  messagesSchema,
  SystemMessage,
  type ContentBlock,
  type MessageContent,
} from '../messages/index.js';
import { ChatPromptValue } from './prompt-value.js';
import { formatParts, missingVariable, parseTemplateOnce, refusePending, requireInputObject, settledPartials, templateVariables, withPartials } from './template.js';

/**
 * A slot for a list of messages (a conversation so far), filled from the
 * input variable `variableName`. An optional slot may be left out.
 *
 * @example
 * ChatPromptTemplate.fromMessages([['system', 'Be brief.'], new MessagesPlaceholder('history'), ['human', '{question}']]);
 */
export class MessagesPlaceholder {
  readonly variableName: string;
  readonly optional: boolean;

  constructor(options: string | { variableName: string; optional?: boolean }) {
    const o = typeof options === 'string' ? { variableName: options } : options;
    this.variableName = o.variableName;
    this.optional = o.optional ?? false;
  }
}

/** The roles a template tuple may name. */
type Role = 'human' | 'user' | 'ai' | 'assistant' | 'system' | 'developer' | 'placeholder';

/** What `fromMessages` accepts for one message. */
export type MessageTemplateLike =
  | [Role | (string & {}), MessageContent]
  | string
  | BaseMessage
  | MessagesPlaceholder
  | FewShotChatMessagePromptTemplate
  | ChatPromptTemplate;

type Entry =
  | { kind: 'template'; role: string; content: MessageContent }
  | { kind: 'placeholder'; variable: string; optional: boolean }
  | { kind: 'message'; message: BaseMessage }
  | { kind: 'nested'; prompt: { formatMessages(values: Record<string, unknown>): BaseMessage[]; variables(): Variables } };

interface Variables {
  text: string[];
  placeholders: { name: string; optional: boolean }[];
}

function contentVariables(content: MessageContent): string[] {
  if (typeof content === 'string') return templateVariables(content);
  return content.flatMap((block) => {
    if (block.type === 'text' && typeof block.text === 'string') return templateVariables(block.text);
    if (block.type === 'image_url') {
      const image = (block as { image_url: string | { url: string } }).image_url;
      return templateVariables(typeof image === 'string' ? image : image.url);
    }
    return [];
  });
}

function formatContent(content: MessageContent, values: Record<string, unknown>): MessageContent {
  if (typeof content === 'string') return formatParts(parseTemplateOnce(content), values);
  return content.map((block): ContentBlock => {
    if (block.type === 'text' && typeof block.text === 'string') return { ...block, type: 'text', text: formatParts(parseTemplateOnce(block.text), values) };
    if (block.type === 'image_url') {
      const image = (block as { image_url: string | { url: string; detail?: string } }).image_url;
      const url = formatParts(parseTemplateOnce(typeof image === 'string' ? image : image.url), values);
      return { type: 'image_url', image_url: typeof image === 'string' ? url : { ...image, url } };
    }
    return block;
  });
}

function messageFor(role: string, content: MessageContent): BaseMessage {
  switch (role) {
    case 'human':
    case 'user':
      return new HumanMessage({ content });
    case 'ai':
    case 'assistant':
      return new AIMessage({ content });
    case 'system':
    case 'developer':
      return new SystemMessage({ content });
    default:
      return new ChatMessage({ content, role });
  }
}

function toEntry(item: MessageTemplateLike): Entry {
  if (item instanceof BaseMessage) return { kind: 'message', message: item };
  if (item instanceof MessagesPlaceholder) return { kind: 'placeholder', variable: item.variableName, optional: item.optional };
  if (item instanceof FewShotChatMessagePromptTemplate || item instanceof ChatPromptTemplate) return { kind: 'nested', prompt: item };
  if (typeof item === 'string') return { kind: 'template', role: 'human', content: item };
  if (Array.isArray(item) && item.length === 2) {
    const [role, content] = item;
    if (role === 'placeholder') {
      const match = typeof content === 'string' ? /^\s*\{\s*([^{}\s]+)\s*\}\s*$/.exec(content) : null;
      if (match === null) throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `A placeholder is written ['placeholder', '{name}'], got ${JSON.stringify(content)}`);
      return { kind: 'placeholder', variable: match[1] as string, optional: true };
    }
    contentVariables(content); // validates the template now, not at the first call
    return { kind: 'template', role, content };
  }
  throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `Cannot make a message template of ${JSON.stringify(item)}`);
}

function entryVariables(entries: readonly Entry[]): Variables {
  const text: string[] = [];
  const placeholders: { name: string; optional: boolean }[] = [];
  for (const entry of entries) {
    if (entry.kind === 'template') text.push(...contentVariables(entry.content));
    else if (entry.kind === 'placeholder') placeholders.push({ name: entry.variable, optional: entry.optional });
    else if (entry.kind === 'nested') {
      const nested = entry.prompt.variables();
      text.push(...nested.text);
      placeholders.push(...nested.placeholders);
    }
  }
  return { text: [...new Set(text)], placeholders };
}

/**
 * A chat prompt: message templates, literal messages and placeholders.
 *
 * @example
 * const prompt = ChatPromptTemplate.fromMessages([
 *   ['system', 'You are a comedian.'],
 *   ['placeholder', '{history}'],
 *   ['human', 'Tell me a joke about {topic}'],
 * ]);
 * await prompt.invoke({ topic: 'cats' }); // ChatPromptValue with 2 messages
 */
export class ChatPromptTemplate extends Runnable<Record<string, unknown>, ChatPromptValue> {
  readonly name = 'ChatPromptTemplate';
  override readonly runType: RunType = 'prompt';
  readonly partialVariables: Readonly<Record<string, unknown>>;
  private readonly entries: readonly Entry[];

  constructor(messages: readonly MessageTemplateLike[], options: { partialVariables?: Record<string, unknown> } = {}) {
    super();
    this.entries = messages.map(toEntry);
    this.partialVariables = options.partialVariables ?? {};
  }

  static fromMessages(messages: readonly MessageTemplateLike[], options?: { partialVariables?: Record<string, unknown> }): ChatPromptTemplate {
    return new ChatPromptTemplate(messages, options);
  }

  /** One human message from a template. */
  static fromTemplate(template: string): ChatPromptTemplate {
    return new ChatPromptTemplate([['human', template]]);
  }

  /** A copy with some variables fixed. */
  partial(values: Record<string, unknown>): ChatPromptTemplate {
    const copy = Object.create(ChatPromptTemplate.prototype) as ChatPromptTemplate;
    return Object.assign(copy, this, { partialVariables: { ...this.partialVariables, ...values } });
  }

  /** The variables this prompt reads: text variables and placeholders. */
  variables(): Variables {
    return entryVariables(this.entries);
  }

  /** The names of the variables the input must (or may) provide. */
  get inputVariables(): string[] {
    const { text, placeholders } = this.variables();
    return [...text, ...placeholders.map((p) => p.name)].filter((name) => !Object.hasOwn(this.partialVariables, name));
  }

  /** The formatted messages. */
  formatMessages(values: Record<string, unknown>): BaseMessage[] {
    const all = withPartials(this.partialVariables, values);
    refusePending(all);
    return this.formatAll(all);
  }

  /** The formatted messages of values with the partial variables in them, settled. */
  private formatAll(all: Record<string, unknown>): BaseMessage[] {
    const out: BaseMessage[] = [];
    for (const entry of this.entries) {
      switch (entry.kind) {
        case 'message':
          out.push(entry.message);
          break;
        case 'template':
          out.push(messageFor(entry.role, formatContent(entry.content, all)));
          break;
        case 'placeholder': {
          const value = all[entry.variable];
          if (value === undefined || value === null) {
            if (entry.optional) break;
            throw missingVariable(entry.variable);
          }
          out.push(...coerceMessages(value, [entry.variable]));
          break;
        }
        case 'nested':
          out.push(...entry.prompt.formatMessages(all));
          break;
      }
    }
    return out;
  }

  override get inputSchema(): ZodType {
    const { text, placeholders } = this.variables();
    const shape: Record<string, ZodType> = {};
    for (const name of text) shape[name] = Object.hasOwn(this.partialVariables, name) ? z.string().optional() : z.string();
    for (const { name, optional } of placeholders) {
      shape[name] = optional || Object.hasOwn(this.partialVariables, name) ? messagesSchema.optional() : messagesSchema;
    }
    return z.object(shape);
  }

  override get outputSchema(): ZodType {
    return z.object({ type: z.enum(['ChatPromptValueConcrete']), messages: z.array(z.record(z.string(), z.unknown())) });
  }

  protected override async _call(input: Record<string, unknown>): Promise<ChatPromptValue> {
    const values = settledPartials(withPartials(this.partialVariables, requireInputObject(input, this.name)));
    return new ChatPromptValue(this.formatAll(values instanceof Promise ? await values : values));
  }
}

/**
 * Example exchanges shown to the model before the real question, each
 * formatted with `examplePrompt`.
 *
 * @example
 * const fewShot = new FewShotChatMessagePromptTemplate({
 *   examples: [{ input: '2+2', output: '4' }],
 *   examplePrompt: ChatPromptTemplate.fromMessages([['human', '{input}'], ['ai', '{output}']]),
 * });
 * ChatPromptTemplate.fromMessages([['system', 'You do sums.'], fewShot, ['human', '{input}']]);
 */
export class FewShotChatMessagePromptTemplate extends Runnable<Record<string, unknown>, ChatPromptValue> {
  readonly name = 'FewShotChatMessagePromptTemplate';
  override readonly runType: RunType = 'prompt';
  readonly examples: readonly Record<string, unknown>[];
  readonly examplePrompt: ChatPromptTemplate;

  constructor(options: { examples: Record<string, unknown>[]; examplePrompt: ChatPromptTemplate }) {
    super();
    this.examples = options.examples;
    this.examplePrompt = options.examplePrompt;
  }

  /** Examples are fixed: this prompt reads no input variables. */
  variables(): Variables {
    return { text: [], placeholders: [] };
  }

  formatMessages(): BaseMessage[] {
    return this.examples.flatMap((example) => this.examplePrompt.formatMessages(example));
  }

  override get inputSchema(): ZodType {
    return z.object({});
  }

  protected override async _call(): Promise<ChatPromptValue> {
    return new ChatPromptValue(this.formatMessages());
  }
}
