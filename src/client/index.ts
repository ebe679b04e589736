/** The client: a chain on a Runnel or LangServe server as a runnable, and its background runs. */
export {
  RemoteRunnable,
  type JoinOptions,
  type RemoteCallOptions,
  type RemoteRunnableOptions,
  type RemoteRunRecord,
  type RemoteRunStatus,
  type SubmitOptions,
  type WaitOptions,
} from './remote.js';
export { type ResumeOptions, type RunStream } from './follow.js';
export { parseSse, type SseMessage } from './sse.js';
export { revive } from './revive.js';
