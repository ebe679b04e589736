/**
 * The hard deadline after SIGTERM follows RUNNEL_SHUTDOWN_GRACE_MS: a grace
 * of 15 s is honoured (streams get their final frames), and the process
 * exits 1 only past the grace plus a bounded margin. Fake timers and a fake
 * app: no process is signalled, nothing waits for real.
 */
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { exitOnSignals, shutdownDeadlineMs } from '../../src/server/signals.js';

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

/** Installs exitOnSignals on a fake app whose shutdown never ends, and returns SIGTERM and the exit calls. */
function install(shutdownGraceMs: number) {
  const handlers = new Map<string, () => void>();
  vi.spyOn(process, 'on').mockImplementation(((event: string, handler: () => void) => {
    handlers.set(event, handler);
    return process;
  }) as typeof process.on);
  const exit = vi.spyOn(process, 'exit').mockImplementation((() => undefined) as never);
  const app = {
    runnel: { config: { shutdownGraceMs } },
    log: { info: () => {}, error: () => {} },
    shutdown: () => new Promise<void>(() => {}),
  } as unknown as FastifyInstance;
  exitOnSignals(app);
  return { sigterm: () => handlers.get('SIGTERM')?.(), exit };
}

describe('exitOnSignals', () => {
  it('waits out a 15 s grace before the hard deadline, then exits 1', () => {
    vi.useFakeTimers();
    const { sigterm, exit } = install(15_000);
    sigterm();
    vi.advanceTimersByTime(15_000);
    expect(exit).not.toHaveBeenCalled();
    vi.advanceTimersByTime(shutdownDeadlineMs(15_000) - 15_000);
    expect(exit).toHaveBeenCalledWith(1);
  });

  it('derives the deadline from the grace: past it by a bounded margin, for any grace', () => {
    for (const grace of [0, 1_000, 5_000, 15_000, 120_000]) {
      const deadline = shutdownDeadlineMs(grace);
      expect(deadline).toBeGreaterThan(grace);
      expect(deadline - grace).toBe(shutdownDeadlineMs(0));
    }
  });
});
