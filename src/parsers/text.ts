/** The text of whatever a parser receives: a string, a message (chunk) or a prompt value. */
import { RunnelError } from '../core/index.js';
import { BaseMessage } from '../messages/index.js';
import { isPromptValue } from '../prompts/index.js';

export function textOf(value: unknown, who: string): string {
  if (typeof value === 'string') return value;
  if (value instanceof BaseMessage) return value.text;
  if (isPromptValue(value)) return value.toString();
  if (value === undefined || value === null) return '';
  throw new RunnelError('RUNNEL_ERR_INVALID_ARGUMENT', `${who} expects a string or a message, got ${Array.isArray(value) ? 'an array' : typeof value}`);
}

/** The JSON inside a Markdown code fence (```json ... ```), or the text itself. */
export function stripFences(text: string): string {
  const open = /```(?:json|JSON)?[ \t]*\r?\n?/.exec(text);
  if (open === null) return text;
  const start = open.index + open[0].length;
  const close = text.indexOf('```', start);
  return close === -1 ? text.slice(start) : text.slice(start, close);
}
