/** `Document`: a piece of text with metadata (and an id once stored). */
import { z } from 'zod';

/** Fields of a {@link Document}. */
export interface DocumentFields {
  id?: string | undefined;
  pageContent: string;
  metadata?: Record<string, unknown>;
}

/**
 * A piece of text with metadata. Serialized as LangServe's
 * `{"type": "Document", "id", "page_content", "metadata"}`.
 *
 * @example
 * new Document({ pageContent: 'Runnel serves chains.', metadata: { source: 'README.md' } });
 */
export class Document {
  readonly id: string | undefined;
  readonly pageContent: string;
  readonly metadata: Record<string, unknown>;

  constructor(fields: DocumentFields) {
    this.id = fields.id;
    this.pageContent = fields.pageContent;
    this.metadata = fields.metadata ?? {};
  }

  toJSON(): Record<string, unknown> {
    return { type: 'Document', id: this.id ?? null, page_content: this.pageContent, metadata: this.metadata };
  }
}

/** A document in LangServe's JSON. */
export const documentJsonSchema = z.object({
  type: z.enum(['Document']),
  id: z.string().nullable(),
  page_content: z.string(),
  metadata: z.record(z.string(), z.unknown()),
});
