/** Output parsers: text, JSON (streaming), zod-validated JSON, comma-separated lists. */
export { StringOutputParser } from './string.js';
export { JsonOutputParser, parseJsonText } from './json.js';
export { StructuredOutputParser } from './structured.js';
export { CommaSeparatedListOutputParser } from './list.js';
