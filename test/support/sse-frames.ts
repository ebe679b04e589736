/** Reads an SSE body as a test sees it: its frames, each with its id (when it has one), event and parsed data. */
export function frames(body: string): { id?: string; event: string; data?: unknown }[] {
  return body
    .split('\r\n\r\n')
    .filter((frame) => frame !== '' && !frame.startsWith(':'))
    .map((frame) => {
      const id = /^id: (.*)$/m.exec(frame)?.[1];
      const data = /^data: (.*)$/m.exec(frame)?.[1];
      return { ...(id === undefined ? {} : { id }), event: /^event: (.*)$/m.exec(frame)?.[1] as string, ...(data === undefined ? {} : { data: JSON.parse(data) as unknown }) };
    });
}

/** The rest of what `reader` reads, to the stream's end, as text. */
export async function rest(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<string> {
  let text = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return text;
    text += new TextDecoder().decode(value);
  }
}
