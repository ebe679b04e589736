/** `MemoryChatMessageHistory`: conversations in process memory — the default without Redis. */
import type { BaseMessage } from '../messages/index.js';
import { storable, type ChatMessageHistory } from './history.js';

/** Conversations of one process, each trimmed to its last `maxMessages`. */
export class MemoryHistoryStore {
  private readonly sessions = new Map<string, BaseMessage[]>();
  readonly maxMessages: number;

  constructor(options: { maxMessages?: number } = {}) {
    this.maxMessages = options.maxMessages ?? 200;
  }

  /** The history of one session. */
  history(sessionId: string): MemoryChatMessageHistory {
    return new MemoryChatMessageHistory(this.sessions, sessionId, this.maxMessages);
  }
}

/**
 * One conversation in memory.
 *
 * @example
 * const store = new MemoryHistoryStore();
 * await store.history('s1').addMessages([new HumanMessage('hi')]);
 */
export class MemoryChatMessageHistory implements ChatMessageHistory {
  constructor(
    private readonly sessions: Map<string, BaseMessage[]>,
    private readonly sessionId: string,
    private readonly maxMessages: number,
  ) {}

  async getMessages(): Promise<BaseMessage[]> {
    return [...(this.sessions.get(this.sessionId) ?? [])];
  }

  async addMessages(messages: BaseMessage[]): Promise<void> {
    const all = [...(this.sessions.get(this.sessionId) ?? []), ...messages.map(storable)];
    this.sessions.set(this.sessionId, all.slice(-this.maxMessages));
  }

  async clear(): Promise<void> {
    this.sessions.delete(this.sessionId);
  }
}
