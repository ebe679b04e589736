/** Embeddings: the interface, offline feature hashing, OpenAI. */
export type { Embeddings } from './embeddings.js';
export { HashingEmbeddings, words, type HashingEmbeddingsOptions, type HashingFeatures } from './hashing.js';
export { OpenAIEmbeddings, type OpenAIEmbeddingsOptions } from './openai.js';
