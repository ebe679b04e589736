/**
 * The image a content block holds, as the URL (or `data:` URL) both adapters send: Runnel's own `image_url`
 * block, and an `image` block as LangChain's standard content (`url`, or base64 `data` with its `mimeType` —
 * `mime_type` and `source_type` in @langchain/core 0.3) or Anthropic's (`source`) hold it. Left out before, an
 * image in those forms was dropped from the request, and the model answered without having seen it.
 */
import type { ContentBlock } from '../messages/index.js';

/** An image's URL and OpenAI's `detail`, when it has one. */
export interface ImageURL {
  url: string;
  detail?: 'auto' | 'low' | 'high';
}

const text = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

/**
 * The image of `block`, or undefined when it holds none.
 *
 * @example
 * imageURL({ type: 'image', data: 'iVBOR...', mimeType: 'image/png' }) // { url: 'data:image/png;base64,iVBOR...' }
 */
export function imageURL(block: ContentBlock): ImageURL | undefined {
  const fields = block as Record<string, unknown>;
  if (block.type === 'image_url') {
    const image = fields.image_url;
    if (typeof image === 'string') return { url: image };
    const { url, detail } = (image ?? {}) as { url?: unknown; detail?: unknown };
    if (text(url) === undefined) return undefined;
    return { url: url as string, ...(typeof detail === 'string' ? { detail: detail as ImageURL['detail'] } : {}) };
  }
  if (block.type !== 'image') return undefined;
  // Anthropic's own block: {source: {type: 'base64', media_type, data} | {type: 'url', url}}.
  const source = fields.source as Record<string, unknown> | undefined;
  if (source !== null && typeof source === 'object') {
    if (source.type === 'url' && text(source.url) !== undefined) return { url: source.url as string };
    if (source.type === 'base64' && text(source.media_type) !== undefined && text(source.data) !== undefined) {
      return { url: `data:${source.media_type as string};base64,${source.data as string}` };
    }
    return undefined;
  }
  // LangChain's standard block: {url} or {data, mimeType} (0.3: {source_type: 'url' | 'base64', url | data,
  // mime_type}; Python's v1: {base64, mime_type}).
  const file = inlineFile(block);
  return file === undefined || 'id' in file ? undefined : 'url' in file ? { url: file.url } : { url: `data:${file.mimeType};base64,${file.data}` };
}

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
  if (text(fields.url) !== undefined) return { url: fields.url as string };
  const data = text(fields.data) ?? text(fields.base64);
  if (data === undefined) return undefined;
  const inline = /^data:([^;,]+);base64,(.*)$/s.exec(data);
  const mimeType = inline?.[1] ?? text(fields.mimeType) ?? text(fields.mime_type);
  if (mimeType === undefined) return undefined;
  const metadata = (fields.metadata ?? {}) as Record<string, unknown>;
  const filename = text(fields.filename) ?? text(fields.name) ?? text(metadata.filename) ?? text(metadata.name);
  return { data: inline?.[2] ?? data, mimeType, ...(filename === undefined ? {} : { filename }) };
}
