import { describe, expect, it } from 'vitest';
import { loadServerConfig } from '../../src/index.js';
import { startupWarnings } from '../../src/server/startup-warnings.js';

describe('startup warnings', () => {
  it('says plainly, when keys are off, that every caller is anonymous and chat histories are open to whoever knows a session_id', () => {
    const [warning, ...others] = startupWarnings(loadServerConfig({}));
    expect(others).toEqual([]);
    expect(warning).toMatch(/RUNNEL_API_KEYS is not set/);
    expect(warning).toMatch(/every caller is "anonymous"/);
    expect(warning).toMatch(/read or delete any chat history whose session_id they know or guess/);
  });

  it('has nothing to say when keys are on', () => {
    expect(startupWarnings(loadServerConfig({ RUNNEL_API_KEYS: 'ops:0123456789abcdef0' }))).toEqual([]);
  });
});
