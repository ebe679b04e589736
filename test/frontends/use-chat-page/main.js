/* global document, location, URLSearchParams */
/**
 * A minimal `useChat` page, the way an AI SDK frontend talks to Runnel: a
 * `DefaultChatTransport` pointed at a chain's `/ui_stream`, the API key in its
 * headers. What to talk to comes in the URL's hash
 * (`#api=<url>&key=<key>&chat=<chat id>`, and `body=<JSON>` for the
 * transport's `body` option), so one build serves every test.
 *
 * The `Chat` is made here and given to `useChat` as `chat`, as
 * docs/frontends.md says to: `useChat({ transport })` wraps the transport in
 * one of its own that drops `resumeStreamIsReplay`, and a `resumeStream()`
 * after a dropped connection then adds the replayed answer to the part
 * already shown (@ai-sdk/react 3.0.328).
 *
 * Plain JavaScript with `createElement`: JSX would need a Vite plugin, and
 * TypeScript would need `@types/react` — neither is a dependency, and this
 * page is only a fixture that the browser test drives.
 *
 * What the test reads: `#status` (useChat's `status`, also `main[data-status]`
 * beside `data-assistant-messages`, so one selector waits for a finished
 * turn), one `li[data-role]` per message holding its text parts, and `#error`.
 */
import { Chat, useChat } from '@ai-sdk/react';
import { DefaultChatTransport } from 'ai';
import { createElement as h, useState } from 'react';
import { createRoot } from 'react-dom/client';

const params = new URLSearchParams(location.hash.slice(1));
const transport = new DefaultChatTransport({
  api: params.get('api') ?? '',
  headers: { authorization: `Bearer ${params.get('key') ?? ''}` },
  body: params.has('body') ? JSON.parse(params.get('body')) : undefined,
});
const chat = new Chat({ id: params.get('chat') ?? undefined, transport });

/** A message's text: its text parts, joined. */
const textOf = (message) =>
  message.parts
    .filter((part) => part.type === 'text')
    .map((part) => part.text)
    .join('');

function ChatView() {
  const { messages, sendMessage, status, stop, error, resumeStream } = useChat({ chat });
  const [draft, setDraft] = useState('');
  const busy = status === 'submitted' || status === 'streaming';
  const send = (event) => {
    event.preventDefault();
    if (draft.trim() === '' || busy) return;
    void sendMessage({ text: draft });
    setDraft('');
  };
  const answers = messages.filter((message) => message.role === 'assistant').length;
  return h(
    'main',
    { 'data-status': status, 'data-assistant-messages': answers },
    h(
      'ol',
      { id: 'messages' },
      messages.map((message) => h('li', { key: message.id, 'data-role': message.role }, textOf(message))),
    ),
    h(
      'form',
      { onSubmit: send },
      h('input', { 'aria-label': 'Message', value: draft, onChange: (event) => setDraft(event.target.value) }),
      h('button', { type: 'submit', disabled: busy }, 'Send'),
      h('button', { type: 'button', disabled: !busy, onClick: () => void stop() }, 'Stop'),
      h('button', { type: 'button', disabled: busy, onClick: () => void resumeStream() }, 'Resume'),
    ),
    h('output', { id: 'status' }, status),
    h('p', { id: 'error' }, error?.message ?? ''),
  );
}

createRoot(document.getElementById('root')).render(h(ChatView));
