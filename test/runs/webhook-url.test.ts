/**
 * Which webhook URLs a run may name. A security review found that an entry
 * of RUNNEL_WEBHOOK_HOSTS allowed its host on every port: a run could make
 * the server POST its record (input and output, partly the caller's) to
 * any other service of a listed host — an admin API, a database. An entry
 * now allows the scheme's default port, or the one port it names.
 */
import { describe, expect, it } from 'vitest';
import { checkWebhookUrl } from '../../src/runs/index.js';

const policy = { hosts: ['hooks.example.com', '*.corp.example:8443', '10.0.0.5:8080', '[::1]:9000'], secret: 's3cret-0123456789', allowHttp: true };
const allowed = (url: string): boolean => {
  try {
    checkWebhookUrl(url, policy);
    return true;
  } catch {
    return false;
  }
};

describe('checkWebhookUrl', () => {
  it('calls a listed host on its scheme’s default port, or on the port its entry names', () => {
    for (const url of ['https://hooks.example.com/runs', 'https://hooks.example.com:443/runs', 'http://hooks.example.com:80/', 'https://a.corp.example:8443/x', 'http://10.0.0.5:8080/hook', 'http://[::1]:9000/']) {
      expect(allowed(url), url).toBe(true);
    }
    // An entry naming a default port allows the URLs that reach it, with the port written or not (a review).
    const defaults = { ...policy, hosts: ['a.example.com:443', 'b.example.com:80'] };
    for (const url of ['https://a.example.com/', 'https://a.example.com:443/', 'http://b.example.com/']) expect(() => checkWebhookUrl(url, defaults), url).not.toThrow();
    for (const url of ['http://a.example.com/', 'https://b.example.com/']) expect(() => checkWebhookUrl(url, defaults), url).toThrow();
  });

  it('calls no other port of a listed host, and no port of another', () => {
    for (const url of ['https://hooks.example.com:6379/', 'https://hooks.example.com:8443/', 'https://a.corp.example/x', 'https://a.corp.example:9443/x', 'http://10.0.0.5/hook', 'http://10.0.0.5:8081/', 'http://[::1]/', 'http://127.0.0.1:8080/']) {
      expect(allowed(url), url).toBe(false);
    }
    expect(() => checkWebhookUrl('https://hooks.example.com:6379/', policy)).toThrow(
      'webhook host hooks.example.com on port 6379 is not in RUNNEL_WEBHOOK_HOSTS (an entry allows the scheme\'s default port, or the one it names: hooks.example.com:6379)',
    );
  });
});
