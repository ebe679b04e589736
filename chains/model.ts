/**
 * The chat model the shipped chains use: OpenAI or Anthropic when a key (or
 * RUNNEL_MODEL) says so, otherwise an offline model that says plainly that
 * it is one — and still uses what its chain gives it (the conversation, the
 * retrieved passages, the tools), so everything around it is real.
 */
import { chatModelFromEnv, RunnelError, ScriptedChatModel, type ChatModel, type ChatRequest, type ChatTurn, type FakeResponse, type Services } from '../src/index.js';

/** What the chains are built from. */
export interface ChainContext {
  services: Services;
  /** Model keys and endpoints (default `process.env`). */
  env?: Record<string, string | undefined>;
  /** Milliseconds before each token of the offline model (default 20: it streams visibly). */
  offlineDelayMs?: number;
  /**
   * Whether the `docs` collection holds Runnel's own README and `docs/` beside what users ingest (default true;
   * `RUNNEL_SEED_DOCS=false` for a server of your documents alone, whose start removes the ones seeded before).
   */
  seedDocs?: boolean;
}

/**
 * The offline model's preamble: no one should mistake its answers for a real model's. It names both ways the
 * offline model is chosen, since a key beside `RUNNEL_MODEL=fake` is read as "no key is set" otherwise.
 */
export const OFFLINE = 'Offline model (no OPENAI_API_KEY or ANTHROPIC_API_KEY, or RUNNEL_MODEL=fake: a scripted model answers):';

/** The model of one chain: the configured provider, or the offline model answering with `respond`. */
export function chatModel(context: ChainContext, respond: (request: ChatRequest) => string | FakeResponse): ChatModel {
  return chatModelFromEnv({
    env: context.env ?? process.env,
    cache: context.services.modelCache(),
    // recordCalls 0: a server's offline model serves for months and nothing reads what it was sent.
    offline: (options) => new ScriptedChatModel({ ...options, respond, sleepMs: context.offlineDelayMs ?? 20, recordCalls: 0 }),
  });
}

/** The text of the last message of a given type in a request. */
export function lastText(request: ChatRequest, type: 'human' | 'system' | 'tool'): string {
  for (let i = request.messages.length - 1; i >= 0; i--) {
    const message = request.messages[i];
    if (message?.type === type) return message.text;
  }
  return '';
}

/**
 * The user's new message: the last turn's text when the user sent it, else a clear 422 (a conversation
 * that ends with the assistant or a tool asks nothing these chains can answer).
 */
export function lastUserText(turns: readonly ChatTurn[]): string {
  const last = turns.at(-1);
  if (last?.role !== 'user' || last.text.trim() === '') {
    throw new RunnelError('RUNNEL_ERR_BODY_INVALID', 'The last message must be the user\'s, with text', {
      detail: [{ type: 'value_error', loc: ['messages', Math.max(0, turns.length - 1)], msg: 'The last message must be a user message with text' }],
    });
  }
  return last.text;
}

/** Shortens text for quoting. */
export function quote(text: string, max = 240): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}
