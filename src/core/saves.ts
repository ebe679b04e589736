/**
 * `Saves`: the saves of runs that answer as one — a request, a batch, a
 * background run — collected through `RunnableConfig.onSave`, and taken back
 * when that answer is a failure: a chat turn its client was told failed is not
 * kept (the client sends it again, and it would be kept twice).
 */
import type { RunnableConfig, SaveHandler, TakeBack } from './config.js';
import { callQuietly } from './events.js';
import type { Runnable } from './runnable.js';

const quietly = (takeBack: TakeBack): Promise<void> => takeBack().catch(() => undefined);

/**
 * The take-backs of the saves reported to {@link Saves.onSave}; {@link Saves.takeBack} runs them, and any
 * reported after it (a save under way when the answer failed) as it comes.
 *
 * @example
 * const saves = new Saves();
 * try {
 *   return await chain.invoke(input, { ...config, onSave: saves.onSave });
 * } catch (error) {
 *   await saves.takeBack();
 *   throw error;
 * }
 */
export class Saves {
  private list: TakeBack[] | undefined;
  private failed = false;
  /** Set by {@link Saves.passTo}: the collector the saves went to. */
  private passed: SaveHandler | undefined | null = null;

  /** The config's `onSave`. */
  readonly onSave: SaveHandler = (takeBack) => {
    if (this.failed) void quietly(takeBack);
    else if (this.passed !== null) {
      if (this.passed !== undefined) callQuietly(this.passed, takeBack);
    } else (this.list ??= []).push(takeBack);
  };

  /**
   * Hands every save reported so far to `onSave`, and each one reported later: the part these saves belong to
   * (a retry's attempt, a fallback) succeeded, and whoever answers for the whole decides. Without a collector
   * they are kept. A collector that throws does not fail the answer it is handed (as other handlers, it observes).
   */
  passTo(onSave: SaveHandler | undefined): void {
    if (this.failed || this.passed !== null) return;
    this.passed = onSave;
    const list = this.list;
    this.list = undefined;
    if (list !== undefined && onSave !== undefined) for (const takeBack of list) callQuietly(onSave, takeBack);
  }

  /** Takes back every save reported so far (settles once each has been tried), and each one reported later. */
  async takeBack(): Promise<void> {
    if (this.passed !== null) return;
    this.failed = true;
    const list = this.list;
    this.list = undefined;
    if (list !== undefined) await Promise.all(list.map(quietly));
  }
}

/**
 * `runnable.invoke(input, config)` for an answer of its own: when it fails, what its runs saved is taken back
 * before the error is thrown on.
 *
 * @example
 * const output = await invokeAnswering(chain, input, { signal }); // a failed run keeps no chat turn
 */
export async function invokeAnswering<I, O>(runnable: Runnable<I, O>, input: I, config: RunnableConfig): Promise<O> {
  const saves = new Saves();
  try {
    const output = await runnable.invoke(input, { ...config, onSave: saves.onSave });
    // Succeeded: whoever answers for a run around this one (the config's own collector) decides, as for a retry.
    saves.passTo(config.onSave);
    return output;
  } catch (error) {
    await saves.takeBack();
    throw error;
  }
}
