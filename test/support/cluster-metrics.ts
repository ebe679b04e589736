/**
 * A cluster of two server processes (serveOnProcesses) whose first one is asked for the sum of their metrics
 * by a process that dies at that moment (SIGKILL right after asking): the first process must not go down with
 * it. Prints "asked" once the doomed process has asked; the test then checks that the first process lives.
 */
import cluster from 'node:cluster';
import { clusterMetrics, offerClusterMetrics, serveOnProcesses } from '../../src/server/cluster.js';

await serveOnProcesses({ count: 2, deadlineMs: 5_000, restartDelayMs: 60_000, log: (line) => console.log(line) }, async () => {
  offerClusterMetrics(async () => []);
  if (cluster.worker?.id === 1) {
    // Once both serve (the first process replaces a process that dies only after one has served).
    setTimeout(() => {
      void clusterMetrics();
      console.log('asked');
      process.kill(process.pid, 'SIGKILL');
    }, 1_000);
  }
});
