/** The serving layer: the app factory, chain registration, configuration. */
export { buildApp, packageRoot, type BuildAppOptions, type RunnelState, type OpenStream } from './app.js';
export { defineChain, createRegistry, ENDPOINTS, CLIENT_CONFIG_KEYS, type ChainDefinition, type ChainSpec, type Endpoint, type ClientConfigKey, type RequestContext, type ChatTurn, type Conversation, type MessagesAdapter } from './registry.js';
export { loadServerConfig, DEFAULT_SERVER_CONFIG, type ServerConfig, type ApiKey } from './config.js';
export { PreparedChain, componentName } from './prepared.js';
export { connectServices, type Services, type ServicesConfig } from './services.js';
export { exitOnSignals, shutdownDeadlineMs } from './signals.js';
export { serverLoggerOptions } from './log-options.js';
export { serveOnProcesses, type ProcessesOptions } from './cluster.js';
