/** Documents: the class, loaders, and the recursive and Markdown text splitters. */
export { Document, documentJsonSchema, searchableText, type DocumentFields } from './document.js';
export { loadText, loadMarkdown, loadJsonLines, loadDirectory, loadFile, listFiles, partitionFiles, readTextFile, globToRegExp, MAX_FILE_BYTES, type LoadOptions } from './loaders.js';
export { RecursiveCharacterTextSplitter, type TextSplitterOptions } from './splitter.js';
export { MarkdownTextSplitter, type MarkdownSplitterOptions, type MarkdownChunk } from './markdown-splitter.js';
export { terms, queryTerms, MAX_TERMS_PER_DOCUMENT } from './terms.js';
export { stem } from './stemmer.js';
