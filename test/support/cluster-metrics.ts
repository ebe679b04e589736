/**
 * Two server processes under serveOnProcesses, asking the first process for the sum of their metrics, by
 * CLUSTER_MODE:
 * - `dies` (default): the asking process dies right after asking (SIGKILL): the first process must live on.
 *   Prints "asked".
 * - `slow`: the other process never hands in its series: the sum is `incomplete`, not a short one.
 * - `foreign`: processes forked by node:cluster directly (another cluster manager): nobody sums, and the
 *   process says so at once (`undefined`) instead of waiting for an answer.
 * Prints "sum: <what clusterMetrics gave>" in the last two.
 */
import cluster from 'node:cluster';
import { clusterMetrics, offerClusterMetrics, serveOnProcesses } from '../../src/server/cluster.js';

const mode = process.env.CLUSTER_MODE ?? 'dies';

if (mode === 'foreign') {
  if (cluster.isPrimary) {
    const worker = cluster.fork();
    // What the process asked of this one, if anything (another manager answers nothing).
    worker.on('message', (message: unknown) => console.log(`heard ${JSON.stringify(message)}`));
    worker.on('exit', () => process.exit(0));
  } else {
    offerClusterMetrics(async () => []);
    console.log(`sum: ${String(await clusterMetrics())}`);
    process.exit(0);
  }
} else {
  await serveOnProcesses({ count: 2, deadlineMs: 5_000, restartDelayMs: 60_000, log: (_level, line) => console.log(line) }, async () => {
    const first = cluster.worker?.id === 1;
    // The second process's series never come, in `slow`.
    offerClusterMetrics(mode === 'slow' && !first ? () => new Promise(() => undefined) : async () => []);
    if (!first) return;
    // Once both serve (the first process replaces a process that dies only after one has served).
    setTimeout(() => {
      if (mode === 'dies') {
        void clusterMetrics();
        console.log('asked');
        process.kill(process.pid, 'SIGKILL');
      } else {
        void clusterMetrics().then((sum) => console.log(`sum: ${String(sum)}`));
      }
    }, 1_000);
  });
}
