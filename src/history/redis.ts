/**
 * `RedisChatMessageHistory`: one Redis list per session under a namespaced
 * key, full message JSON (never chunks), appended atomically by one script
 * (RPUSH, trim to the newest `maxMessages` and the newest `maxBytes`, EXPIRE),
 * the TTL refreshed on every write. Read back, each record is parsed and
 * validated; a corrupt one is `RUNNEL_ERR_STORED_RECORD_INVALID`; of a list
 * past `maxBytes`, the newest messages that fit are read. Redis failures are
 * `RUNNEL_ERR_REDIS_UNAVAILABLE`. An append whose outcome is unknown (timed
 * out, its connection closed) is taken back until Redis confirms it, in
 * either order (a removal by its token, and a mark `{namespace}.void:{token}`
 * that stops it); an append Redis runs after its caller's deadline writes
 * nothing.
 */
import { randomUUID } from 'node:crypto';
import { ReplyError, type Redis } from 'ioredis';
import { measureClockOffset, neverSent, redisClockOffset, wrongTypeError } from '../cache/redis-client.js';
import { isRunnelError, MAX_STORED_JSON_DEPTH, nestedDeeperThan, RunnelError, type TakeBack } from '../core/index.js';
import { coerceMessage, type BaseMessage } from '../messages/index.js';
import { storable, turnTooLarge, type ChatMessageHistory } from './history.js';

/** Options of {@link RedisChatMessageHistory}. */
export interface RedisHistoryOptions {
  client: Redis;
  sessionId: string;
  /** Key prefix (default `runnel:history`). */
  namespace?: string;
  /** Seconds a conversation lives after its last write (default 7 days). */
  ttlSeconds?: number;
  /** Messages kept, the newest (default 200). */
  maxMessages?: number;
  /**
   * Most bytes of a conversation kept and read back, its messages' JSON (default 64 MiB). A write keeps the
   * newest messages that fit, as it keeps the newest `maxMessages`; a turn larger on its own is refused
   * unwritten. A read gives the newest messages that fit, so a list written larger (by an older Runnel, or
   * with a larger bound) is read as the next write will trim it, never whole into memory at every turn.
   */
  maxBytes?: number;
}

/**
 * Lua: how many of the newest entries of the list `key` have bytes adding up to at most `limit` — counted
 * newest first, a window at a time, so a script never holds much more than the bound — and those entries,
 * newest first, when `collect`. (Redis's MEMORY USAGE is no measure of this: it counts compressed nodes
 * compressed, and some hosted Redis refuse the command.)
 */
const NEWEST_WITHIN = `
local function newestWithin(key, limit, collect)
  local length, taken, bytes, newest = redis.call('LLEN', key), 0, 0, {}
  while taken < length do
    local window = redis.call('LRANGE', key, -(taken + 16), -(taken + 1))
    for i = #window, 1, -1 do
      bytes = bytes + #window[i]
      if bytes > limit then return taken, newest end
      if collect then newest[#newest + 1] = window[i] end
      taken = taken + 1
    end
  end
  return taken, newest
end`;

/**
 * Lua: the newest entries of the list KEYS[1] whose bytes add up to at most ARGV[1] (all of a list Runnel
 * wrote), oldest first.
 */
const READ_BOUNDED = `${NEWEST_WITHIN}
local _, newest = newestWithin(KEYS[1], tonumber(ARGV[1]), true)
local records = {}
for i = #newest, 1, -1 do records[#records + 1] = newest[i] end
return records`;

/**
 * Lua: appends ARGV[5…] to the list KEYS[1], keeps its newest ARGV[1] entries and, of those, the newest
 * whose bytes add up to at most ARGV[3], then sets its TTL to ARGV[2] seconds; a trim that cuts a turn drops
 * the rest of it (the answer and tool results before the next question). One script, so no reader sees the
 * list between the append and the trims. Returns the number of entries dropped; writes nothing when the
 * write was taken back (its mark KEYS[2] is there: 0) or Redis runs it after ARGV[4], its caller's deadline
 * in Redis's time (-1; 0 for none). The count reads the list
 * once, as the read that starts each turn does: measured, an append took 0.4 ms more on 200 messages of
 * 1 KB, 9 ms more on 6 MB.
 */
