/**
 * `createToolCallingAgent`: a runnable that loops model → tool calls (run
 * concurrently) → tool messages → model, until the model answers without
 * calling a tool. Its answer is the text the model wrote in every step — a
 * step that calls a tool may say something first ("Let me look that up.") —
 * the steps' texts apart by a blank line, the same invoked or streamed.
 * Streamed, the tokens come as they are generated; every model and tool run
 * shows in the events. It stops with `RUNNEL_ERR_AGENT_MAX_ITERATIONS` after
 * `maxIterations` model calls.
 */
import { randomUUID } from 'node:crypto';
import { z, type ZodType } from 'zod';
import { cutText, once, Runnable, RunnelError, type Run, type RunType } from '../core/index.js';
import { AIMessage, AIMessageChunk, coerceMessages, HumanMessage, messagesSchema, SystemMessage, ToolMessage, type BaseMessage } from '../messages/index.js';
import type { ChatModel, ChatModelInput } from '../models/index.js';
import type { ChatPromptTemplate } from '../prompts/index.js';
import type { StructuredTool } from './tool.js';

/** Between the texts of two steps of an answer. */
const STEP_SEPARATOR = '\n\n';

const callId = (id: string | undefined): string => (id === undefined || id === '' ? `call_${randomUUID().replaceAll('-', '')}` : id);

/** The most of an unreadable call's arguments quoted back to the model. */
const QUOTED_ARGS = 500;

/** The names a tool can have ({@link StructuredTool}'s), which both providers take in a call they are sent. */
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** A name no tool can have, as the providers take it: each character they refuse `_`, at most 64. */
const sendableName = (name: string): string => name.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64) || '_';

/** The answer to a call of a tool named `name` that the agent does not have (`sent`: its id, and the name it goes under when not `name`). */
function noSuchTool(name: string, toolNames: readonly string[], sent: { id: string; name?: string }): ToolMessage {
  return new ToolMessage({ content: `Error: there is no tool named ${name === '' ? "''" : name}. Use one of: ${toolNames.join(', ')}.`, tool_call_id: sent.id, name: sent.name ?? name, status: 'error' });
}

/**
 * A step's answer as the conversation goes on with it, and the results of the calls it made that cannot run.
 *
 * - Every tool call gets an id. A compatible server may send calls without ids; each tool message must name
 *   the call it answers, or the next request pairs no result with its call (the adapters send such a call as
 *   `call_0`, its result as `''`: OpenAI-compatible servers and Anthropic refuse that, or the model reads two
 *   results of one tool for either call). Random, as two steps' calls must not share one.
 * - A call whose arguments do not parse, beside calls that do, goes on as a call with no arguments, answered
 *   by an error quoting what the model wrote: left out, the model never learnt it had not run (a probe). One
 *   without a name is still left out: the providers refuse a call named `''` (a 400 that would end the run).
 *   (An answer of such calls alone is no answer: {@link ToolCallingAgent.final} fails the run.)
 * - A call whose name no tool can have (`multi_tool_use.parallel`, which OpenAI's models make up; `''`) goes on
 *   under that name with what the providers refuse replaced by `_`, answered by the error that no tool has
 *   its name: sent as it was, OpenAI refuses the conversation (400 on `messages[i].tool_calls[j].function.name`,
 *   a probe) and the run ended instead of the model learning of its mistake.
 * - The refused calls come after the others, and their results in the same order: {@link ToolCallingAgent.callTools}
 *   pairs them by place, as two calls may share an id.
 */
