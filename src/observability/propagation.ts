/**
 * Carrying a run's trace onto the HTTP requests it makes: tracing records
 * the trace headers of each open model span here (`traceparent`, and the
 * caller's `tracestate` when it sent one), and a model provider's request
 * sends them on. Dependency-free, so the models load no tracing code; empty
 * while tracing is off.
 */

/** Run id → the trace headers of its open span. @internal */
export const openSpans = new Map<string, Readonly<Record<string, string>>>();

/**
 * The headers that continue a run's trace in an outbound request (the run's own span as parent), or
 * undefined when tracing is off or the run has no span.
 *
 * @example
 * await client.chat.completions.create(body, { headers: traceHeaders(run.id) });
 */
export function traceHeaders(runId: string): Record<string, string> | undefined {
  if (openSpans.size === 0) return undefined;
  const headers = openSpans.get(runId);
  return headers === undefined ? undefined : { ...headers };
}

/**
 * {@link traceHeaders} of a run, its id read only while some span is open: reading a run's id makes one (a
 * UUID), which a call with tracing off has no use for. @internal
 */
export function runTraceHeaders(run: { readonly id: string }): Record<string, string> | undefined {
  return openSpans.size === 0 ? undefined : traceHeaders(run.id);
}
