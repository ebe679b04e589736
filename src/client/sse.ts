/**
 * A Server-Sent Events parser for fetch response bodies: `\n`, `\r` and
 * `\r\n` line ends, multi-line data, comments ignored, `id:` kept.
 */

/** One SSE message. */
export interface SseMessage {
  event: string;
  data: string;
  /** The message's own `id:` field, when it has one (what a client sends back as `Last-Event-ID`). */
  id?: string;
}

/** Parses a byte stream into SSE messages. */
export async function* parseSse(body: AsyncIterable<Uint8Array>): AsyncGenerator<SseMessage> {
  const decoder = new TextDecoder();
  let buffer = '';
  let event = '';
  let data: string[] = [];
  let id: string | undefined;
  let sawField = false;
  const dispatch = (): SseMessage | undefined => {
    const message = sawField ? { event: event || 'message', data: data.join('\n'), ...(id === undefined ? {} : { id }) } : undefined;
    event = '';
    data = [];
    id = undefined;
    sawField = false;
    return message;
  };
  const lines = function* (final: boolean): Generator<string> {
    for (;;) {
      const match = /\r\n|\r|\n/.exec(buffer);
      // A lone \r at the end may be the first half of \r\n: wait for more unless the stream has ended.
      if (match === null || (match[0] === '\r' && match.index === buffer.length - 1 && !final)) return;
      yield buffer.slice(0, match.index);
      buffer = buffer.slice(match.index + match[0].length);
    }
  };
  const handle = function* (line: string): Generator<SseMessage> {
    if (line === '') {
      const message = dispatch();
      if (message !== undefined) yield message;
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') {
      event = value;
      sawField = true;
    } else if (field === 'data') {
      data.push(value);
      sawField = true;
    } else if (field === 'id' && !value.includes('\0')) {
      id = value;
      sawField = true;
    }
  };
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    for (const line of lines(false)) yield* handle(line);
  }
  buffer += decoder.decode();
  for (const line of lines(true)) yield* handle(line);
  if (buffer !== '') yield* handle(buffer);
  const last = dispatch();
  if (last !== undefined) yield last;
}
