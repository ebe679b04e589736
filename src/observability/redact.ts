/**
 * Credentials out of text that leaves the process (log lines, spans): an
 * error's message may quote a connection string.
 */

/**
 * The credentials of URLs in a text (`postgres://user:password@host` → `postgres://[redacted]@host`), up to the
 * authority's last `@` (a password may hold one unencoded); and libpq's `password=…` form.
 */
const URL_CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#]*@/gi;
const KEYWORD_PASSWORD = /\b(password|passwd|pwd)=([^\s&;]+)/gi;

/**
 * A text with the credentials of the URLs in it replaced: an error's message may quote a connection string.
 *
 * @example
 * redactUrlCredentials('connect postgres://runnel:s3cret@db:5432/runnel'); // 'connect postgres://[redacted]@db:5432/runnel'
 */
export function redactUrlCredentials(text: string): string {
  return text.replace(URL_CREDENTIALS, '$1[redacted]@').replace(KEYWORD_PASSWORD, '$1=[redacted]');
}
