/**
 * What the server says at start about settings that leave it open: `main.ts`
 * logs each line as a warning.
 */
import type { ServerConfig } from './config.js';

/**
 * The warnings `config` deserves at start, one line each; none when it is safe to expose.
 *
 * @example
 * for (const line of startupWarnings(config)) app.log.warn(line);
 */
export function startupWarnings(config: Pick<ServerConfig, 'apiKeys'>): string[] {
  const warnings: string[] = [];
  if (config.apiKeys.length === 0) {
    warnings.push(
      'RUNNEL_API_KEYS is not set: authentication is off and every caller is "anonymous" — anyone who can reach this ' +
        'server can call every chain, and read or delete any chat history whose session_id they know or guess. ' +
        'Set RUNNEL_API_KEYS before exposing it.',
    );
  }
  return warnings;
}
