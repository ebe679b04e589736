/** The client: a chain on a Runnel or LangServe server as a runnable. */
export { RemoteRunnable, type RemoteRunnableOptions } from './remote.js';
export { parseSse, type SseMessage } from './sse.js';
export { revive } from './revive.js';
