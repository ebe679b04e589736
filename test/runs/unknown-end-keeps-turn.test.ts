/**
 * A background run whose success end was written though its write failed on this side (it timed out, and Redis
 * ran it as it woke: the case the queue's `OwnEnds` exists for) succeeded — its record says success, its webhook
 * is told so — and keeps the chat turn it saved. Before, the failed write took the turn back, and the error end
 * that followed, found ended "elsewhere" or failing too, never learnt the run was its own success.
 */
import { expect, it } from 'vitest';
import { lambda, MemoryHistoryStore, withMessageHistory } from '../../src/index.js';
import { CancelToken } from '../../src/core/index.js';
import { executeRun } from '../../src/runs/executor.js';
import { MemoryRunStore, type RunRecord, type RunStore } from '../../src/runs/store.js';

/**
 * A store whose first success end fails as a timed-out write does: written (`ran`) or not, its reply lost. With
 * `down`, every end after it fails unwritten too (the store still frozen).
 */
function timedOutEnd(store: MemoryRunStore, options: { ran: boolean; down: boolean }): RunStore {
  let failed = false;
  return new Proxy(store, {
    get(target, key, receiver) {
      if (key === 'end') {
        return async (...args: Parameters<RunStore['end']>) => {
          if (failed && options.down) throw new Error('Command timed out');
          if (!failed && args[2].status === 'success') {
            failed = true;
            if (options.ran) await target.end(...args);
            throw new Error('Command timed out');
          }
          return target.end(...args);
        };
      }
      const value = Reflect.get(target, key, receiver) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  }) as unknown as RunStore;
}

async function run(options: { ran: boolean; down: boolean }): Promise<{ status: string | undefined; turn: string[] }> {
  const histories = new MemoryHistoryStore();
  const chain = withMessageHistory<string, string>(lambda((messages: unknown[]) => `answer to ${messages.length}`) as never, {
    getHistory: (sessionId, { identity }) => histories.history(`${identity}:${sessionId}`),
  });
  const memory = new MemoryRunStore();
  const now = new Date().toISOString();
  const record: RunRecord = {
    run_id: 'r-1',
    chain: '/chat',
    kind: 'stream',
    identity: 'anonymous',
    status: 'pending',
    input: 'hello',
    config: { configurable: { session_id: 's1' } },
    created_at: now,
    updated_at: now,
  };
  await memory.create(record);
  await executeRun({ record, runnable: chain as never, store: timedOutEnd(memory, options), signal: new CancelToken() }).catch(() => undefined);
  // What is decided without waiting for the store is decided by now.
  await new Promise((resolve) => setTimeout(resolve, 50));
  return { status: (await memory.get('r-1'))?.status, turn: histories.read('anonymous:s1').map((m) => m.text) };
}

it('a run whose success end was written though its write failed keeps its turn', async () => {
  expect(await run({ ran: true, down: false })).toEqual({ status: 'success', turn: ['hello', 'answer to 1'] });
});

it('so does one whose error end failed after it too (the store still frozen)', async () => {
  expect(await run({ ran: true, down: true })).toEqual({ status: 'success', turn: ['hello', 'answer to 1'] });
});

it('a run whose success end was not written, and which ended in error, keeps no turn', async () => {
  expect(await run({ ran: false, down: false })).toEqual({ status: 'error', turn: [] });
});
