/** Embeddings: the interface, offline feature hashing, OpenAI. */
export type { Embeddings } from './embeddings.js';
export { HashingEmbeddings, words } from './hashing.js';
export { OpenAIEmbeddings, type OpenAIEmbeddingsOptions } from './openai.js';