const APPEND_BOUNDED = `${NEWEST_WITHIN}
local key = KEYS[1]
-- Taken back before it ran (see UNDO_WRITE): nothing to write.
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
-- Run past its caller's deadline (Redis's time, ms; 0: none): the caller was told it failed.
local deadline = tonumber(ARGV[4])
if deadline > 0 then
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) > deadline then return -1 end
end
local added = #ARGV - 4
for i = 5, #ARGV, 64 do redis.call('RPUSH', key, unpack(ARGV, i, math.min(i + 63, #ARGV))) end
local before = redis.call('LLEN', key)
redis.call('LTRIM', key, -tonumber(ARGV[1]), -1)
local kept = newestWithin(key, tonumber(ARGV[3]), false)
if kept < before then
  -- Cut in the middle of a turn: its answer and tool results go too, so the conversation kept starts with a
  -- question (a tool result whose call went is refused by the providers). Never into this write's messages.
  while kept > added do
    local oldest = redis.call('LINDEX', key, -kept)
    if string.sub(oldest, 1, 13) ~= '{"type":"ai",' and string.sub(oldest, 1, 15) ~= '{"type":"tool",' then break end
    kept = kept - 1
  end
  if kept == 0 then redis.call('DEL', key) else redis.call('LTRIM', key, -kept, -1) end
end
redis.call('EXPIRE', key, tonumber(ARGV[2]))
return before - kept`;

/**
 * Lua: takes back the write whose records carry ARGV[1] (`"runnel_write":"<token>"`), ARGV[2] records, from
 * the list KEYS[1], whichever of the two Redis runs first: the write's records are removed if it ran, and the
 * mark KEYS[2] (for ARGV[3] seconds) stops it if it has not (a write held in a closed connection's socket
 * reaches Redis after its removal sent on the next). ARGV[3] 0: the write is known to have run (the take-back of
 * an answer that failed), and no mark is set. The newest entries are looked at first, where a write puts its
 * records.
 */
const UNDO_WRITE = `
if tonumber(ARGV[3]) > 0 then redis.call('SET', KEYS[2], '1', 'EX', tonumber(ARGV[3])) end
local key, needle, left = KEYS[1], ARGV[1], tonumber(ARGV[2])
local length, seen, found = redis.call('LLEN', key), 0, {}
while left > 0 and seen < length do
  local window = redis.call('LRANGE', key, -(seen + 16), -(seen + 1))
  for i = #window, 1, -1 do
    if left > 0 and string.find(window[i], needle, 1, true) then
      found[#found + 1] = window[i]
      left = left - 1
    end
  end
  seen = seen + #window
end
for _, record in ipairs(found) do redis.call('LREM', key, 0, record) end
return #found`;

/**
 * Seconds a taken-back write's mark stops it: far longer than a write can wait in a socket once Redis answers
 * again (its removal is sent only then, and a woken Redis reads what every socket holds at once).
 */
const VOID_TTL_SECONDS = 3600;
/** Removals waiting for Redis to confirm them, at most, per client (about 200 bytes each). */
const MAX_PENDING_UNDOS = 10_000;
/** Removals sent again in one round, at most: what a frozen Redis's socket may hold of one round. */
const UNDO_ROUND = 100;

interface Undo {
  key: string;
  mark: string;
  needle: string;
  records: number;
  /** Seconds the mark stops the write: 0 for a write known to have run, which nothing can stop. */
  markSeconds: number;
}

/**
 * The removals of one client's history writes whose outcome is unknown (timed out, or their connection
 * closed under them), sent until Redis confirms each: a write that did run (Redis killed after running it,
 * or a removal lost with a stalled connection's socket) is then gone too. A round every second, backing off
 * to 30 s while none succeeds, and one as soon as a connection is ready again; each round takes the longest
 * waiting, and one that fails again goes to the back. The oldest are given up past {@link MAX_PENDING_UNDOS}.
 */
class Undoer {
  private readonly pending = new Map<string, Undo>();
  private timer: NodeJS.Timeout | undefined;
  private failures = 0;

  constructor(private readonly client: Redis) {
    client.on('ready', () => {
      if (this.pending.size === 0) return;
      clearTimeout(this.timer);
      this.timer = undefined;
      this.failures = 0;
      this.later(0);
    });
  }

