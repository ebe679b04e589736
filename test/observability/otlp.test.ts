/**
 * Runnel's own OTLP encoding and export (`src/observability/otlp.ts`),
 * checked from the receiving side: the test receiver decodes the protobuf
 * wire format by hand (it was written against the OpenTelemetry SDK's
 * exporter), and JSON as the OTLP/JSON mapping says.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseTraceparent, Span, Tracing } from '../../src/observability/index.js';
import { BatchExporter, encodeJson, encodeProtobuf, type ExporterOptions, type SpanData } from '../../src/observability/otlp.js';
import { decodeTraces, startOtlpReceiver, type OtlpReceiver } from '../support/otlp-receiver.js';

const source = { resource: { 'service.name': 'svc', 'deployment.environment': 'test' }, scope: { name: 'runnel', version: '1.2.3' } };

function span(overrides: Partial<SpanData> = {}): SpanData {
  return {
    traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
    spanId: '00f067aa0ba902b7',
    parentSpanId: '',
    traceState: '',
    name: 'step',
    kind: 1,
    startNanos: 1_764_633_600_123_456_000,
    endNanos: 1_764_633_600_223_456_000,
    attributes: {},
    statusCode: 0,
    statusMessage: '',
    ...overrides,
  };
}

describe('OTLP encoding', () => {
  const spans = [
    span({
      name: 'chat gpt-4o-mini',
      kind: 3,
      parentSpanId: 'a1b2c3d4e5f60718',
      traceState: 'vendor=abc,other=1',
      attributes: {
        'gen_ai.request.model': 'gpt-4o-mini',
        'gen_ai.usage.input_tokens': 12,
        'runnel.negative': -5,
        'gen_ai.request.temperature': 0.25,
        'runnel.flag': true,
        'gen_ai.response.finish_reasons': ['stop', 'length'],
        'runnel.unicode': 'naïve 日本語 ✓',
        'runnel.long': 'x'.repeat(20_000),
      },
      statusCode: 2,
      statusMessage: 'RUNNEL_ERR_MODEL_TIMEOUT: the model did not answer',
    }),
    span({ spanId: '1111111111111111', name: 'é'.repeat(100) }),
    ...Array.from({ length: 300 }, (_, i) => span({ spanId: (i + 1).toString(16).padStart(16, '0'), name: `lambda ${i}`, attributes: { 'runnel.i': i } })),
  ];
  const expected = spans.map((s) => ({
    traceId: s.traceId,
    spanId: s.spanId,
    parentSpanId: s.parentSpanId,
    traceState: s.traceState,
    name: s.name,
    kind: s.kind,
    attributes: s.attributes,
    status: { code: s.statusCode, message: s.statusMessage },
    startMs: 1_764_633_600_123.456,
    endMs: 1_764_633_600_223.456,
    resource: source.resource,
  }));

  it('writes protobuf that decodes to every field, across multi-byte lengths, non-ASCII text and buffer growth', () => {
    expect(decodeTraces(encodeProtobuf(spans, source), 'application/x-protobuf')).toEqual(expected);
  });

  it('writes the same spans as OTLP/JSON', () => {
    const body = encodeJson(spans, source);
    expect(decodeTraces(body, 'application/json')).toEqual(expected);
    expect(JSON.parse(body.toString()).resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano).toBe('1764633600123456000');
  });
});

describe('BatchExporter', () => {
  let receiver: OtlpReceiver | undefined;
  afterEach(async () => {
    await receiver?.close();
    receiver = undefined;
  });
  const options = (url: string, overrides: Partial<ExporterOptions> = {}): ExporterOptions => ({
    url: `${url}/v1/traces`,
    protocol: 'http/protobuf',
    headers: { authorization: 'Bearer secret' },
    compression: 'none',
    timeoutMs: 10_000,
    maxQueueSize: 2048,
    maxExportBatchSize: 512,
    scheduleDelayMs: 60_000,
    retryBaseMs: 5,
    ...overrides,
  });
  const ids = (n: number) => Array.from({ length: n }, (_, i) => span({ spanId: (i + 1).toString(16).padStart(16, '0') }));

  it('sends full batches at once and the rest on flush, with the configured headers', async () => {
    receiver = await startOtlpReceiver();
    const exporter = new BatchExporter(options(receiver.url, { maxExportBatchSize: 3 }), source);
    for (const s of ids(7)) exporter.add(s);
    await receiver.until((spans) => spans.length === 6);
    expect(receiver.requests).toHaveLength(2);
    await exporter.shutdown();
    expect(receiver.spans.map((s) => s.spanId)).toEqual(ids(7).map((s) => s.spanId));
    expect(receiver.requests).toHaveLength(3);
    expect(receiver.requests[0]).toMatchObject({ authorization: 'Bearer secret', 'content-type': 'application/x-protobuf' });
    expect(exporter.dropped).toBe(0);
  });

  it('sends a batch when its delay is up', async () => {
    receiver = await startOtlpReceiver();
    const exporter = new BatchExporter(options(receiver.url, { scheduleDelayMs: 20 }), source);
    exporter.add(span());
    await receiver.until((spans) => spans.length === 1);
    await exporter.shutdown();
  });

  it('retries 429, 502, 503 and 504, then delivers once', async () => {
    receiver = await startOtlpReceiver({ answers: [503, 429, 502, 504] });
    const exporter = new BatchExporter(options(receiver.url), source);
    for (const s of ids(4)) exporter.add(s);
    await exporter.flush();
    expect(receiver.requests).toHaveLength(5);
    expect(receiver.spans).toHaveLength(4);
    expect(exporter.dropped).toBe(0);
    await exporter.shutdown();
  });

  it('drops a batch the collector refuses (400) or keeps failing, and goes on with the next', async () => {
    receiver = await startOtlpReceiver({ answers: [400, 503, 503, 503, 503, 503] });
    const exporter = new BatchExporter(options(receiver.url), source);
    for (const s of ids(2)) exporter.add(s);
    await exporter.flush();
    expect(exporter.dropped).toBe(2);
    for (const s of ids(2)) exporter.add(s);
    await exporter.flush();
    expect(exporter.dropped).toBe(4);
    exporter.add(span());
    await exporter.flush();
    expect(receiver.spans).toHaveLength(1);
    await exporter.shutdown();
  });

  it('drops spans over the queue size instead of growing', async () => {
    receiver = await startOtlpReceiver();
    const exporter = new BatchExporter(options(receiver.url, { maxQueueSize: 5, maxExportBatchSize: 5 }), source);
    // The first five fill a batch, which is taken for sending at once: the queue has room again for five.
    // Said, as a failed export is (a probe: these drops were counted and never told).
    const told: [string, number][] = [];
    exporter.onFailure = (reason, dropped) => void told.push([reason, dropped]);
    for (const s of ids(12)) exporter.add(s);
    expect(told).toEqual([[expect.stringContaining('queue is full'), 1]]);
    await exporter.shutdown();
    expect(exporter.dropped).toBe(2);
    expect(receiver.spans).toHaveLength(10);
    exporter.add(span());
    expect(exporter.dropped).toBe(3);
  });

  it('gives up on a collector that does not answer within the timeout, and on one that is not there', async () => {
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    try {
      const exporter = new BatchExporter(options(url, { timeoutMs: 50 }), source);
      exporter.add(span());
      await exporter.flush();
      expect(exporter.dropped).toBe(1);
      await exporter.shutdown();
    } finally {
      silent.closeAllConnections();
      silent.close();
    }
    const nowhere = new BatchExporter(options(url), source);
    nowhere.add(span());
    await nowhere.flush();
    expect(nowhere.dropped).toBe(1);
  });

  it('waits what Retry-After asks before trying again', async () => {
    receiver = await startOtlpReceiver({ answers: [{ status: 429, headers: { 'retry-after': '1' } }] });
    const exporter = new BatchExporter(options(receiver.url), source);
    exporter.add(span());
    const start = performance.now();
    await exporter.flush();
    expect(performance.now() - start).toBeGreaterThanOrEqual(900);
    expect(receiver.spans).toHaveLength(1);
    await exporter.shutdown();
  });

  it('tries each export once more at most while shutting down, whatever the backoff', async () => {
    receiver = await startOtlpReceiver({ answers: [503, 503, 503, 503, 503] });
    const exporter = new BatchExporter(options(receiver.url, { retryBaseMs: 600_000 }), source);
    exporter.add(span());
    await exporter.shutdown();
    expect(receiver.requests).toHaveLength(1);
    expect(exporter.dropped).toBe(1);
  });

  it('stops within its deadline when the collector accepts an export and never answers', async () => {
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const exporter = new BatchExporter(options(`http://127.0.0.1:${(silent.address() as AddressInfo).port}`, { timeoutMs: 600_000 }), source);
      exporter.add(span());
      await exporter.shutdown(50);
      exporter.add(span());
      // The unanswered export counts as dropped once its request has closed.
      await vi.waitFor(() => expect(exporter.dropped).toBe(2), { timeout: 10_000 });
    } finally {
      silent.closeAllConnections();
      silent.close();
    }
  });

  // A probe: a collector (or whatever the URL reached) answering 200 with a body without end kept the exporter
  // reading it — 70% of a core — until the export's timeout, which then counted as a failure: the batch was sent
  // again, five times, and dropped.
  it('takes the status of an answer whose body does not end, endless or dripping, reading a bounded part of it', async () => {
    let requests = 0;
    let written = 0;
    const endless = createServer((req, res) => {
      requests++;
      req.resume();
      res.writeHead(200, { 'content-type': 'application/x-protobuf' });
      const chunk = Buffer.alloc(64 * 1024);
      if (req.url === '/drip/v1/traces') {
        res.write('x');
        return;
      }
      const more = (): void => {
        while (!res.destroyed && res.write(chunk)) written += chunk.length;
        if (!res.destroyed) res.once('drain', more);
      };
      more();
    });
    await new Promise<void>((resolve) => endless.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(endless.address() as AddressInfo).port}`;
    try {
      const exporter = new BatchExporter(options(url, { timeoutMs: 3_000 }), source);
      exporter.add(span());
      await exporter.flush();
      expect(exporter.dropped).toBe(0);
      expect(requests).toBe(1);
      expect(written).toBeLessThan(16 * 1024 * 1024);
      // A body that drips: the export's timeout ends it, and the status it sent stands. (The timeout leaves the
      // status a second to come, on a loaded machine.)
      const dripping = new BatchExporter(options(`${url}/drip`, { timeoutMs: 1_000 }), source);
      dripping.add(span());
      await dripping.flush();
      expect(dripping.dropped).toBe(0);
      expect(requests).toBe(2);
      await Promise.all([exporter.shutdown(), dripping.shutdown()]);
    } finally {
      endless.closeAllConnections();
      endless.close();
    }
  });

  it('drops a batch whose request cannot be built (a header Node refuses), without an unhandled rejection', async () => {
    receiver = await startOtlpReceiver();
    const exporter = new BatchExporter(options(receiver.url, { headers: { authorization: 'Bearer a\nb' }, maxExportBatchSize: 1 }), source);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      exporter.add(span());
      await exporter.flush();
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
      expect(exporter.dropped).toBe(1);
      expect(receiver.requests).toHaveLength(0);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await exporter.shutdown();
    }
  });

  it('writes non-finite doubles as the JSON mapping says', () => {
    const body = JSON.parse(encodeJson([span({ attributes: { nan: Number.NaN, inf: Number.POSITIVE_INFINITY, ninf: Number.NEGATIVE_INFINITY } })], source).toString());
    expect(body.resourceSpans[0].scopeSpans[0].spans[0].attributes.map((a: { value: { doubleValue: unknown } }) => a.value.doubleValue)).toEqual(['NaN', 'Infinity', '-Infinity']);
  });

  it('compresses with gzip, and speaks OTLP/JSON', async () => {
    receiver = await startOtlpReceiver();
    const gzip = new BatchExporter(options(receiver.url, { compression: 'gzip' }), source);
    gzip.add(span({ attributes: { 'runnel.text': 'y'.repeat(5000) } }));
    await gzip.shutdown();
    const json = new BatchExporter(options(receiver.url, { protocol: 'http/json' }), source);
    json.add(span({ spanId: '2222222222222222' }));
    await json.shutdown();
    expect(receiver.requests.map((h) => [h['content-encoding'], h['content-type']])).toEqual([
      ['gzip', 'application/x-protobuf'],
      [undefined, 'application/json'],
    ]);
    expect(receiver.spans.map((s) => [s.spanId, s.attributes['runnel.text']])).toEqual([
      ['00f067aa0ba902b7', 'y'.repeat(5000)],
      ['2222222222222222', undefined],
    ]);
  });
});

describe('trace context and sampling', () => {
  const config = { url: 'http://127.0.0.1:9/v1/traces', protocol: 'http/protobuf', headers: {}, serviceName: 's', resourceAttributes: {}, ratio: 1, content: false, compression: 'none', timeoutMs: 1000, maxQueueSize: 10, maxExportBatchSize: 10, scheduleDelayMs: 60_000 } as const;

  it('reads a W3C traceparent and refuses malformed ones', () => {
    expect(parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', 'a=1')).toEqual({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
      sampled: true,
      traceState: 'a=1',
    });
    expect(parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00')?.sampled).toBe(false);
    // A tracestate past 512 characters, or with bytes a header sent onward may not carry, is left out; the trace is kept.
    for (const state of ['a=1'.padEnd(513, 'x'), 'a=caf\u00e9', 'a=1\u0000']) {
      expect(parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', state)).toMatchObject({ sampled: true, traceState: '' });
    }
    // A later version may add fields; version 00 may not.
    expect(parseTraceparent('01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra')?.traceId).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    for (const bad of [
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra',
      'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',
      '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7',
      'garbage',
      undefined,
    ]) {
      expect(parseTraceparent(bad)).toBeUndefined();
    }
  });

  it('samples by the trace id at the configured ratio, the same way each time, and follows a parent when parent-based', () => {
    const ratio = new Tracing({ ...config, sampler: 'traceidratio', ratio: 0.25 });
    const roots = Array.from({ length: 4000 }, () => ratio.startSpan('r', 1, undefined, () => ({})));
    const share = roots.filter((s) => s.sampled).length / roots.length;
    expect(share).toBeGreaterThan(0.2);
    expect(share).toBeLessThan(0.3);
    // The decision is the trace id's: a span of the same trace without a parent-based sampler decides alike.
    for (const root of roots.slice(0, 200)) {
      expect(ratio.startSpan('c', 1, { traceId: root.traceId, spanId: root.spanId, sampled: !root.sampled, traceState: '' }, () => ({})).sampled).toBe(root.sampled);
    }
    const parentBased = new Tracing({ ...config, sampler: 'parentbased_always_off' });
    expect(parentBased.startSpan('r', 1, undefined, () => ({})).sampled).toBe(false);
    const remote = parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
    const child = parentBased.startSpan('c', 1, remote, () => ({}));
    expect(child.sampled).toBe(true);
    expect(child.traceparent).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
    const grandchild = parentBased.startSpan('g', 1, child, () => ({}));
    expect([grandchild.traceId, grandchild.parentSpanId, grandchild.sampled]).toEqual([child.traceId, child.spanId, true]);
    const off = new Tracing({ ...config, sampler: 'always_off' });
    const unsampled = off.startSpan('r', 1, remote, () => ({ never: 'read' }));
    expect([unsampled.sampled, unsampled.attributes, unsampled.traceparent.endsWith('-00')]).toEqual([false, {}, true]);
    expect(unsampled).toBeInstanceOf(Span);
  });
});
