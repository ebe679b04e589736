export { loadTracingConfig, SAMPLERS, type TracingConfig } from './config.js';
export { traceHeaders } from './propagation.js';
export { contextFromTraceparent, Tracing, type RequestSpan } from './tracing.js';