  get size(): number {
    return this.pending.size;
  }

  /**
   * Sends `undo` at once (on the write's connection, right behind it, while it is up) and until confirmed;
   * settles with the first try.
   */
  async add(undo: Undo): Promise<void> {
    if (this.pending.size >= MAX_PENDING_UNDOS) this.pending.delete(this.pending.keys().next().value as string);
    this.pending.set(undo.mark, undo);
    if (!(await this.send(undo))) this.later();
  }

  private async send(undo: Undo): Promise<boolean> {
    try {
      await this.client.eval(UNDO_WRITE, 2, undo.key, undo.mark, undo.needle, undo.records, undo.markSeconds);
      this.pending.delete(undo.mark);
      return true;
    } catch (error) {
      this.pending.delete(undo.mark);
      // The key holds another type than a list (changed by something else): the write was refused too, and
      // this would be refused for good. Any other failure is tried again, behind the others.
      if (wrongTypeError(error, 'A stored chat history') === undefined) this.pending.set(undo.mark, undo);
      return false;
    }
  }

  private later(ms = Math.min(30_000, 1_000 * 2 ** this.failures)): void {
    if (this.timer !== undefined || this.pending.size === 0) return;
    this.timer = setTimeout(() => void this.round(), ms);
    this.timer.unref();
  }

  private async round(): Promise<void> {
    if (this.client.status === 'end') {
      this.pending.clear();
      this.timer = undefined;
      return;
    }
    const done = this.client.status === 'ready' ? await Promise.all([...this.pending.values()].slice(0, UNDO_ROUND).map((undo) => this.send(undo))) : [];
    this.failures = done.includes(true) ? 0 : Math.min(this.failures + 1, 5);
    this.timer = undefined;
    this.later();
  }
}

const undoers = new WeakMap<Redis, Undoer>();

function undoerOf(client: Redis): Undoer {
  let undoer = undoers.get(client);
  if (undoer === undefined) undoers.set(client, (undoer = new Undoer(client)));
  return undoer;
}

/** How many history writes of `client` wait for their removal to be confirmed (for tests and probes). */
export function pendingHistoryUndos(client: Redis): number {
  return undoers.get(client)?.size ?? 0;
}

/** A Redis failure as a Runnel error (other errors pass through). */
export function redisError(error: unknown): RunnelError {
  if (isRunnelError(error)) return error;
  return wrongTypeError(error, 'A stored chat history') ?? new RunnelError('RUNNEL_ERR_REDIS_UNAVAILABLE', 'Redis is unavailable', { cause: error });
}

/** The field of a stored message naming the write that stored it (dropped when read). */
const WRITE_TOKEN = 'runnel_write';

function withoutWriteToken(record: unknown): unknown {
  if (record === null || typeof record !== 'object' || !(WRITE_TOKEN in record)) return record;
  const { [WRITE_TOKEN]: _token, ...message } = record as Record<string, unknown>;
  return message;
}

/**
 * One conversation in Redis.
 *
 * @example
 * const history = new RedisChatMessageHistory({ client: redis, sessionId: 'alice:s1' });
 */
export class RedisChatMessageHistory implements ChatMessageHistory {
  private readonly client: Redis;
  private readonly namespace: string;
  private readonly key: string;
  private readonly ttlSeconds: number;
  private readonly maxMessages: number;
  private readonly maxBytes: number;

