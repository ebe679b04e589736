/**
 * The server side of `npm run bench:soak`: the shipped chains
 * (`chains/index.ts`) on the embedded defaults — histories and the response
 * cache in memory, no Redis, no Postgres — built as `npm start` builds them,
 * in a process of their own so the heap measured is the server's alone.
 *
 * Started by bench/soak.ts with `node --expose-gc` and an IPC channel, it
 * answers the bench's messages:
 *
 * - `{type: 'heap'}`: two full GCs, then `process.memoryUsage()`;
 * - `{type: 'snapshot', path}`: a full GC, then a heap snapshot written to `path`;
 * - `{type: 'close'}`: closes the app and exits.
 *
 * Model: the offline model without `SOAK_OPENAI_KEY`; with it, OpenAI at
 * `SOAK_OPENAI_BASE_URL`. Nothing else of the environment reaches the chains.
 * The offline model streams without a delay (`SOAK_OFFLINE_DELAY_MS`, default 0).
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeHeapSnapshot } from 'node:v8';
import type * as Chains from '../chains/index.js';
import { runnel } from './runnel.js';

const compiledChains = '../dist/chains/index.js';
const { createChains } = (await import(compiledChains)) as typeof Chains;
const { buildApp, connectServices, loadServerConfig } = runnel;

type Request = { type: 'heap' } | { type: 'snapshot'; path: string } | { type: 'close' };

const collect = globalThis.gc;
if (collect === undefined || process.send === undefined) throw new Error('bench/soak-server.ts runs under bench/soak.ts: node --expose-gc, with an IPC channel');
const send = process.send.bind(process);

const model = process.env.SOAK_OPENAI_KEY ? { OPENAI_API_KEY: process.env.SOAK_OPENAI_KEY, OPENAI_BASE_URL: process.env.SOAK_OPENAI_BASE_URL } : {};
// The rate limiter is on, with a limit no bench reaches, so its store is part of what is measured.
const config = loadServerConfig({ PORT: '0', HOST: '127.0.0.1', RUNNEL_RATE_LIMIT: String(1e9) });
const services = await connectServices({ dataDir: join(tmpdir(), `runnel-soak-${process.pid}`) });
const { chains } = createChains({ services, env: model, offlineDelayMs: Number(process.env.SOAK_OFFLINE_DELAY_MS ?? 0) });
const app = await buildApp({ chains, config, services });
await app.listen({ port: 0, host: '127.0.0.1', backlog: 4096 });

process.on('message', (message: Request) => {
  if (message.type === 'heap') {
    collect();
    collect();
    send({ type: 'heap', ...process.memoryUsage() });
  } else if (message.type === 'snapshot') {
    collect();
    send({ type: 'snapshot', path: writeHeapSnapshot(message.path) });
  } else if (message.type === 'close') {
    void app.close().then(() => process.exit(0));
  }
});
// The bench is gone (killed, crashed): do not outlive it.
process.on('disconnect', () => process.exit(0));
send({ type: 'ready', port: (app.server.address() as { port: number }).port });
