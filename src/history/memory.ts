/** `MemoryChatMessageHistory`: conversations in process memory — the default without Redis. */
import type { BaseMessage } from '../messages/index.js';
import { storable, type ChatMessageHistory } from './history.js';

/**
 * Conversations of one process, each trimmed to its last `maxMessages`; at
 * most `maxSessions` conversations, the least recently written forgotten
 * first — a process's memory must not grow with every new `session_id` a
 * client makes up (Redis histories expire instead).
 */
export class MemoryHistoryStore {
  private readonly sessions = new Map<string, BaseMessage[]>();
  readonly maxMessages: number;
  readonly maxSessions: number;

  constructor(options: { maxMessages?: number; maxSessions?: number } = {}) {
    this.maxMessages = options.maxMessages ?? 200;
    this.maxSessions = options.maxSessions ?? 10_000;
  }

  /** The history of one session. */
  history(sessionId: string): MemoryChatMessageHistory {
    return new MemoryChatMessageHistory(this.sessions, sessionId, this);
  }

  /** How many conversations are held. */
  get size(): number {
    return this.sessions.size;
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
    private readonly limits: { maxMessages: number; maxSessions: number },
  ) {}

  async getMessages(): Promise<BaseMessage[]> {
    return [...(this.sessions.get(this.sessionId) ?? [])];
  }

  async addMessages(messages: BaseMessage[]): Promise<void> {
    const all = [...(this.sessions.get(this.sessionId) ?? []), ...messages.map(storable)];
    // Re-inserted, so the map's order is the order of last writes.
    this.sessions.delete(this.sessionId);
    this.sessions.set(this.sessionId, all.slice(-this.limits.maxMessages));
    for (const oldest of this.sessions.keys()) {
      if (this.sessions.size <= this.limits.maxSessions) break;
      this.sessions.delete(oldest);
    }
  }

  async clear(): Promise<void> {
    this.sessions.delete(this.sessionId);
  }
}
