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

/**
 * The text a store embeds and indexes for a document: its heading path
 * (`metadata.headings`, set by the Markdown splitter) on the first line,
 * then its content. A passage under `## Factory › ### bodyLimit` is then
 * found by those words even when its own text never repeats them.
 */
export function searchableText(doc: Pick<Document, 'pageContent' | 'metadata'>): string {
  const headings = doc.metadata.headings;
  if (!Array.isArray(headings) || headings.length === 0) return doc.pageContent;
  const path = headings.filter((heading): heading is string => typeof heading === 'string').join(' › ');
  return path === '' ? doc.pageContent : `${path}\n\n${doc.pageContent}`;
}
