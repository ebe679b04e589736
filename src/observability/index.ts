export { loadTracingConfig, SAMPLERS, type TracingConfig } from './config.js';
export { traceHeaders } from './propagation.js';
export { redactUrlCredentials } from './redact.js';
export { parseTraceparent, Span, Tracing, type RequestSpan, type TraceContext } from './tracing.js';
