/**
 * `npm run trace:picture`: draws docs/images/rag-trace.svg, the trace of one
 * `/rag` request as a trace viewer shows it — each span a bar on the time
 * axis, indented under its parent, with its main attributes. The spans are
 * real: the shipped chains on the embedded defaults (PGlite, the offline
 * model) with tracing on, exported over OTLP/protobuf to the test receiver.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createChains } from '../chains/index.js';
import { buildApp, connectServices, loadTracingConfig, type ChainSpec } from '../src/index.js';
import { startOtlpReceiver, type ReceivedSpan } from '../test/support/otlp-receiver.js';

const out = new URL('../docs/images/rag-trace.svg', import.meta.url);
const dataDir = mkdtempSync(join(tmpdir(), 'runnel-trace-'));
const receiver = await startOtlpReceiver();
const services = await connectServices({ dataDir });
const { chains, docs } = createChains({ services, env: {} });
await docs.seed();
const app = await buildApp({ chains: chains as ChainSpec<never, unknown>[], services, config: { tracing: loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: 'runnel' }) } });
const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
try {
  await app.inject({ method: 'POST', url: '/rag/invoke', headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-00f067aa0ba902b7-01` }, payload: { input: { question: 'How is chat history stored?' } } });
  while (!receiver.spans.some((span) => span.traceId === traceId && span.name.startsWith('POST '))) await app.runnel.tracing?.flush();
} finally {
  await app.close();
  await receiver.close();
  rmSync(dataDir, { recursive: true, force: true });
}

const spans = receiver.spans.filter((span) => span.traceId === traceId);
// Depth-first, children in start order, as a trace viewer lists them.
const children = (id: string): ReceivedSpan[] => spans.filter((span) => span.parentSpanId === id).sort((a, b) => a.startMs - b.startMs);
const root = spans.find((span) => !spans.some((other) => other.spanId === span.parentSpanId)) as ReceivedSpan;
const rows: { span: ReceivedSpan; depth: number }[] = [];
const walk = (span: ReceivedSpan, depth: number): void => {
  rows.push({ span, depth });
  for (const child of children(span.spanId)) walk(child, depth + 1);
};
walk(root, 0);

const t0 = root.startMs;
const total = Math.max(root.endMs - t0, 0.001);
const width = 960;
const label = 330;
const bar = width - label - 20;
const rowHeight = 34;
const escape = (text: string): string => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const detail = (span: ReceivedSpan): string => {
  const a = span.attributes;
  if (a['gen_ai.operation.name'] === 'chat') return `${String(a['gen_ai.provider.name'] ?? '')} · ${String(a['gen_ai.request.model'] ?? '')}`;
  if (a['runnel.retriever.documents'] !== undefined) return `${String(a['runnel.retriever.documents'])} documents`;
  if (a['http.response.status_code'] !== undefined) return `status ${String(a['http.response.status_code'])}`;
  return String(a['runnel.run_type'] ?? '');
};
const colour = (span: ReceivedSpan): string =>
  span.attributes['http.request.method'] !== undefined ? '#6b7cff' : span.attributes['gen_ai.operation.name'] === 'chat' ? '#e0752d' : span.attributes['runnel.run_type'] === 'retriever' ? '#2e9e6a' : '#8a94a6';
const body = rows
  .map(({ span, depth }, i) => {
    const y = 56 + i * rowHeight;
    const x = label + ((span.startMs - t0) / total) * bar;
    const w = Math.max(2, ((span.endMs - span.startMs) / total) * bar);
    return [
      `<text x="${12 + depth * 16}" y="${y + 14}" class="name">${escape(span.name)}</text>`,
      `<text x="${12 + depth * 16}" y="${y + 27}" class="detail">${escape(detail(span))}</text>`,
      `<rect x="${x.toFixed(1)}" y="${y + 4}" width="${w.toFixed(1)}" height="18" rx="3" fill="${colour(span)}"/>`,
      // The duration after the bar, or inside its end when the bar reaches the right edge.
      x + w + 70 < width
        ? `<text x="${(x + w + 6).toFixed(1)}" y="${y + 17}" class="detail">${(span.endMs - span.startMs).toFixed(2)} ms</text>`
        : `<text x="${(x + w - 6).toFixed(1)}" y="${y + 17}" class="detail" text-anchor="end" fill="#ffffff" style="fill:#ffffff">${(span.endMs - span.startMs).toFixed(2)} ms</text>`,
    ].join('');
  })
  .join('\n');
const height = 70 + rows.length * rowHeight;
const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, sans-serif">
<style>.name{font-size:13px;fill:#1f2430}.detail{font-size:11px;fill:#5b6272}.title{font-size:15px;font-weight:600;fill:#1f2430}</style>
<rect width="100%" height="100%" fill="#ffffff"/>
<text x="12" y="26" class="title">Trace ${traceId} · POST /rag/invoke · ${rows.length} spans · ${total.toFixed(1)} ms</text>
<line x1="${label}" y1="40" x2="${label}" y2="${height - 10}" stroke="#d8dce4"/>
${body}
</svg>
`;
writeFileSync(out, svg);
console.log(`wrote ${out.pathname}: ${rows.length} spans`);
