/**
 * The server's logger (pino, through Fastify): the level, and what never
 * reaches a log line — credentials in headers, keys in objects, and the
 * values of query parameters named like secrets (`?api_key=…`, which the
 * server refuses, but a client may still send).
 */
import { format } from 'node:util';
import type { FastifyServerOptions } from 'fastify';
import { stdSerializers } from 'pino';
import { redactUrlCredentials } from '../observability/index.js';

/** Query parameters whose values are not logged. */
const SECRET_PARAM = /key|token|secret|pass|pwd|auth|bearer|signature|sig$|hmac|otp|private|credential|session|cookie|jwt|^code$/i;

/**
 * A request URL with the values of secret-looking query parameters replaced (the path is kept as sent).
 *
 * @example
 * redactQuery('/joke/invoke?api_key=sk-1&x=2'); // '/joke/invoke?api_key=[redacted]&x=2'
 */
export function redactQuery(url: string): string {
  const at = url.indexOf('?');
  if (at === -1) return url;
  const query = url
    .slice(at + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = eq === -1 ? pair : pair.slice(0, eq);
      let decoded = name;
      try {
        decoded = decodeURIComponent(name.replaceAll('+', ' '));
      } catch {
        // an undecodable name is matched as sent
      }
      return eq !== -1 && SECRET_PARAM.test(decoded) ? `${name}=[redacted]` : pair;
    })
    .join('&');
  return `${url.slice(0, at)}?${query}`;
}

/**
 * Path segments after which comes one naming a conversation: a chat's session id (`/history/{session_id}`), the
 * AI SDK's chat id (`/ui_stream/{chat_id}/stream`) and a config hash (`/c/{hash}/`, whose config may carry a
 * session id). On a server without keys a session id is all anyone needs to read that conversation.
 */
const CONVERSATION_MARKERS = new Set(['history', 'ui_stream', 'c']);

/** A path segment as the router reads it (percent-decoded), or as sent when it does not decode. */
function decodedSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/**
 * A request URL as logged: the values of secret-looking query parameters, and the path's conversation ids
 * (the segment after each of {@link CONVERSATION_MARKERS}), replaced. A marker is recognised however it is
 * spelt, as the router decodes it: `/chat/%68istory/{id}` reaches the history route too, and its id was logged.
 *
 * @example
 * loggedUrl('/chat/history/alice-1?api_key=sk-1'); // '/chat/history/[redacted]?api_key=[redacted]'
 */
export function loggedUrl(url: string): string {
  const at = url.indexOf('?');
  const path = at === -1 ? url : url.slice(0, at);
  const segments = path.split('/');
  const logged = segments.map((segment, i) => (i > 0 && CONVERSATION_MARKERS.has(decodedSegment(segments[i - 1] as string)) && segment !== '' ? '[redacted]' : segment));
  return logged.join('/') + redactQuery(url).slice(path.length);
}

/**
 * A serialized error's own fields with what may hold a secret taken out, at any depth (its cause, the errors
 * it gathers): a client library's failed command with its arguments (ioredis puts `command: {name, args}` on
 * its errors — a refused AUTH's arguments are the password), and the credentials of URLs in any text.
 */
function scrub(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return redactUrlCredentials(value);
  if (value === null || typeof value !== 'object' || depth > 6) return value;
  if (Array.isArray(value)) return value.map((item) => scrub(item, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value)) {
    if (key === 'command' && field !== null && typeof field === 'object' && 'args' in field) {
      out[key] = { name: (field as { name?: unknown }).name, args: '[redacted]' };
    } else out[key] = scrub(field, depth + 1);
  }
  return out;
}

/** pino's error serializer, with whatever may hold a secret taken out (see {@link scrub}). */
export function loggedError(error: Error): ReturnType<typeof stdSerializers.err> {
  return scrub(stdSerializers.err(error)) as ReturnType<typeof stdSerializers.err>;
}

interface LoggedRequest {
  method: string;
  url: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}

/** The logger options of `npm start`. */
export function serverLoggerOptions(level: string): NonNullable<Exclude<FastifyServerOptions['logger'], boolean>> {
  return {
    level,
    redact: { paths: ['req.headers.authorization', 'req.headers["x-api-key"]', 'req.headers.cookie', '*.apiKey', '*.api_key'], censor: '[redacted]' },
    serializers: {
      req: (req: LoggedRequest) => ({ method: req.method, url: loggedUrl(req.url), host: req.host, remoteAddress: req.ip, remotePort: req.socket?.remotePort }),
      err: loggedError,
    },
  };
}

/**
 * Sends what libraries print with `console.warn` into the process's JSON log, as warnings: ioredis prints
 * `[WARN] … does not require a password, but a password was supplied` once a connection, which was the one line
 * of a server's output a log collector could not read (a probe).
 *
 * @example
 * logConsoleWarnings(pino(serverLoggerOptions('info')));
 */
export function logConsoleWarnings(logger: { warn(message: string): void }): void {
  // A URL's credentials never reach the log, as in every other line.
  console.warn = (...args: unknown[]) => logger.warn(redactUrlCredentials(format(...args)));
}
