/** `MemoryChatMessageHistory`: conversations in process memory — the default without Redis. */
import { heldBytes, type TakeBack } from '../core/index.js';
import type { BaseMessage } from '../messages/index.js';
import { storable, turnTooLarge, type ChatMessageHistory } from './history.js';

/** The bytes a message holds, about: its JSON's, measured once per message. */
const sizes = new WeakMap<BaseMessage, number>();
function messageBytes(message: BaseMessage): number {
  let size = sizes.get(message);
  if (size === undefined) {
    size = heldBytes(JSON.stringify(message));
    sizes.set(message, size);
  }
  return size;
}

/** One conversation, and the bytes its messages hold. */
interface Session {
  messages: BaseMessage[];
  bytes: number;
}

/**
 * Conversations of one process, each trimmed to its last `maxMessages` and
 * its newest `maxSessionBytes`, as a Redis history is; at most `maxSessions`
 * conversations holding `maxBytes` in all, the least recently written
 * forgotten first — a process's memory must not grow with every new
 * `session_id` a client makes up, nor with long messages (10,000 sessions of
 * 200 messages of 8,000 characters would be gigabytes; Redis histories
 * expire instead).
 */
export class MemoryHistoryStore {
  private readonly sessions = new Map<string, Session>();
  readonly maxMessages: number;
  readonly maxSessions: number;
  readonly maxBytes: number;
  readonly maxSessionBytes: number;
  /** The bytes every session holds. */
  bytes = 0;

  constructor(options: { maxMessages?: number; maxSessions?: number; maxBytes?: number; maxSessionBytes?: number } = {}) {
    this.maxMessages = options.maxMessages ?? 200;
    this.maxSessions = options.maxSessions ?? 10_000;
    this.maxBytes = options.maxBytes ?? 128 * 1024 * 1024;
    // One conversation was bounded by its count alone: 200 messages of a megabyte, twice that in V8's strings.
    this.maxSessionBytes = options.maxSessionBytes ?? 64 * 1024 * 1024;
  }

  /** The history of one session. */
  history(sessionId: string): MemoryChatMessageHistory {
    return new MemoryChatMessageHistory(this, sessionId);
  }

  /** How many conversations are held. */
  get size(): number {
    return this.sessions.size;
  }

  /** A session's messages (a copy). */
  read(sessionId: string): BaseMessage[] {
    return [...(this.sessions.get(sessionId)?.messages ?? [])];
  }

  /**
   * Replaces a session's messages, made its most recent; then forgets the least recently written past the
   * limits. A trim that cuts a turn drops the rest of it (the answer and tool results before the next
   * question), never into the newest `added` messages.
   */
  write(sessionId: string, messages: BaseMessage[], added = 0): void {
    this.remove(sessionId);
    let kept = messages.slice(-this.maxMessages);
    let bytes = 0;
    // The newest that fit, counted newest first.
    for (let i = kept.length - 1; i >= 0; i--) {
      const size = messageBytes(kept[i] as BaseMessage);
      if (bytes + size > this.maxSessionBytes) {
        kept = kept.slice(i + 1);
        break;
      }
      bytes += size;
    }
    if (kept.length < messages.length) {
      let cut = 0;
      while (kept.length - cut > added && ['ai', 'tool'].includes((kept[cut] as BaseMessage).type)) bytes -= messageBytes(kept[cut++] as BaseMessage);
      kept = kept.slice(cut);
    }
    this.sessions.set(sessionId, { messages: kept, bytes });
    this.bytes += bytes;
    for (const [oldest, session] of this.sessions) {
      // The session just written stays, whatever the others hold (it is bounded by maxSessionBytes).
      if ((this.sessions.size <= this.maxSessions && this.bytes <= this.maxBytes) || oldest === sessionId) break;
      this.sessions.delete(oldest);
      this.bytes -= session.bytes;
    }
  }

  /**
   * Takes `messages` (these very objects, the newest place of each: one object written twice is there twice) out
   * of a session, keeping the rest and its place among the others.
   */
  takeOut(sessionId: string, messages: readonly BaseMessage[]): void {
    const session = this.sessions.get(sessionId);
    if (session === undefined) return;
    const out = new Map<BaseMessage, number>();
    for (const message of messages) out.set(message, (out.get(message) ?? 0) + 1);
    const kept: BaseMessage[] = [];
    for (let i = session.messages.length - 1; i >= 0; i--) {
      const message = session.messages[i] as BaseMessage;
      const left = out.get(message) ?? 0;
      if (left > 0) out.set(message, left - 1);
      else kept.push(message);
    }
    if (kept.length === session.messages.length) return;
    if (kept.length === 0) return this.remove(sessionId);
    kept.reverse();
    const bytes = kept.reduce((sum, message) => sum + messageBytes(message), 0);
    this.bytes += bytes - session.bytes;
    session.messages = kept;
    session.bytes = bytes;
  }

  /** Forgets a session. */
  remove(sessionId: string): void {
    const session = this.sessions.get(sessionId);
    if (session === undefined) return;
    this.sessions.delete(sessionId);
    this.bytes -= session.bytes;
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
    private readonly store: MemoryHistoryStore,
    private readonly sessionId: string,
  ) {}

  async getMessages(): Promise<BaseMessage[]> {
    return this.store.read(this.sessionId);
  }

  async addMessages(messages: BaseMessage[]): Promise<TakeBack | undefined> {
    if (messages.length === 0) return undefined;
    const added = messages.map(storable);
    const bytes = added.reduce((sum, message) => sum + messageBytes(message), 0);
    if (bytes > this.store.maxSessionBytes) throw turnTooLarge(bytes, this.store.maxSessionBytes);
    this.store.write(this.sessionId, [...this.store.read(this.sessionId), ...added], added.length);
    return async () => this.store.takeOut(this.sessionId, added);
  }

  async clear(): Promise<void> {
    this.store.remove(this.sessionId);
  }
}
