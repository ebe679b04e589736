/**
 * What the server says at start about settings that leave it open: `main.ts`
 * logs each line as a warning.
 */
import { RUNNEL_SETTINGS, type ServerConfig } from './config.js';

/**
 * The warning for a provider chosen without its key, or undefined: every model call would be refused (502)
 * while the process looks healthy. The server says it among {@link startupWarnings}, a worker on its own (its
 * background runs would all end in that error).
 *
 * @example
 * const line = providerKeyWarning(process.env);
 */
export function providerKeyWarning(env: Readonly<Record<string, string | undefined>>): string | undefined {
  const provider = /^(openai|anthropic)(:|$)/.exec((env.RUNNEL_MODEL ?? '').trim())?.[1];
  const prefix = provider === 'openai' ? 'OPENAI' : 'ANTHROPIC';
  if (provider === undefined || env[`${prefix}_API_KEY`]) return undefined;
  return (
    `RUNNEL_MODEL=${env.RUNNEL_MODEL} but ${prefix}_API_KEY is not set: the provider will refuse every model call ` +
    `(502 RUNNEL_ERR_PROVIDER_REJECTED); for a server that needs no key (${prefix}_BASE_URL), set any placeholder key.`
  );
}

/**
 * The warnings `config` deserves at start, one line each; none when it is safe to expose.
 *
 * @example
 * for (const line of startupWarnings(config)) app.log.warn(line);
 */
export function startupWarnings(
  config: Pick<ServerConfig, 'apiKeys'> & Partial<Pick<ServerConfig, 'webhookHosts' | 'webhookSecret' | 'host' | 'allowedHosts'>>,
  env: Readonly<Record<string, string | undefined>> = {},
): string[] {
  const warnings: string[] = [];
  // Webhooks need both: one without the other leaves them off, and every run that asks for one is refused (422).
  const hosts = (config.webhookHosts ?? []).length > 0;
  const secret = config.webhookSecret !== undefined && config.webhookSecret !== '';
  if (hosts !== secret) {
    warnings.push(`${hosts ? 'RUNNEL_WEBHOOK_HOSTS is set but RUNNEL_WEBHOOK_SECRET is not' : 'RUNNEL_WEBHOOK_SECRET is set but RUNNEL_WEBHOOK_HOSTS is not'}: webhooks are off, and a run that asks for one is refused (422 RUNNEL_ERR_WEBHOOK_NOT_ALLOWED). Set both.`);
  }
  const keyless = providerKeyWarning(env);
  if (keyless !== undefined) warnings.push(keyless);
  if (config.apiKeys.length === 0) {
    warnings.push(
      'RUNNEL_API_KEYS is not set: authentication is off and every caller is "anonymous" — anyone who can reach this ' +
        'server can call every chain, and read or delete any chat history whose session_id they know or guess. ' +
        'Set RUNNEL_API_KEYS before exposing it.',
    );
    // Reached from other machines, it is reached by a name too (a LAN name, a service name), which it refuses.
    const host = config.host ?? '127.0.0.1';
    if (!['127.0.0.1', '::1', 'localhost'].includes(host) && !(config.allowedHosts ?? []).includes('*')) {
      warnings.push(
        `Listening on ${host} without RUNNEL_API_KEYS: requests are answered only under IP addresses, localhost` +
          `${(config.allowedHosts ?? []).length > 0 ? ` and ${(config.allowedHosts ?? []).join(', ')}` : ''} ` +
          '(a web page could otherwise reach this server through a name it points here); any other host name gets 403 ' +
          'RUNNEL_ERR_HOST_NOT_ALLOWED. List the names clients use in RUNNEL_ALLOWED_HOSTS, or set keys.',
      );
    }
  }
  warnings.push(...unknownSettings(env));
  return warnings;
}

/** How many single-letter edits turn `a` into `b` (Levenshtein's distance). */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min((previous[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = row;
  }
  return previous[b.length] ?? 0;
}

/**
 * A warning for each `RUNNEL_*` variable of `env` that Runnel does not read (`RUNNEL_MAX_STREAM`,
 * `RUNNEL_API_KEY`): set on purpose, it would change nothing while its author believes it holds — a limit
 * or the keys left off. The nearest setting's name is offered when one is a few letters away.
 *
 * @example
 * unknownSettings({ RUNNEL_MAX_STREAM: '50' });
 * // ['RUNNEL_MAX_STREAM is not a Runnel setting and changes nothing: did you mean RUNNEL_MAX_STREAMS?']
 */
export function unknownSettings(env: Readonly<Record<string, string | undefined>>): string[] {
  const warnings: string[] = [];
  for (const name of Object.keys(env).sort()) {
    if (!name.startsWith('RUNNEL_') || RUNNEL_SETTINGS.has(name) || env[name] === undefined) continue;
    let nearest: { name: string; distance: number } | undefined;
    for (const known of RUNNEL_SETTINGS) {
      const distance = editDistance(name, known);
      if (nearest === undefined || distance < nearest.distance) nearest = { name: known, distance };
    }
    const hint = nearest !== undefined && nearest.distance <= 3 ? `: did you mean ${nearest.name}?` : ' (the settings are listed in README\'s Configuration)';
    warnings.push(`${name} is not a Runnel setting and changes nothing${hint}`);
  }
  return warnings;
}
