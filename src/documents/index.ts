/** Documents: the class, loaders, and the recursive text splitter. */
export { Document, documentJsonSchema, type DocumentFields } from './document.js';
export { loadText, loadMarkdown, loadJsonLines, loadDirectory, globToRegExp } from './loaders.js';
export { RecursiveCharacterTextSplitter, type TextSplitterOptions } from './splitter.js';
