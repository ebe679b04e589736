/**
 * Provider failures as Runnel errors with stable codes: a rate limit is
 * `RUNNEL_ERR_PROVIDER_RATE_LIMITED` (429), a timeout
 * `RUNNEL_ERR_PROVIDER_TIMEOUT` (504), a 5xx or broken connection
 * `RUNNEL_ERR_PROVIDER_UNAVAILABLE` (502), a refusal (bad key, unknown model)
 * `RUNNEL_ERR_PROVIDER_REJECTED` (502). Messages name the provider and the
 * status, never the request's credentials; the SDK's error stays as `cause`.
 */
import { abortError, isRunnelError, RunnelError } from '../core/index.js';

/** Converts whatever a provider SDK threw into a Runnel error. */
export function providerError(provider: string, error: unknown, signal?: { readonly aborted: boolean; readonly reason: unknown }): RunnelError {
  if (isRunnelError(error)) return error;
  if (signal?.aborted === true) return abortError(signal);
  const status = (error as { status?: unknown }).status;
  const name = error instanceof Error ? error.constructor.name : '';
  if (typeof status === 'number') {
    if (status === 429) return new RunnelError('RUNNEL_ERR_PROVIDER_RATE_LIMITED', `${provider} rate-limited the request (429)`, { cause: error });
    if (status === 408 || status === 504) return new RunnelError('RUNNEL_ERR_PROVIDER_TIMEOUT', `${provider} timed out (${status})`, { cause: error });
    if (status >= 500) return new RunnelError('RUNNEL_ERR_PROVIDER_UNAVAILABLE', `${provider} failed (${status})`, { cause: error });
    return new RunnelError('RUNNEL_ERR_PROVIDER_REJECTED', `${provider} refused the request (${status})`, { cause: error });
  }
  if (/Timeout/i.test(name)) return new RunnelError('RUNNEL_ERR_PROVIDER_TIMEOUT', `${provider} did not answer in time`, { cause: error });
  if (/Abort/i.test(name)) return new RunnelError('RUNNEL_ERR_ABORTED', 'The run was aborted', { cause: error });
  return new RunnelError('RUNNEL_ERR_PROVIDER_UNAVAILABLE', `${provider} could not be reached or broke off the answer`, { cause: error });
}
