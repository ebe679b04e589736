/** Background runs: the store of records and event logs, the queue and its workers, webhooks. */
export { MemoryRunStore, RedisRunStore, publicRun, isLastFrame, RunEnded, TERMINAL, type RunFrame, type RunKind, type RunMatch, type RunRecord, type RunStart, type RunStatus, type RunStore, type RunStoreOptions, type RunWatch } from './store.js';
export { BullRunQueue, MemoryRunQueue, type RunQueue, type RunQueueOptions } from './queue.js';
export { executeRun, runError, RunNotStored, type RunMeter, type RunReader } from './executor.js';
export { publicErrors } from './public-errors.js';
export { checkWebhookUrl, DEFAULT_DELIVERY_LIMITS, DeliveryLimiter, deliverWebhook, isPublicAddress, matchesHost, MAX_RETRY_AFTER_MS, retryAfterMs, signWebhook, webhookBody, type DeliveryLimits, type DeliveryTurn, type WebhookDelivery, type WebhookPolicy } from './webhook.js';
