/** The chains the server serves. Add yours here. */
import { createRegistry } from '../src/index.js';
import { joke } from './joke.js';

export const chains = createRegistry([joke]);
