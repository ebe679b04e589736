/**
 * `/chat`: a conversation — a system prompt, the session's history, the
 * user's message | chat model — with the history in Redis (or memory) under
 * the caller's identity and `configurable.session_id`.
 */
import { z } from 'zod';
import { ChatPromptTemplate, checkSessionId, defineChain, MessagesPlaceholder, RunnelError, StringOutputParser, withMessageHistory } from '../src/index.js';
import { lastUserText } from './model.js';
import { chatModel, OFFLINE, quote, type ChainContext } from './model.js';

const prompt = ChatPromptTemplate.fromMessages([
  ['system', 'You are Runnel’s friendly assistant. Answer briefly and remember what the user told you earlier in the conversation.'],
  new MessagesPlaceholder('history'),
  ['human', '{message}'],
]);

export function chatChain(context: ChainContext) {
  const model = chatModel(context, ({ messages }) => {
    const said = messages.filter((m) => m.type === 'human').map((m) => m.text);
    const last = quote(said.at(-1) ?? '', 200);
    if (said.length <= 1) return `${OFFLINE} you said “${last}” — the first message of this conversation.`;
    return `${OFFLINE} you said “${last}” — earlier in this conversation (${said.length - 1} message${said.length > 2 ? 's' : ''} from you) you first said “${quote(said[0] ?? '', 200)}”`;
  });
  const getHistory = (sessionId: string, caller: { identity: string }) => context.services.history(caller.identity, sessionId);
  return defineChain({
    path: '/chat',
    description: 'Chats with memory: send {message} with configurable.session_id; the conversation is kept per caller and session.',
    runnable: withMessageHistory<{ message: string }, string>(prompt.pipe(model).pipe(new StringOutputParser()), {
      getHistory,
      inputMessagesKey: 'message',
      historyMessagesKey: 'history',
    }),
    inputSchema: z.object({ message: z.string().min(1).max(8000).describe('Your message') }),
    playground: 'chat',
    history: getHistory,
    // The conversation lives on the server: the chat's id is its session, and only the new message is sent on.
    messages: {
      toInput: ({ id, turns, trigger }) => {
        if (id === undefined) {
          throw new RunnelError('RUNNEL_ERR_BODY_INVALID', 'chat keeps each conversation on the server: name it with metadata.session_id (1-128 letters, digits or _ . : - of your choosing)', {
            detail: [{ type: 'missing', loc: ['metadata', 'session_id'], msg: 'Field required' }],
          });
        }
        // The chat id is the session: refused here, before anything streams, when it cannot be one.
        try {
          checkSessionId(id);
        } catch {
          throw new RunnelError('RUNNEL_ERR_BODY_INVALID', 'The chat id is chat’s session_id: 1-128 letters, digits or _ . : -', {
            detail: [{ type: 'session_id', loc: ['id'], msg: 'Invalid session id' }],
          });
        }
        // The server already holds the answer being replaced: running again would add the question twice.
        if (trigger === 'regenerate') {
          throw new RunnelError('RUNNEL_ERR_BODY_INVALID', 'chat keeps the conversation on the server and cannot replace its last answer: send the message again', {
            detail: [{ type: 'value_error', loc: ['trigger'], msg: 'regenerate-message is not supported by this chain' }],
          });
        }
        // An edit drops the turns after the message it replaces; the server's history still holds them.
        if (trigger === 'edit') {
          throw new RunnelError('RUNNEL_ERR_BODY_INVALID', 'chat keeps the conversation on the server and cannot replace an earlier message: send the new text as a new message', {
            detail: [{ type: 'value_error', loc: ['messageId'], msg: 'editing a message is not supported by this chain' }],
          });
        }
        return { input: { message: lastUserText(turns) }, configurable: { session_id: id } };
      },
    },
  });
}
