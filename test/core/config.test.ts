import { describe, expect, it } from 'vitest';
import {
  lambda,
  mergeConfigs,
  sequence,
  Runnable,
  type RunnableConfig,
  type StreamEvent,
} from '../../src/index.js';
import { toArray } from '../helpers.js';

describe('config merging', () => {
  it('unites tags sorted, merges metadata and configurable with later winning', () => {
    expect(
      mergeConfigs(
        { tags: ['b', 'a'], metadata: { x: 1, y: 1 }, configurable: { m: 'a' } },
        { tags: ['c', 'a'], metadata: { y: 2 }, configurable: { n: 1 } },
      ),
    ).toEqual({ tags: ['a', 'b', 'c'], metadata: { x: 1, y: 2 }, configurable: { m: 'a', n: 1 } });
  });

  it('takes recursionLimit only where it is not the default', () => {
    expect(mergeConfigs({ recursionLimit: 7 }, { recursionLimit: 25 }).recursionLimit).toBe(7);
    expect(mergeConfigs({ recursionLimit: 7 }, { recursionLimit: 9 }).recursionLimit).toBe(9);
  });
});

describe('config reaches nested runs', () => {
  it('inherits tags, metadata, configurable and signal through AsyncLocalStorage when not handed on', async () => {
    let seen: RunnableConfig | undefined;
    const inner = lambda((x: number, config: RunnableConfig) => {
      seen = config;
      return x;
    });
    // The outer function calls inner.invoke without passing its config on.
    const outer = lambda(async (x: number) => inner.invoke(x));
    const controller = new AbortController();
    await outer.invoke(1, {
      tags: ['outer'],
      metadata: { user: 'u1' },
      configurable: { mode: 'fast' },
      signal: controller.signal,
    });
    expect(seen?.tags).toEqual(['outer']);
    expect(seen?.metadata).toEqual({ user: 'u1' });
    expect(seen?.configurable).toEqual({ mode: 'fast' });
    expect(seen?.signal?.aborted).toBe(false);
    controller.abort();
    expect(seen?.signal?.aborted).toBe(true);
  });

  it('makes a runnable invoked inside a lambda appear as its child in events', async () => {
    const inner = lambda((x: number) => x + 1, { name: 'inner' });
    const outer = lambda(async (x: number) => inner.invoke(x), { name: 'outer' });
    const events = await toArray(outer.streamEvents(1));
    const outerStart = events.find((e) => e.event === 'on_chain_start' && e.name === 'outer') as StreamEvent;
    const innerStart = events.find((e) => e.event === 'on_chain_start' && e.name === 'inner') as StreamEvent;
    expect(innerStart.parent_ids).toEqual([outerStart.run_id]);
  });

  it('merges an explicit config with the inherited one', async () => {
    let seen: RunnableConfig | undefined;
    const inner = lambda((x: number, config: RunnableConfig) => {
      seen = config;
      return x;
    });
    const outer = lambda(async (x: number) => inner.invoke(x, { tags: ['inner'], metadata: { b: 2 } }));
    await outer.invoke(1, { tags: ['outer'], metadata: { a: 1 } });
    expect(seen?.tags).toEqual(['inner', 'outer']);
    expect(seen?.metadata).toEqual({ a: 1, b: 2 });
  });

  it('gives every run its own id, and the root the runId of its config', async () => {
    const chain = sequence(
      (x: number) => x,
      (x: number) => x,
    );
    const runId = '0b7d1c5e-2f43-4c8a-9a57-1e2f3a4b5c6d';
    const events = await toArray(chain.streamEvents(1, { runId }));
    const starts = events.filter((e) => e.event.endsWith('_start'));
    expect(starts[0]?.run_id).toBe(runId);
    expect(new Set(starts.map((e) => e.run_id)).size).toBe(starts.length);
  });

  it('tags the steps of a sequence seq:step:N, on the step alone', async () => {
    const inner = lambda((x: number) => x, { name: 'inner' });
    const chain = sequence(
      lambda((x: number) => x, { name: 'first' }),
      lambda(async (x: number) => inner.invoke(x), { name: 'second' }),
    );
    const events = await toArray(chain.streamEvents(1, { tags: ['mine'] }));
    const tagsOf = (name: string): string[] => events.find((e) => e.name === name && e.event === 'on_chain_start')?.tags ?? [];
    expect(tagsOf('first')).toEqual(['mine', 'seq:step:1']);
    expect(tagsOf('second')).toEqual(['mine', 'seq:step:2']);
    expect(tagsOf('inner')).toEqual(['mine']);
  });

  it('runs a runnable returned by a lambda with the same input, up to recursionLimit', async () => {
    const double = lambda((x: number) => x * 2);
    expect(await lambda(() => double).invoke(4)).toBe(8);

    const countdown: Runnable<number, string> = lambda((n: number) => (n <= 0 ? 'done' : lambda(() => countdown)));
    expect(await countdown.invoke(0)).toBe('done');
    const forever: Runnable<number, number> = lambda(() => forever);
    await expect(forever.invoke(1, { recursionLimit: 5 })).rejects.toMatchObject({ code: 'RUNNEL_ERR_RECURSION_LIMIT' });
  });

  it('hands call options to the run and not to its children (bind)', async () => {
    class Echo extends Runnable<string, string, RunnableConfig & { suffix?: string }> {
      readonly name = 'Echo';
      protected override async _call(input: string, run: { options: Readonly<Record<string, unknown>> }): Promise<string> {
        return input + String(run.options.suffix ?? '');
      }
    }
    const echo = new Echo();
    expect(await echo.invoke('a', { suffix: '!' })).toBe('a!');
    expect(await echo.bind({ suffix: '?' }).invoke('a')).toBe('a?');
    expect(await echo.bind({ suffix: '?' }).invoke('a', { suffix: '!' })).toBe('a!');
    expect(await sequence(echo.bind({ suffix: '1' }), echo).invoke('a')).toBe('a1');
  });

  it('applies withConfig under the call config', async () => {
    let seen: RunnableConfig | undefined;
    const step = lambda((x: number, config: RunnableConfig) => {
      seen = config;
      return x;
    }).withConfig({ tags: ['bound'], metadata: { a: 'bound', b: 'bound' } });
    await step.invoke(1, { tags: ['call'], metadata: { a: 'call' } });
    expect(seen?.tags).toEqual(['bound', 'call']);
    expect(seen?.metadata).toEqual({ a: 'call', b: 'bound' });
  });
});
