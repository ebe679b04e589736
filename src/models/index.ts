/** Chat models: the base, OpenAI, Anthropic, fakes, the response cache, model from environment. */
export { ChatModel, toMessages, toToolDefinition, type ChatModelInput, type ChatModelOptions, type ToolLike } from './chat-model.js';
export { ChatOpenAI, toOpenAIMessages, fromOpenAIChunk, type ChatOpenAIOptions } from './openai.js';
export { ChatAnthropic, toAnthropicMessages, fromAnthropicEvent, type AnthropicStreamState, type ChatAnthropicOptions } from './anthropic.js';
export {
  FakeListChatModel,
  FakeToolCallingModel,
  ScriptedChatModel,
  fakeTokens,
  type FakeResponse,
  type FakeListChatModelOptions,
  type FakeToolCallingModelOptions,
  type ScriptedChatModelOptions,
} from './fake.js';
export { chatModelFromEnv, OFFLINE_ANSWER, type ChatModelFromEnvOptions } from './from-env.js';
export { InMemoryCache, cacheKey, chunksToJSON, type ModelCache } from './cache.js';
export { providerError, providerFailure, providerRetryAfter, sendsNothing } from './errors.js';
export type { CallParams, ChatCallOptions, ChatProvider, ChatRequest, ToolChoice, ToolDefinition } from './types.js';
export { apiKeyFor, openAIClient, anthropicClient, setProviderLogger, type ClientOptions, type ProviderLogger } from './clients.js';
