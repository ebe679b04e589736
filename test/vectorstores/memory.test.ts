import { MemoryVectorStore } from '../../src/index.js';
import { vectorStoreContract } from './contract.js';

vectorStoreContract('MemoryVectorStore', async (embeddings) => new MemoryVectorStore(embeddings));
