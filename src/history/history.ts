/**
 * The chat-history contract: a conversation's messages, read and appended
 * per session. Implementations: `MemoryChatMessageHistory` (the default
 * without Redis) and `RedisChatMessageHistory`; one contract test suite runs
 * against both.
 */
import { RunnelError, type TakeBack } from '../core/index.js';
import { AIMessageChunk, type BaseMessage } from '../messages/index.js';

/** One conversation's messages. */
export interface ChatMessageHistory {
  /** The messages, oldest first. */
  getMessages(): Promise<BaseMessage[]>;
  /**
   * Appends messages at once (all or none). May resolve to the function that takes this write back (its
   * messages removed, whatever was written after them kept): an answer that fails takes back the turns its
   * runs saved (`RunnableConfig.onSave`). A history without one keeps them.
   */
  addMessages(messages: BaseMessage[]): Promise<TakeBack | void>;
  /** Forgets the conversation. */
  clear(): Promise<void>;
}

/** Session ids: letters, digits and `_ . : -`, 1–128 characters (they become parts of storage keys). */
export const SESSION_ID = /^[A-Za-z0-9_.:-]{1,128}$/;

/**
 * Checks a session id, or throws `RUNNEL_ERR_CONFIG_INVALID` located at `loc` (where the request carried it:
 * `["path", "session_id"]` for a history route; the config's by default).
 *
 * @example
 * const sessionId = checkSessionId(request.params.session_id, ['path', 'session_id']);
 */
export function checkSessionId(sessionId: unknown, loc: readonly (string | number)[] = ['configurable', 'session_id']): string {
  if (typeof sessionId !== 'string' || !SESSION_ID.test(sessionId)) {
    throw new RunnelError('RUNNEL_ERR_CONFIG_INVALID', 'session_id must be 1-128 letters, digits or _ . : -', {
      detail: [{ type: 'session_id', loc: [...loc], msg: 'Invalid session id' }],
    });
  }
  return sessionId;
}

/** What is stored of a message: the whole message, never a chunk. */
export function storable(message: BaseMessage): BaseMessage {
  return message instanceof AIMessageChunk ? message.toMessage() : message;
}

/** A size as a person reads it: bytes below a mebibyte, tenths of one above. */
function mebibytes(bytes: number): string {
  return bytes >= 2 ** 20 ? `${Math.round((bytes / 2 ** 20) * 10) / 10} MiB` : `${bytes} bytes`;
}

/**
 * A turn larger than a conversation keeps: of its messages the newest that fit would be kept and its
 * question dropped — a part of a turn — so it is refused, nothing of it written.
 */
export function turnTooLarge(bytes: number, maxBytes: number): RunnelError {
  return new RunnelError('RUNNEL_ERR_INPUT_INVALID', `This turn's messages hold ${mebibytes(bytes)}, more than the ${mebibytes(maxBytes)} a chat history keeps; nothing of it was saved`);
}