function nextTurn(answer: AIMessage, toolNames: readonly string[]): { message: AIMessage; unreadable: ToolMessage[] } {
  const bad = answer.tool_calls.length === 0 ? [] : answer.invalid_tool_calls.filter((call) => call.name !== undefined && call.name !== '');
  const misnamed = answer.tool_calls.filter((call) => !TOOL_NAME.test(call.name));
  if (bad.length === 0 && misnamed.length === 0 && answer.tool_calls.every((call) => call.id !== undefined && call.id !== '')) return { message: answer, unreadable: [] };
  const renamed = misnamed.map((call) => ({ ...call, name: sendableName(call.name), id: callId(call.id) }));
  // Under a name the providers take too (the model's own is quoted in the answer).
  const refused = bad.map((call) => ({ name: sendableName(call.name as string), args: {}, id: callId(call.id), type: 'tool_call' as const }));
  const unreadable = [
    ...misnamed.map((call, i) => noSuchTool(call.name, toolNames, { id: renamed[i]?.id ?? '', name: renamed[i]?.name ?? '' })),
    ...bad.map((call, i) => {
      const quoted = cutText(call.args ?? '', QUOTED_ARGS);
      const content = `Error: the arguments of this call of ${call.name as string} could not be read (${call.error ?? 'malformed JSON'}), so it did not run. You wrote: ${quoted}`;
      return new ToolMessage({ content, tool_call_id: refused[i]?.id ?? '', name: refused[i]?.name ?? '', status: 'error' });
    }),
  ];
  const message = new AIMessage({
    content: answer.content,
    additional_kwargs: answer.additional_kwargs,
    response_metadata: answer.response_metadata,
    name: answer.name,
    id: answer.id,
    tool_calls: [...answer.tool_calls.filter((call) => TOOL_NAME.test(call.name)).map((call) => ({ ...call, id: callId(call.id) })), ...renamed, ...refused],
    invalid_tool_calls: [],
    usage_metadata: answer.usage_metadata,
  });
  return { message, unreadable };
}

/**
 * A call no tool runs — no tool has its name, or its arguments do not parse — as a tool run of that name
 * that answers the call's error: its events show the call and its failure, as a tool's own failure shows
 * (the AI SDK's UI stream makes a failed tool part of them; without them, the page showed an empty step and
 * then the model's reply to an error it never saw: a probe).
 */
class RefusedCall extends Runnable<unknown, ToolMessage> {
  override readonly runType: RunType = 'tool';

  constructor(
    readonly name: string,
    private readonly answer: ToolMessage,
  ) {
    super();
  }

  protected override async _call(): Promise<ToolMessage> {
    return this.answer;
  }
}

/** Options of {@link createToolCallingAgent}. */
export interface ToolCallingAgentOptions {
  model: ChatModel;
  tools: StructuredTool[];
  /** Formats the conversation from the input (`{input}`, and optionally `{chat_history}`); a plain system prompt by default. */
  prompt?: ChatPromptTemplate;
  /** Model calls at most (default 10). */
  maxIterations?: number;
  /** The system prompt when no `prompt` is given. */
  system?: string;
}

/** The agent's input: a question (and earlier messages). */
export interface AgentInput {
  input: string;
  chat_history?: unknown[];
}

/** The tool-calling agent; see {@link createToolCallingAgent}. */
export class ToolCallingAgent extends Runnable<AgentInput, string> {
  readonly name = 'ToolCallingAgent';
  private readonly model: Runnable<ChatModelInput, AIMessage>;
  private readonly tools: Map<string, StructuredTool>;
  private readonly prompt: ChatPromptTemplate | undefined;
  private readonly maxIterations: number;
  private readonly system: string;

  constructor(options: ToolCallingAgentOptions) {
    super();
    this.tools = new Map(options.tools.map((t) => [t.name, t]));
    this.model = options.model.bindTools(options.tools);
    this.prompt = options.prompt;
    this.maxIterations = options.maxIterations ?? 10;
    this.system = options.system ?? 'You are a helpful assistant. Use the tools when they help; answer plainly when you have what you need.';
  }

  override get inputSchema(): ZodType {
    return z.object({ input: z.string(), chat_history: messagesSchema.optional() });
  }

  override get outputSchema(): ZodType {
    return z.string();
  }

  override _children(): Runnable<never, unknown>[] {
    return [this.model as Runnable<never, unknown>, ...(this.tools.values() as Iterable<Runnable<never, unknown>>)];
  }

  private async conversation(input: AgentInput, run: Run): Promise<BaseMessage[]> {
    if (input === null || typeof input !== 'object' || typeof input.input !== 'string') {
      throw new RunnelError('RUNNEL_ERR_INPUT_INVALID', 'The agent takes {input: string, chat_history?: messages}', {
        detail: [{ type: 'missing', loc: ['input'], msg: 'Field required' }],
      });
    }
    if (this.prompt !== undefined) return (await this.prompt._invokeIn(input as never, run.scope)).toMessages();
    const history = input.chat_history === undefined ? [] : coerceMessages(input.chat_history, ['chat_history']);
    return [new SystemMessage(this.system), ...history, new HumanMessage(input.input)];
  }

