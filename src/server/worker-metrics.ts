/**
 * A worker process's own `/metrics` (`RUNNEL_WORKER_METRICS_PORT`): the model calls and tokens of the runs it
 * executes, and its process's series (memory, CPU, event-loop lag, GC), which a server's `/metrics` cannot
 * see. The same gate as the server's: with API keys on, only the keys `RUNNEL_METRICS_KEYS` names read it.
 * Nothing else is served there.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { RunnelError } from '../core/index.js';
import { checkKey, KeyRing, metricsRefusal } from './auth.js';
import { AuthThrottle } from './auth-throttle.js';
import { clientNetwork } from './client-network.js';
import type { ServerConfig } from './config.js';
import { toHttpError } from './http-errors.js';
import type { Metrics } from './metrics.js';

/** `error` as the server answers it; the connection closes after it, as after every answer here. */
function refuse(res: ServerResponse, error: RunnelError, headers: Record<string, string> = {}): void {
  const { status, body } = toHttpError(error);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', connection: 'close', ...headers });
  res.end(JSON.stringify(body));
}

/**
 * Serves `metrics` on `port` of `config.host` (`HOST`, where the server listens: loopback unless set, as the
 * image sets 0.0.0.0): `GET /metrics`, behind the server's key rule. Resolves once it listens, with the port
 * it took and its `close()`.
 *
 * @example
 * const served = await serveWorkerMetrics({ port: 9464, metrics, config });
 */
export async function serveWorkerMetrics(options: { port: number; metrics: Metrics; config: Pick<ServerConfig, 'host' | 'apiKeys' | 'metricsKeys' | 'authFailLimit'> }): Promise<{ port: number; close(): Promise<void> }> {
  const { metrics, config } = options;
  const keys = new KeyRing(config.apiKeys);
  // The server's RUNNEL_AUTH_FAIL_LIMIT here too: a 403 says a key is right, so an unthrottled port would let
  // anyone who reaches it guess every API key the server takes, past the server's own throttle.
  const throttle = keys.enabled && config.authFailLimit > 0 ? new AuthThrottle({ limit: config.authFailLimit }) : undefined;
  // Scrapes are short: a client that sends its request slowly, or holds its connection, is cut within a second or
  // two of the limit (Node checks every 30 s unless told), and at most 64 connections are open at once.
  const server = createServer({ headersTimeout: 10_000, requestTimeout: 10_000, connectionsCheckingInterval: 1_000 }, (req: IncomingMessage, res: ServerResponse) => {
    // A body is never read: what a client sends with a GET is left unread, and the connection closed after.
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/metrics') return refuse(res, new RunnelError('RUNNEL_ERR_NOT_FOUND', 'Not Found: a worker serves /metrics only'));
    if (req.method !== 'GET' && req.method !== 'HEAD') return refuse(res, new RunnelError('RUNNEL_ERR_METHOD_NOT_ALLOWED', 'Method Not Allowed'), { allow: 'GET, HEAD' });
    if (keys.enabled) {
      // The server's rule, and its throttle of wrong keys.
      const checked = checkKey(keys, throttle, clientNetwork(req.socket.remoteAddress ?? ''), req.headers);
      if (checked.refusal !== undefined) return refuse(res, checked.refusal, checked.headers);
      const refusal = metricsRefusal(config, checked.identity);
      if (refusal !== undefined) return refuse(res, new RunnelError('RUNNEL_ERR_FORBIDDEN', refusal));
    }
    metrics.render().then(
      (text) => {
        res.writeHead(200, { 'content-type': metrics.contentType, connection: 'close' });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      (error: unknown) => refuse(res, new RunnelError('RUNNEL_ERR_INTERNAL', 'Internal Server Error', { cause: error })),
    );
  });
  server.maxConnections = 64;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, config.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
