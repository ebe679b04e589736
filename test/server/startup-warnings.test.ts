import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadServerConfig } from '../../src/index.js';
import { startupWarnings, unknownSettings } from '../../src/server/startup-warnings.js';

describe('startup warnings', () => {
  it('says plainly, when keys are off, that every caller is anonymous and chat histories are open to whoever knows a session_id', () => {
    const [warning, ...others] = startupWarnings(loadServerConfig({}));
    expect(others).toEqual([]);
    expect(warning).toMatch(/RUNNEL_API_KEYS is not set/);
    expect(warning).toMatch(/every caller is "anonymous"/);
    expect(warning).toMatch(/read or delete any chat history whose session_id they know or guess/);
  });

  it('says, when keys are off and it listens beyond this machine, which host names it answers under (a review)', () => {
    const warnings = startupWarnings(loadServerConfig({ HOST: '0.0.0.0', RUNNEL_ALLOWED_HOSTS: 'runnel.internal' }));
    expect(warnings).toHaveLength(2);
    expect(warnings[1]).toMatch(/^Listening on 0\.0\.0\.0 without RUNNEL_API_KEYS: requests are answered only under IP addresses, localhost and runnel\.internal /);
    expect(startupWarnings(loadServerConfig({ HOST: '0.0.0.0', RUNNEL_ALLOWED_HOSTS: '*' }))).toHaveLength(1);
    expect(startupWarnings(loadServerConfig({ HOST: '0.0.0.0', RUNNEL_API_KEYS: 'ops:0123456789abcdef0' }))).toEqual([]);
  });

  it('has nothing to say when keys are on', () => {
    expect(startupWarnings(loadServerConfig({ RUNNEL_API_KEYS: 'ops:0123456789abcdef0' }))).toEqual([]);
  });

  it("warns when RUNNEL_MODEL picks a provider whose key is not set: every model call would be refused", () => {
    const keyed = loadServerConfig({ RUNNEL_API_KEYS: 'ops:0123456789abcdef0' });
    expect(startupWarnings(keyed, { RUNNEL_MODEL: 'openai:gpt-4o' })).toEqual([expect.stringMatching(/^RUNNEL_MODEL=openai:gpt-4o but OPENAI_API_KEY is not set: the provider will refuse every model call/)]);
    expect(startupWarnings(keyed, { RUNNEL_MODEL: 'anthropic', ANTHROPIC_BASE_URL: 'http://127.0.0.1:9' })[0]).toMatch(/ANTHROPIC_API_KEY is not set.*for a server that needs no key \(ANTHROPIC_BASE_URL\), set any placeholder key/);
    expect(startupWarnings(keyed, { RUNNEL_MODEL: 'openai:gpt-4o', OPENAI_API_KEY: 'sk-x' })).toEqual([]);
    expect(startupWarnings(keyed, { RUNNEL_MODEL: 'fake' })).toEqual([]);
  });

  it('warns when webhooks are half configured (hosts without a secret, or a secret without hosts): they are off', () => {
    const keys = { RUNNEL_API_KEYS: 'ops:0123456789abcdef0' };
    expect(startupWarnings(loadServerConfig({ ...keys, RUNNEL_WEBHOOK_HOSTS: 'hooks.example.com' }))).toEqual([expect.stringMatching(/^RUNNEL_WEBHOOK_HOSTS is set but RUNNEL_WEBHOOK_SECRET is not: webhooks are off/)]);
    expect(startupWarnings(loadServerConfig({ ...keys, RUNNEL_WEBHOOK_SECRET: '0123456789abcdef' }))).toEqual([expect.stringMatching(/^RUNNEL_WEBHOOK_SECRET is set but RUNNEL_WEBHOOK_HOSTS is not/)]);
    expect(startupWarnings(loadServerConfig({ ...keys, RUNNEL_WEBHOOK_HOSTS: 'hooks.example.com', RUNNEL_WEBHOOK_SECRET: '0123456789abcdef' }))).toEqual([]);
  });
});

describe('settings Runnel does not read', () => {
  const keyed = loadServerConfig({ RUNNEL_API_KEYS: 'ops:0123456789abcdef0' });

  it('names each RUNNEL_* variable it does not read, with the setting a typo was meant for', () => {
    expect(startupWarnings(keyed, { RUNNEL_MAX_STREAM: '50', RUNNEL_API_KEY: 'ops:0123456789abcdef0', RUNNEL_RATELIMIT: '10' })).toEqual([
      'RUNNEL_API_KEY is not a Runnel setting and changes nothing: did you mean RUNNEL_API_KEYS?',
      'RUNNEL_MAX_STREAM is not a Runnel setting and changes nothing: did you mean RUNNEL_MAX_STREAMS?',
      'RUNNEL_RATELIMIT is not a Runnel setting and changes nothing: did you mean RUNNEL_RATE_LIMIT?',
    ]);
    expect(unknownSettings({ RUNNEL_SOMETHING_ELSE_ENTIRELY: '1' })).toEqual([
      "RUNNEL_SOMETHING_ELSE_ENTIRELY is not a Runnel setting and changes nothing (the settings are listed in README's Configuration)",
    ]);
  });

  it('is quiet about every setting README documents, tracing\'s and compose\'s included, and about other prefixes', () => {
    // The names in the rows of README's tables (its prose names two typos on purpose).
    const rows = readFileSync(new URL('../../README.md', import.meta.url), 'utf8').split('\n').filter((line) => line.startsWith('|'));
    const documented = rows.join('\n').match(/\bRUNNEL_[A-Z_]+[A-Z]\b/g) ?? [];
    const settings = [...new Set(documented)].filter((name) => !name.startsWith('RUNNEL_ERR_'));
    expect(settings.length).toBeGreaterThan(25);
    expect(unknownSettings(Object.fromEntries(settings.map((name) => [name, '1'])))).toEqual([]);
    expect(unknownSettings({ RUNNEL_TRACE_CONTENT: 'true', RUNNEL_CLUSTER_PROCESS: '1', OTEL_SERVICE_NAME: 'x', RUNNELX: '1' })).toEqual([]);
  });
});