  constructor(options: RedisHistoryOptions) {
    this.client = options.client;
    this.namespace = options.namespace ?? 'runnel:history';
    this.key = `${this.namespace}:${options.sessionId}`;
    this.ttlSeconds = options.ttlSeconds ?? 7 * 24 * 3600;
    this.maxMessages = options.maxMessages ?? 200;
    this.maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
    // A bound of 0 kept nothing Redis would take: LTRIM refused its -0, after the RPUSH (a review).
    for (const [name, value] of [['maxMessages', this.maxMessages], ['maxBytes', this.maxBytes], ['ttlSeconds', this.ttlSeconds]] as const) {
      if (!Number.isSafeInteger(value) || value < 1) throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `${name} must be a whole number of at least 1, not ${value}`);
    }
  }

  async getMessages(): Promise<BaseMessage[]> {
    let records: string[];
    try {
      records = (await this.client.eval(READ_BOUNDED, 1, this.key, this.maxBytes)) as string[];
    } catch (error) {
      throw redisError(error);
    }
    return records.map((record, index) => {
      try {
        if (nestedDeeperThan(record, MAX_STORED_JSON_DEPTH)) throw new RunnelError('RUNNEL_ERR_STORED_RECORD_INVALID', `It nests deeper than ${MAX_STORED_JSON_DEPTH} levels`);
        return coerceMessage(withoutWriteToken(JSON.parse(record)));
      } catch (error) {
        throw new RunnelError('RUNNEL_ERR_STORED_RECORD_INVALID', `History record ${index} of this session is not a valid message`, { cause: error });
      }
    });
  }

  async addMessages(messages: BaseMessage[]): Promise<TakeBack | undefined> {
    if (messages.length === 0) return undefined;
    // Each write's records carry a token of their own, so a write whose outcome is unknown can be taken back.
    const token = randomUUID();
    const records = messages.map((message) => JSON.stringify({ ...storable(message).toJSON(), [WRITE_TOKEN]: token }));
    // A message a read would refuse is not written: the whole session would be unreadable after it.
    if (records.some((record) => nestedDeeperThan(record, MAX_STORED_JSON_DEPTH))) {
      throw new RunnelError('RUNNEL_ERR_INPUT_INVALID', `A message of this turn nests deeper than ${MAX_STORED_JSON_DEPTH} levels, more than a chat history keeps; nothing of it was saved`);
    }
    const bytes = records.reduce((sum, record) => sum + Buffer.byteLength(record), 0);
    if (bytes > this.maxBytes) throw turnTooLarge(bytes, this.maxBytes);
    const mark = `${this.namespace}.void:${token}`;
    const undo: Undo = { key: this.key, mark, needle: JSON.stringify({ [WRITE_TOKEN]: token }).slice(1, -1), records: records.length, markSeconds: VOID_TTL_SECONDS };
    // Its caller's deadline in Redis's time: a write Redis runs later (held in a socket while Redis was frozen,
    // its removal lost — the process that sent it stopped) saves nothing its caller was told had failed.
    const timeout = this.client.options.commandTimeout;
    let dropped: unknown;
    try {
      for (let attempt = 0; ; attempt++) {
        const offset = redisClockOffset(this.client);
        const deadline = offset === undefined || timeout === undefined ? 0 : Math.ceil(Date.now() + offset + timeout);
        dropped = await this.client.eval(APPEND_BOUNDED, 2, this.key, mark, this.maxMessages, this.ttlSeconds, this.maxBytes, deadline, ...records);
        // Refused as late, yet answered before the timeout: the offset is stale (a clock stepped, or drifted).
        // Measured again, and tried once more: the refused attempt wrote nothing (a review: a step of 600 ms
        // had every append refused, on a healthy Redis).
        if (dropped !== -1 || attempt > 0 || !(await measureClockOffset(this.client))) break;
      }
    } catch (error) {
      // A write that timed out may still be carried out: a frozen Redis runs what its socket holds when it
      // wakes, and the turn its caller was told had failed would be saved (twice, once the client retries).
      // So it is taken back, in whichever order Redis runs the two (UNDO_WRITE), until Redis confirms it; the
      // token makes the removal match this write's records alone (an earlier identical turn stays). A write
      // refused unsent (Redis down) cannot land: nothing to take back.
      // Nor one Redis answered with a refusal (its key not a list, Redis out of memory): nothing of it was written.
      if (!neverSent(error) && !(error instanceof ReplyError)) void undoerOf(this.client).add(undo);
      throw redisError(error);
    }
    if (dropped === -1) throw new RunnelError('RUNNEL_ERR_REDIS_UNAVAILABLE', 'Redis ran the history write after its deadline: nothing of it was saved');
    // Taken back on request (an answer that failed, `onSave`) as an unknown outcome is: removed, and sent until
    // Redis confirms it.
    // It has run, so no mark is left to stop it (one was set for an hour at every take-back: a review).
    const ran: Undo = { ...undo, markSeconds: 0 };
    return () => undoerOf(this.client).add(ran);
  }

  async clear(): Promise<void> {
    try {
      await this.client.del(this.key);
    } catch (error) {
      throw redisError(error);
    }
  }
}
