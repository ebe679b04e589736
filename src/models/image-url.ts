/**
 * The image a content block holds, as the URL (or `data:` URL) both adapters send: Runnel's own `image_url`
 * block, and an `image` block as LangChain's standard content (`url`, or base64 `data` with its `mimeType` —
 * `mime_type` and `source_type` in @langchain/core 0.3) or Anthropic's (`source`) hold it. Left out before, an
 * image in those forms was dropped from the request, and the model answered without having seen it.
 */
import type { ContentBlock } from '../messages/index.js';
import { inlineFile } from './inline-file.js';

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
