/**
 * Turning a server's JSON back into objects: messages (validated by their
 * zod schemas, never from `lc` payloads) and documents. Everything else stays
 * plain data.
 */
import { Document } from '../documents/index.js';
import { coerceMessage, MESSAGE_TYPES } from '../messages/index.js';



/** Revives messages and documents anywhere inside `value`. */
export function revive(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(revive);
  if (value === null || typeof value !== 'object') return value;
  const record = value as Record<string, unknown>;
  if (typeof record.type === 'string' && MESSAGE_TYPES.has(record.type) && 'content' in record && 'additional_kwargs' in record) {
    try {
      return coerceMessage(record);
    } catch {
      // Not a valid message after all: leave it as data.
    }
  }
  if (typeof record.page_content === 'string' && (record.type === 'Document' || 'metadata' in record)) {
    return new Document({
      id: typeof record.id === 'string' ? record.id : undefined,
      pageContent: record.page_content,
      metadata: (record.metadata as Record<string, unknown> | undefined) ?? {},
    });
  }
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(record)) out[key] = revive(item);
  return out;
}
