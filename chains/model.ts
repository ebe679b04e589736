/**
 * The chat model the shipped chains use: OpenAI or Anthropic when a key (or
 * RUNNEL_MODEL) says so, otherwise the offline fake model, whose answers say
 * that they come from it.
 */
import { chatModelFromEnv } from '../src/index.js';

export const model = chatModelFromEnv();
