/**
 * `chatModelFromEnv()`: the chat model the environment asks for.
 * `RUNNEL_MODEL=openai:gpt-4o-mini`, `anthropic:claude-...` or `fake`;
 * without it, OpenAI when `OPENAI_API_KEY` is set, Anthropic when
 * `ANTHROPIC_API_KEY` is, otherwise the offline fake model — with one log
 * line saying which.
 */
import { RunnelError } from '../core/index.js';
import { ChatAnthropic } from './anthropic.js';
import type { ChatModel, ChatModelOptions } from './chat-model.js';
import { FakeListChatModel } from './fake.js';
import { ChatOpenAI } from './openai.js';

/** What the offline model answers when nothing else is configured. */
export const OFFLINE_ANSWER =
  'This answer comes from the offline model: Runnel has no model provider configured, so a fake model answers. ' +
  'Set OPENAI_API_KEY or ANTHROPIC_API_KEY (or RUNNEL_MODEL) for real answers.';

/** Options of {@link chatModelFromEnv}. */
export interface ChatModelFromEnvOptions extends ChatModelOptions {
  env?: Record<string, string | undefined>;
  /** Receives the one line that says which model was chosen (default: none). */
  log?: (line: string) => void;
  /** Answers of the offline model. */
  offlineResponses?: string[];
  /** Makes the offline model instead (e.g. a `ScriptedChatModel` that uses its input); `offlineResponses` is then unused. */
  offline?: (options: ChatModelOptions) => ChatModel;
}

/**
 * The chat model the environment configures.
 *
 * @example
 * const model = chatModelFromEnv({ log: (line) => logger.info(line) });
 */
export function chatModelFromEnv(options: ChatModelFromEnvOptions = {}): ChatModel {
  const { env = process.env, log = () => {}, offlineResponses = [OFFLINE_ANSWER], offline: makeOffline, ...modelOptions } = options;
  const spec = env.RUNNEL_MODEL?.trim();
  const offline = (): ChatModel => makeOffline?.(modelOptions) ?? new FakeListChatModel({ ...modelOptions, responses: offlineResponses });
  // Keys and endpoints come from the environment given (never from a request).
  const openai = { ...defined({ apiKey: env.OPENAI_API_KEY, baseURL: env.OPENAI_BASE_URL }) };
  const anthropic = { ...defined({ apiKey: env.ANTHROPIC_API_KEY, baseURL: env.ANTHROPIC_BASE_URL }) };
  if (spec !== undefined && spec !== '') {
    const [provider, ...rest] = spec.split(':');
    const model = rest.join(':') || undefined;
    const chosen = { ...modelOptions, ...(model === undefined ? {} : { model }) };
    if (provider === 'openai') {
      log(`chat model: openai ${model ?? 'gpt-4o-mini'} (RUNNEL_MODEL)`);
      return new ChatOpenAI({ ...chosen, ...openai });
    }
    if (provider === 'anthropic') {
      log(`chat model: anthropic ${model ?? 'claude-3-5-haiku-latest'} (RUNNEL_MODEL)`);
      return new ChatAnthropic({ ...chosen, ...anthropic });
    }
    if (provider === 'fake') {
      log('chat model: the offline fake model (RUNNEL_MODEL=fake)');
      return offline();
    }
    throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `RUNNEL_MODEL must be openai:<model>, anthropic:<model> or fake, got ${JSON.stringify(spec)}`);
  }
  if (env.OPENAI_API_KEY) {
    log('chat model: openai gpt-4o-mini (OPENAI_API_KEY is set)');
    return new ChatOpenAI({ ...modelOptions, ...openai });
  }
  if (env.ANTHROPIC_API_KEY) {
    log('chat model: anthropic claude-3-5-haiku-latest (ANTHROPIC_API_KEY is set)');
    return new ChatAnthropic({ ...modelOptions, ...anthropic });
  }
  log('chat model: no OPENAI_API_KEY, ANTHROPIC_API_KEY or RUNNEL_MODEL — using the offline fake model');
  return offline();
}

/** The entries whose value is a non-empty string. */
function defined(entries: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(entries).filter((entry): entry is [string, string] => typeof entry[1] === 'string' && entry[1] !== ''));
}
