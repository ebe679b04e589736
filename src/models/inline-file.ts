/**
 * What a LangChain standard content block (`image`, `file`, `audio`) holds, read in every form LangChain has
 * written it: its data inline, a URL, or a file stored at the provider.
 */
import type { ContentBlock } from '../messages/index.js';

const text = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

/** What a LangChain standard block (`image`, `file`, `audio`) holds: its data inline, a URL, or a provider's file id. */
export type InlineFile = { data: string; mimeType: string; filename?: string } | { url: string } | { id: string };

/**
 * The content of a LangChain standard block — `{url}`, `{data, mimeType}` or `{base64, mime_type}` (0.3's
 * `source_type` and `mime_type`), `{fileId}` (`file_id`, 0.3's `source_type: 'id'`) — or undefined when it holds
 * none of these. A `data:` URL given as data is read as one.
 *
 * @example
 * inlineFile({ type: 'file', data: 'JVBERi0=', mimeType: 'application/pdf' }) // { data: 'JVBERi0=', mimeType: 'application/pdf' }
 */
export function inlineFile(block: ContentBlock): InlineFile | undefined {
  const fields = block as Record<string, unknown>;
  const id = text(fields.fileId) ?? text(fields.file_id) ?? (fields.source_type === 'id' ? text(fields.id) : undefined);
  if (id !== undefined) return { id };
  const url = text(fields.url);
  // A `data:` URL is data given inline.
  if (url !== undefined && !url.startsWith('data:')) return { url };
  const data = url ?? text(fields.data) ?? text(fields.base64);
  if (data === undefined) return undefined;
  const inline = /^data:([^;,]+);base64,(.*)$/s.exec(data);
  const mimeType = inline?.[1] ?? text(fields.mimeType) ?? text(fields.mime_type);
  if (mimeType === undefined) return undefined;
  const metadata = (fields.metadata ?? {}) as Record<string, unknown>;
  const filename = text(fields.filename) ?? text(fields.name) ?? text(metadata.filename) ?? text(metadata.name);
  return { data: inline?.[2] ?? data, mimeType, ...(filename === undefined ? {} : { filename }) };
}
