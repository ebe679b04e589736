/**
 * A provider's refusal says why by the provider's own code for it (a new user's probe: "refused the request
 * (400)" left `/agent` on a model without tools unexplained), never by its message, which can quote the key.
 * The errors are the real SDKs' own classes, as each makes them from a provider's answer.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { providerError } from '../../src/models/errors.js';

const KEY = 'sk-test-secret-0000';

describe('providerError: a refusal', () => {
  it("names the provider's code and the parameter it refused (OpenAI)", () => {
    const body = { message: `tools is not supported with this model (key ${KEY})`, type: 'invalid_request_error', param: 'tools', code: 'unsupported_parameter' };
    const error = providerError('ChatOpenAI', OpenAI.APIError.generate(400, { error: body }, undefined, new Headers()));
    expect(error).toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_REJECTED', message: 'ChatOpenAI refused the request (400, unsupported_parameter (tools))' });
    expect(error.message).not.toContain(KEY);
  });

  it("names the error's type where the provider gives no code (Anthropic)", () => {
    const body = { type: 'error', error: { type: 'not_found_error', message: `model: claude-none (key ${KEY})` } };
    const error = providerError('ChatAnthropic', Anthropic.APIError.generate(404, body, undefined, new Headers()));
    expect(error).toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_REJECTED', message: 'ChatAnthropic refused the request (404, not_found_error)' });
  });

  it('leaves out a code or a parameter that is not a plain token', () => {
    const body = { message: 'no', type: null, param: 'a parameter with spaces', code: 'not a token: <script>' };
    expect(providerError('ChatOpenAI', OpenAI.APIError.generate(400, { error: body }, undefined, new Headers())).message).toBe('ChatOpenAI refused the request (400)');
  });
});
