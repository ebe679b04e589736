/** Chat history: the contract, memory and Redis stores, and withMessageHistory. */
export { checkSessionId, type ChatMessageHistory } from './history.js';
export { MemoryChatMessageHistory, MemoryHistoryStore } from './memory.js';
export { RedisChatMessageHistory, redisError, type RedisHistoryOptions } from './redis.js';
export { withMessageHistory, RunnableWithMessageHistory, type WithHistoryOptions } from './with-history.js';
