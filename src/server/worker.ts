/**
 * `npm run worker`: executes the shipped chains' background runs from the
 * queue in Redis (`REDIS_URL`), with no HTTP server — run as many as the
 * load needs, apart from the HTTP replicas (docker compose's `worker`).
 */
import { createChains } from '../../chains/index.js';
import { isRunnelError } from '../core/index.js';
import { loadServerConfig } from './config.js';
import { connectServices } from './services.js';
import { shutdownDeadlineMs } from './signals.js';
import { startRunWorkers, stopWorkersOnSignals } from './worker-process.js';

const log = {
  info: (message: string) => console.log(JSON.stringify({ level: 30, time: Date.now(), msg: message })),
  error: (message: string, error?: unknown) => console.error(JSON.stringify({ level: 50, time: Date.now(), msg: message, err: error instanceof Error ? error.message : undefined })),
};

try {
  const config = loadServerConfig(process.env);
  if (config.redisUrl === undefined) throw new Error('runnel worker: REDIS_URL is required (the run queue lives in Redis)');
  const services = await connectServices({ redisUrl: config.redisUrl, databaseUrl: config.databaseUrl, dataDir: config.dataDir, role: 'worker' });
  const { chains } = createChains({ services });
  const worker = startRunWorkers({ config, chains, services, log });
  stopWorkersOnSignals(worker, shutdownDeadlineMs(config.shutdownGraceMs), log);
} catch (error) {
  console.error(isRunnelError(error) || error instanceof Error ? error.message : error);
  process.exit(1);
}