  /** The results of the answer's calls, in their order: `unreadable` answers those whose arguments did not parse. */
  private async callTools(message: AIMessage, run: Run, unreadable: ToolMessage[]): Promise<ToolMessage[]> {
    // The refused calls are the last ones (see nextTurn): paired by place, not by id, which two calls may share.
    const readable = message.tool_calls.length - unreadable.length;
    return Promise.all(
      message.tool_calls.map(async (call, index) => {
        const asCall = { ...call, type: 'tool_call' };
        if (index >= readable) return new RefusedCall(call.name, unreadable[index - readable] as ToolMessage)._invokeIn(asCall, run.scope);
        const found = this.tools.get(call.name);
        if (found === undefined) return new RefusedCall(call.name, noSuchTool(call.name, [...this.tools.keys()], { id: call.id ?? '' }))._invokeIn(asCall, run.scope);
        return (await found._invokeIn(asCall as never, run.scope)) as ToolMessage;
      }),
    );
  }

  /**
   * The final answer's text — unless the model meant to call a tool and its call does not parse (cut short by
   * `max_tokens`, say): that is no answer, and an empty one would pass for it.
   */
  private final(answer: AIMessage): string {
    const invalid = answer.invalid_tool_calls[0];
    if (invalid !== undefined) {
      throw new RunnelError('RUNNEL_ERR_OUTPUT_PARSE', `The model's call of ${invalid.name ?? 'a tool'} could not be read: ${invalid.error ?? 'malformed arguments'}`, {
        detail: { text: invalid.args ?? '' },
      });
    }
    return answer.text;
  }

  private tooMany(): RunnelError {
    return new RunnelError('RUNNEL_ERR_AGENT_MAX_ITERATIONS', `The agent made ${this.maxIterations} model calls without a final answer`);
  }

  protected override async _call(input: AgentInput, run: Run): Promise<string> {
    const messages = await this.conversation(input, run);
    const said: string[] = [];
    for (let step = 1; step <= this.maxIterations; step++) {
      const { message: answer, unreadable } = nextTurn(await this.model._invokeIn(messages, run.child([`agent:step:${step}`])), [...this.tools.keys()]);
      messages.push(answer);
      if (answer.tool_calls.length === 0) {
        const text = this.final(answer);
        return (text === '' ? said : [...said, text]).join(STEP_SEPARATOR);
      }
      if (answer.text !== '') said.push(answer.text);
      messages.push(...(await this.callTools(answer, run, unreadable)));
    }
    throw this.tooMany();
  }

  protected override async *_stream(input: AgentInput, run: Run): AsyncGenerator<string> {
    const messages = await this.conversation(input, run);
    let said = false;
    for (let step = 1; step <= this.maxIterations; step++) {
      // Added up once the step ends: a concat per chunk re-reads the tool calls' arguments so far at every chunk,
      // an answer's worth of parsing per token (seconds of the event loop for a call that writes a long text).
      const pieces: AIMessageChunk[] = [];
      let first = true;
      for await (const chunk of this.model._streamIn(once(messages), run.child([`agent:step:${step}`]), { value: messages })) {
        const piece = chunk as unknown as AIMessageChunk;
        pieces.push(piece);
        if (piece.text === '') continue;
        // A step's first words after an earlier step's: a blank line between them, as invoke joins them.
        yield first && said ? STEP_SEPARATOR + piece.text : piece.text;
        first = false;
        said = true;
      }
      const { message, unreadable } = nextTurn((pieces.length === 0 ? new AIMessageChunk('') : AIMessageChunk.merge(pieces)).toMessage(), [...this.tools.keys()]);
      messages.push(message);
      if (message.tool_calls.length === 0) {
        this.final(message);
        return;
      }
      messages.push(...(await this.callTools(message, run, unreadable)));
    }
    throw this.tooMany();
  }
}

/**
 * An agent that answers with the help of tools.
 *
 * @example
 * const agent = createToolCallingAgent({ model, tools: [calculator], maxIterations: 5 });
 * await agent.invoke({ input: 'What is 17 * 23?' });
 */
export function createToolCallingAgent(options: ToolCallingAgentOptions): ToolCallingAgent {
  return new ToolCallingAgent(options);
}
