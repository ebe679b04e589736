/**
 * Provider SDK clients, made on first use: a missing key is a clear
 * `RUNNEL_ERR_PROVIDER_REJECTED` at the first call (never at import), and the
 * key goes only into the client.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { RunnelError } from '../core/index.js';

/** What every client takes. */
export interface ClientOptions {
  apiKey?: string | undefined;
  baseURL?: string | undefined;
  maxRetries?: number | undefined;
  timeout?: number | undefined;
}

/** The explicit key, else the environment's; `who` names the component in the error. */
export function apiKeyFor(explicit: string | undefined, envName: string, who: string): string {
  const key = explicit ?? process.env[envName];
  if (key === undefined || key === '') throw new RunnelError('RUNNEL_ERR_PROVIDER_REJECTED', `${who} has no API key: set ${envName} or pass apiKey`);
  return key;
}

const common = (options: ClientOptions) => ({
  maxRetries: options.maxRetries ?? 2,
  ...(options.timeout === undefined ? {} : { timeout: options.timeout }),
});

/** An OpenAI client (`OPENAI_API_KEY`, `OPENAI_BASE_URL`). */
export function openAIClient(options: ClientOptions, who: string): OpenAI {
  return new OpenAI({
    apiKey: apiKeyFor(options.apiKey, 'OPENAI_API_KEY', who),
    baseURL: options.baseURL ?? process.env.OPENAI_BASE_URL ?? undefined,
    ...common(options),
  });
}

/** An Anthropic client (`ANTHROPIC_API_KEY`). */
export function anthropicClient(options: ClientOptions, who: string): Anthropic {
  return new Anthropic({
    apiKey: apiKeyFor(options.apiKey, 'ANTHROPIC_API_KEY', who),
    ...(options.baseURL === undefined ? {} : { baseURL: options.baseURL }),
    ...common(options),
  });
}
