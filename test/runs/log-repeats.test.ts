/**
 * The worker's error log through a Redis outage: BullMQ's worker fails at
 * every try while Redis is away, and the log gets the first error of each
 * kind, then a line a minute saying how many it held back — not a line a
 * second for the whole outage. The clock is the test's.
 */
import { describe, expect, it } from 'vitest';
import { repeatsHeldBack } from '../../src/runs/queue.js';

describe('repeatsHeldBack', () => {
  it('passes the first of each kind, then one a minute with the count held back', () => {
    let clock = 0;
    const lines: string[] = [];
    const log = repeatsHeldBack((error, message) => lines.push(`${message}: ${(error as Error).message}`), { now: () => clock });
    const refused = new Error('connect ECONNREFUSED 127.0.0.1:6379');
    // An outage of two and a half minutes, a failure a second.
    for (clock = 0; clock < 150_000; clock += 1_000) log(refused, 'run worker error');
    expect(lines).toEqual([
      'run worker error: connect ECONNREFUSED 127.0.0.1:6379',
      'run worker error (and 59 more like it since the last line): connect ECONNREFUSED 127.0.0.1:6379',
      'run worker error (and 59 more like it since the last line): connect ECONNREFUSED 127.0.0.1:6379',
    ]);
    // Another kind is not held back by the first; the first, after a quiet minute, passes at once.
    log(new Error('READONLY You can\'t write against a read only replica.'), 'run worker error');
    clock += 120_000;
    log(refused, 'run worker error');
    expect(lines.slice(3)).toEqual([
      "run worker error: READONLY You can't write against a read only replica.",
      'run worker error (and 29 more like it since the last line): connect ECONNREFUSED 127.0.0.1:6379',
    ]);
  });
});
