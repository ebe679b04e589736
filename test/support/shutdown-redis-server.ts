/**
 * A Runnel process on the Redis REDIS_URL names, for the shutdown tests: `/forever` never answers by itself
 * (printing "started forever" as it begins), its background runs execute here (two at a time), and signals
 * are handled exactly as `npm start` handles them. Prints "ready <port>".
 */
import { buildApp, connectServices, defineChain, exitOnSignals, lambda } from '../../src/index.js';

const namespace = `runnel-test-shutdown-${process.pid}`;
const services = await connectServices({ redisUrl: process.env.REDIS_URL, namespace });
const app = await buildApp({
  chains: [
    defineChain({
      path: '/forever',
      runnable: lambda(async (x: string) => {
        console.log(`started forever ${x}`);
        return new Promise<string>(() => {});
      }),
    }),
  ] as never,
  services,
  config: { shutdownGraceMs: 1000, runNamespace: namespace, workerConcurrency: 2 },
});
await app.listen({ port: 0, host: '127.0.0.1' });
exitOnSignals(app);
console.log(`ready ${(app.server.address() as { port: number }).port}`);
