/**
 * Spans as OTLP/HTTP sends them: a finished span's record, the export
 * request encoded as protobuf (written field by field into one growing
 * buffer) or as OTLP/JSON, and a batching exporter that posts them to the
 * collector — at most one request in flight, a bounded queue, retries on
 * the statuses the OTLP spec calls retryable.
 *
 * Field numbers are those of opentelemetry-proto's `trace/v1/trace.proto`,
 * `common/v1/common.proto` and `resource/v1/resource.proto`.
 */
import { request as httpRequest, Agent as HttpAgent } from 'node:http';
import { request as httpsRequest, Agent as HttpsAgent } from 'node:https';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';

const gzipAsync = promisify(gzip);

/** An attribute's value, as OTLP's AnyValue can hold it. */
export type AttributeValue = string | number | boolean | readonly string[];

/** OTLP's span kinds. */
export const SpanKinds = { internal: 1, server: 2, client: 3 } as const;

/** OTLP's status codes. */
export const StatusCodes = { unset: 0, ok: 1, error: 2 } as const;

/** A span's recorded fields (ids are lower-case hex; times are nanoseconds since the epoch, as numbers). */
export interface SpanData {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly traceState: string;
  name: string;
  readonly kind: number;
  readonly startNanos: number;
  endNanos: number;
  readonly attributes: Record<string, AttributeValue>;
  statusCode: number;
  statusMessage: string;
}

/** Who sends the spans: the resource's attributes and the instrumentation scope. */
export interface ExportSource {
  resource: Record<string, AttributeValue>;
  scope: { name: string; version?: string | undefined };
}

const TWO_32 = 4_294_967_296;

/** Hex digit values by character code (0 for anything else). */
const HEX = new Uint8Array(128);
for (let i = 0; i < 10; i++) HEX[48 + i] = i;
for (let i = 0; i < 6; i++) HEX[97 + i] = HEX[65 + i] = 10 + i;

/** Bytes a varint of `n` takes. */
function varintSize(n: number): number {
  let size = 1;
  for (let rest = n; rest > 127; rest = Math.floor(rest / 128)) size++;
  return size;
}

/** A protobuf writer: one buffer, nested messages closed by moving their body when the length needs more than a byte. */
class ProtoWriter {
  private buffer = Buffer.allocUnsafe(16_384);
  private at = 0;
  private readonly open: number[] = [];

  private ensure(bytes: number): void {
    if (this.at + bytes <= this.buffer.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.at + bytes));
    this.buffer.copy(bigger, 0, 0, this.at);
    this.buffer = bigger;
  }

  varint(value: number): void {
    this.ensure(10);
    while (value > 127) {
      this.buffer[this.at++] = (value % 128) | 128;
      value = Math.floor(value / 128);
    }
    this.buffer[this.at++] = value;
  }

  private tag(field: number, wire: number): void {
    this.varint(field * 8 + wire);
  }

  uint(field: number, value: number): void {
    this.tag(field, 0);
    this.varint(value);
  }

  int64(field: number, value: number): void {
    if (value >= 0) return this.uint(field, value);
    // Negative: two's complement over 64 bits, ten bytes.
    this.tag(field, 0);
    let rest = BigInt.asUintN(64, BigInt(value));
    this.ensure(10);
    while (rest > 127n) {
      this.buffer[this.at++] = Number(rest & 127n) | 128;
      rest >>= 7n;
    }
    this.buffer[this.at++] = Number(rest);
  }

  string(field: number, value: string): void {
    this.tag(field, 2);
    const start = this.at;
    const n = value.length;
    // Most names and values are short ASCII: written a character at a time here, which costs less than a
    // call into Buffer's native writer; anything else is written again, by the native writer.
    if (n < 1024) {
      this.varint(n);
      this.ensure(n);
      const buffer = this.buffer;
      let at = this.at;
      let i = 0;
      for (; i < n; i++) {
        const code = value.charCodeAt(i);
        if (code > 0x7f) break;
        buffer[at++] = code;
      }
      if (i === n) {
        this.at = at;
        return;
      }
      this.at = start;
    }
    const length = Buffer.byteLength(value);
    this.varint(length);
    this.ensure(length);
    this.at += this.buffer.write(value, this.at, 'utf8');
  }

  /** Bytes from lower-case hex (ids, which the tracer makes). */
  hex(field: number, value: string): void {
    const length = value.length >>> 1;
    this.tag(field, 2);
    this.varint(length);
    this.ensure(length);
    const buffer = this.buffer;
    for (let i = 0; i < length; i++) buffer[this.at++] = (HEX[value.charCodeAt(2 * i)] as number) * 16 + (HEX[value.charCodeAt(2 * i + 1)] as number);
  }

  /** Raw bytes (an already encoded field). */
  bytes(value: Buffer): void {
    this.ensure(value.length);
    value.copy(this.buffer, this.at);
    this.at += value.length;
  }

  fixed64(field: number, value: number): void {
    this.tag(field, 1);
    this.ensure(8);
    const high = Math.floor(value / TWO_32);
    this.buffer.writeUInt32LE(value - high * TWO_32, this.at);
    this.buffer.writeUInt32LE(high, this.at + 4);
    this.at += 8;
  }

  double(field: number, value: number): void {
    this.tag(field, 1);
    this.ensure(8);
    this.buffer.writeDoubleLE(value, this.at);
    this.at += 8;
  }

  /** Opens a length-delimited message in `field`; `close` ends it. */
  fork(field: number): void {
    this.tag(field, 2);
    this.ensure(1);
    this.open.push(this.at);
    this.at += 1;
  }

  close(): void {
    const start = this.open.pop() as number;
    const length = this.at - start - 1;
    if (length < 128) {
      this.buffer[start] = length;
      return;
    }
    const size = varintSize(length);
    this.ensure(size - 1);
    this.buffer.copyWithin(start + size, start + 1, this.at);
    const end = this.at + size - 1;
    this.at = start;
    this.varint(length);
    this.at = end;
  }

  /** Forgets what was written after `size` bytes (an unfinished message). */
  truncate(size: number): void {
    this.at = size;
    this.open.length = 0;
  }

  /** The buffer's size. */
  get capacity(): number {
    return this.buffer.length;
  }

  /** Bytes written. */
  get size(): number {
    return this.at;
  }

  /** What was written, as a copy. */
  finish(): Buffer {
    return Buffer.from(this.buffer.subarray(0, this.at));
  }

  /** What was written, without copying: valid until the next write or `reset`. */
  view(): Buffer {
    return this.buffer.subarray(0, this.at);
  }

  /** Empties the writer, keeping its buffer. */
  reset(): void {
    this.at = 0;
    this.open.length = 0;
  }
}

function writeValue(writer: ProtoWriter, value: AttributeValue): void {
  if (typeof value === 'string') writer.string(1, value);
  else if (typeof value === 'boolean') writer.uint(2, value ? 1 : 0);
  else if (typeof value === 'number') {
    if (Number.isSafeInteger(value)) writer.int64(3, value);
    else writer.double(4, value);
  } else {
    writer.fork(5);
    for (const item of value) {
      writer.fork(1);
      writer.string(1, item);
      writer.close();
    }
    writer.close();
  }
}

function writeAttributes(writer: ProtoWriter, field: number, attributes: Record<string, AttributeValue>): void {
  for (const key in attributes) {
    writer.fork(field);
    writer.string(1, key);
    writer.fork(2);
    writeValue(writer, attributes[key] as AttributeValue);
    writer.close();
    writer.close();
  }
}

/** Appends `span` to `writer` as a ScopeSpans `spans` entry (field 2). */
function writeSpan(writer: ProtoWriter, span: SpanData): void {
  writer.fork(2);
  writer.hex(1, span.traceId);
  writer.hex(2, span.spanId);
  if (span.traceState !== '') writer.string(3, span.traceState);
  if (span.parentSpanId !== '') writer.hex(4, span.parentSpanId);
  writer.string(5, span.name);
  writer.uint(6, span.kind);
  writer.fixed64(7, span.startNanos);
  writer.fixed64(8, span.endNanos);
  writeAttributes(writer, 9, span.attributes);
  if (span.statusCode !== 0) {
    writer.fork(15);
    if (span.statusMessage !== '') writer.string(2, span.statusMessage);
    writer.uint(3, span.statusCode);
    writer.close();
  }
  writer.close();
}


/** The request's fixed parts: the Resource field of ResourceSpans and the scope field of ScopeSpans. */
function sourceFields(source: ExportSource): { resource: Buffer; scope: Buffer } {
  const resource = new ProtoWriter();
  resource.fork(1);
  writeAttributes(resource, 1, source.resource);
  resource.close();
  const scope = new ProtoWriter();
  scope.fork(1);
  scope.string(1, source.scope.name);
  if (source.scope.version !== undefined) scope.string(2, source.scope.version);
  scope.close();
  return { resource: resource.finish(), scope: scope.finish() };
}

/**
 * An `ExportTraceServiceRequest` around spans already written (`writeSpan`), as two parts: everything
 * before the spans, then the spans themselves (sent as they lie in their writer, not copied).
 */
function protobufRequest(spans: Buffer, fields: { resource: Buffer; scope: Buffer }): [Buffer, Buffer] {
  const scopeSpans = fields.scope.length + spans.length;
  const head = new ProtoWriter();
  head.varint(1 * 8 + 2); // resource_spans
  head.varint(fields.resource.length + 1 + varintSize(scopeSpans) + scopeSpans);
  head.bytes(fields.resource);
  head.varint(2 * 8 + 2); // scope_spans
  head.varint(scopeSpans);
  head.bytes(fields.scope);
  return [head.finish(), spans];
}

/** An `ExportTraceServiceRequest` of `spans`, as protobuf. */
export function encodeProtobuf(spans: readonly SpanData[], source: ExportSource): Buffer {
  const writer = new ProtoWriter();
  for (const span of spans) writeSpan(writer, span);
  return Buffer.concat(protobufRequest(writer.view(), sourceFields(source)));
}

type JsonValue = { stringValue: string } | { boolValue: boolean } | { intValue: string } | { doubleValue: number | string } | { arrayValue: { values: JsonValue[] } };

function jsonValue(value: AttributeValue): JsonValue {
  if (typeof value === 'string') return { stringValue: value };
  if (typeof value === 'boolean') return { boolValue: value };
  if (typeof value === 'number') {
    if (Number.isSafeInteger(value)) return { intValue: String(value) };
    // The proto3 JSON mapping writes the non-finite doubles as strings.
    return { doubleValue: Number.isFinite(value) ? value : Number.isNaN(value) ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity' };
  }
  return { arrayValue: { values: value.map((item) => ({ stringValue: item })) } };
}

const jsonAttributes = (attributes: Record<string, AttributeValue>): { key: string; value: JsonValue }[] =>
  Object.keys(attributes).map((key) => ({ key, value: jsonValue(attributes[key] as AttributeValue) }));

/** A span as OTLP/JSON text. */
function spanJson(span: SpanData): string {
  return JSON.stringify({
    traceId: span.traceId,
    spanId: span.spanId,
    ...(span.traceState === '' ? {} : { traceState: span.traceState }),
    ...(span.parentSpanId === '' ? {} : { parentSpanId: span.parentSpanId }),
    name: span.name,
    kind: span.kind,
    startTimeUnixNano: BigInt(span.startNanos).toString(),
    endTimeUnixNano: BigInt(span.endNanos).toString(),
    attributes: jsonAttributes(span.attributes),
    ...(span.statusCode === 0 ? {} : { status: { code: span.statusCode, ...(span.statusMessage === '' ? {} : { message: span.statusMessage }) } }),
  });
}

/** An `ExportTraceServiceRequest` around spans already written as JSON text. */
function jsonRequest(spans: readonly string[], source: ExportSource): Buffer {
  const scope = JSON.stringify(source.scope.version === undefined ? { name: source.scope.name } : { name: source.scope.name, version: source.scope.version });
  const resource = JSON.stringify({ attributes: jsonAttributes(source.resource) });
  return Buffer.from(`{"resourceSpans":[{"resource":${resource},"scopeSpans":[{"scope":${scope},"spans":[${spans.join(',')}]}]}]}`);
}

/** An `ExportTraceServiceRequest` of `spans`, as OTLP/JSON (ids in hex, 64-bit integers as strings). */
export function encodeJson(spans: readonly SpanData[], source: ExportSource): Buffer {
  return jsonRequest(spans.map(spanJson), source);
}

/** How spans are batched and sent (the defaults are the OpenTelemetry SDKs'). */
export interface ExporterOptions {
  url: string;
  protocol: 'http/protobuf' | 'http/json';
  headers: Record<string, string>;
  /** `gzip` compresses each request body. */
  compression: 'gzip' | 'none';
  /** A request's timeout, ms (`OTEL_EXPORTER_OTLP_TIMEOUT`, default 10,000). */
  timeoutMs: number;
  /** Spans waiting at most; more are dropped (`OTEL_BSP_MAX_QUEUE_SIZE`, default 2,048). */
  maxQueueSize: number;
  /** Spans per request (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, default 512). */
  maxExportBatchSize: number;
  /** How long a span waits for its batch, ms (`OTEL_BSP_SCHEDULE_DELAY`, default 5,000). */
  scheduleDelayMs: number;
  /** The first retry's delay, ms (default 1,000; each next one doubles). */
  retryBaseMs?: number;
}

/** Statuses worth a retry (OTLP/HTTP spec); anything else drops the batch. */
const RETRYABLE = new Set([429, 502, 503, 504]);
const ATTEMPTS = 5;
/** Encoded spans waiting at most, whatever their count (spans with content recorded can be large). */
const MAX_QUEUED_BYTES = 32 * 1024 * 1024;
/** A batch this large is sent without waiting for its count. */
const MAX_BATCH_BYTES = 4 * 1024 * 1024;
/** A sent batch's buffer is kept for the next one up to this size. */
const SPARE_BYTES = 8 * 1024 * 1024;
/**
 * An export's answer is read this far at most: an `ExportTraceServiceResponse` is a few bytes, and what answers
 * with more (a wrong URL's page, an endless body) has said its status already.
 */
const MAX_RESPONSE_BYTES = 64 * 1024;

/** A batch being filled: its spans, already encoded (a span object then lives no longer than its run). */
interface Batch {
  count: number;
  bytes: number;
  proto: ProtoWriter | undefined;
  json: string[] | undefined;
}

/**
 * Batches finished spans and posts them to an OTLP/HTTP collector. A span
 * is encoded as it ends, so a batch waiting for its export is bytes, not
 * objects the garbage collector has to trace. A full queue drops new spans
 * (counted in `dropped`) instead of growing; a failed export is retried
 * with backoff, then dropped: tracing never holds up or breaks serving.
 */
export class BatchExporter {
  /** Spans dropped: queue full, or their export failed. */
  dropped = 0;
  /**
   * Hears a failed export (its spans dropped) with why — the status, or that the collector could not be
   * reached — at most once a minute, with the spans dropped since the last time it was told.
   */
  onFailure: ((reason: string, dropped: number) => void) | undefined;
  private lastFailureReport = -Infinity;
  private droppedReported = 0;
  private current: Batch | undefined;
  private readonly full: Batch[] = [];
  /** Spans encoded and not yet taken for sending, and their bytes. */
  private queued = 0;
  private queuedBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> | undefined;
  /** The batch being filled goes with the next send (its delay is up, or a flush asked). */
  private partialDue = false;
  /** Shutting down: no more retries. */
  private stopping = false;
  private stopped = false;
  private readonly agent: HttpAgent;
  private readonly send: typeof httpRequest;
  private readonly json: boolean;
  private readonly fields: { resource: Buffer; scope: Buffer };
  /** A sent batch's writer, for the next batch. */
  private spare: ProtoWriter | undefined;

  constructor(
    private readonly options: ExporterOptions,
    private readonly source: ExportSource,
  ) {
    const secure = options.url.startsWith('https:');
    this.agent = secure ? new HttpsAgent({ keepAlive: true, maxSockets: 2 }) : new HttpAgent({ keepAlive: true, maxSockets: 2 });
    this.send = secure ? (httpsRequest as unknown as typeof httpRequest) : httpRequest;
    this.json = options.protocol === 'http/json';
    this.fields = sourceFields(source);
  }

  /** Queues a finished span. */
  add(span: SpanData): void {
    if (this.stopped) {
      this.dropped++;
      return;
    }
    if (this.queued >= this.options.maxQueueSize || this.queuedBytes >= MAX_QUEUED_BYTES) {
      // Warned as a failed export is, at most once a minute (a probe: these drops were counted, never said).
      this.failed(1, 'the export queue is full, the collector slower than the spans come');
      return;
    }
    const batch = (this.current ??= { count: 0, bytes: 0, proto: this.json ? undefined : this.takeWriter(), json: this.json ? [] : undefined });
    let bytes: number;
    try {
      if (batch.json !== undefined) {
        const text = spanJson(span);
        batch.json.push(text);
        bytes = text.length;
      } else {
        const writer = batch.proto as ProtoWriter;
        const size = writer.size;
        try {
          writeSpan(writer, span);
        } catch (error) {
          writer.truncate(size);
          throw error;
        }
        bytes = writer.size - size;
      }
    } catch {
      // A value the encoder cannot write loses its span, not the batch.
      this.dropped++;
      return;
    }
    batch.count++;
    batch.bytes += bytes;
    this.queued++;
    this.queuedBytes += bytes;
    if (batch.count >= this.options.maxExportBatchSize || batch.bytes >= MAX_BATCH_BYTES) {
      this.full.push(batch);
      this.current = undefined;
      this.drain(false);
    } else if (this.timer === undefined) {
      this.timer = setTimeout(() => this.drain(), this.options.scheduleDelayMs).unref();
    }
  }

  /**
   * Starts sending the full batches — and the one being filled too when its delay is up (`partial`) —
   * unless a send is under way: it takes what comes meanwhile before it ends.
   */
  private drain(partial = true): void {
    if (partial) {
      this.partialDue = true;
      if (this.timer !== undefined) {
        clearTimeout(this.timer);
        this.timer = undefined;
      }
    }
    if (this.sending !== undefined) return;
    this.sending = this.sendAll()
      .catch(() => undefined)
      .finally(() => {
        this.sending = undefined;
        // What came after the last look (a batch filled while the send was ending) goes now or on its delay.
        if (this.full.length > 0 || (this.partialDue && this.current !== undefined)) this.drain(false);
        else if (this.queued > 0 && this.timer === undefined) this.timer = setTimeout(() => this.drain(), this.options.scheduleDelayMs).unref();
      });
  }

  private async sendAll(): Promise<void> {
    for (;;) {
      let batch = this.full.shift();
      if (batch === undefined && this.partialDue) {
        batch = this.current;
        this.current = undefined;
        this.partialDue = false;
      }
      if (batch === undefined) {
        this.partialDue = false;
        return;
      }
      this.queued -= batch.count;
      this.queuedBytes -= batch.bytes;
      try {
        const parts = batch.json !== undefined ? [jsonRequest(batch.json, this.source)] : protobufRequest((batch.proto as ProtoWriter).view(), this.fields);
        const failure = await this.exportBatch(parts);
        if (failure !== undefined) this.failed(batch.count, failure);
      } catch (error) {
        this.failed(batch.count, error instanceof Error ? error.message : String(error));
      }
      // The batch's bytes are written (or given up): the next batch writes into its buffer, unless a large
      // batch grew it past what a usual one needs.
      if (batch.proto !== undefined && batch.proto.capacity <= SPARE_BYTES) {
        batch.proto.reset();
        this.spare = batch.proto;
      }
    }
  }

  private takeWriter(): ProtoWriter {
    const writer = this.spare ?? new ProtoWriter();
    this.spare = undefined;
    return writer;
  }

  /** A batch dropped: counted, and told to `onFailure` when a minute has passed since it last was. */
  private failed(count: number, reason: string): void {
    this.dropped += count;
    const now = performance.now();
    if (this.onFailure === undefined || now - this.lastFailureReport < 60_000) return;
    this.lastFailureReport = now;
    const dropped = this.dropped - this.droppedReported;
    this.droppedReported = this.dropped;
    this.onFailure(reason, dropped);
  }

  /** Exports one batch, with retries: undefined once it is delivered, else why it was not. */
  private async exportBatch(parts: Buffer[]): Promise<string | undefined> {
    let body = parts;
    const headers: Record<string, string | number> = {
      ...this.options.headers,
      'content-type': this.options.protocol === 'http/json' ? 'application/json' : 'application/x-protobuf',
    };
    if (this.options.compression === 'gzip') {
      body = [await gzipAsync(Buffer.concat(body))];
      headers['content-encoding'] = 'gzip';
    }
    headers['content-length'] = body.reduce((sum, part) => sum + part.length, 0);
    for (let attempt = 1; ; attempt++) {
      const { status, retryAfterMs } = await this.post(body, headers);
      if (status >= 200 && status < 300) return undefined;
      if ((status !== 0 && !RETRYABLE.has(status)) || attempt === ATTEMPTS || this.stopping) {
        return status > 0 ? `the collector answered ${status}` : status === 0 ? 'the collector could not be reached or did not answer in time' : 'the export request could not be made';
      }
      // 1, 2, 4, 8 s with jitter, as the OTLP exporters back off, or what the collector's Retry-After asks (up to 30 s).
      const delay = retryAfterMs ?? (this.options.retryBaseMs ?? 1000) * 2 ** (attempt - 1) * (0.8 + Math.random() * 0.4);
      await new Promise((resolve) => setTimeout(resolve, delay).unref());
    }
  }

  /**
   * Posts one export. The status is the response's, 0 when the request failed or timed out, and -1 when
   * it could not be made at all (a header Node refuses): not worth a retry. It resolves once the request is
   * done with the body's buffers, so a batch's buffer is never written into while it is being sent.
   */
  private post(body: readonly Buffer[], headers: Record<string, string | number>): Promise<{ status: number; retryAfterMs?: number | undefined }> {
    return new Promise((resolve) => {
      let status = 0;
      let answered = false;
      let retryAfterMs: number | undefined;
      let req: ReturnType<typeof httpRequest>;
      try {
        req = this.send(this.options.url, { method: 'POST', headers, agent: this.agent }, (res) => {
          answered = true;
          status = res.statusCode ?? 0;
          const after = Number(res.headers['retry-after']);
          if (Number.isInteger(after) && after >= 0) retryAfterMs = Math.min(after, 30) * 1000;
          // The status is the answer; a body past its bound is not read on (a probe: a collector answering 200
          // with an endless body kept this process reading at 70% of a core, and each export then timed out
          // and was sent again, five times, its spans dropped at last).
          let read = 0;
          res.on('data', (chunk: Buffer) => {
            read += chunk.length;
            if (read > MAX_RESPONSE_BYTES) req.destroy();
          });
          res.once('error', () => undefined);
        });
      } catch {
        resolve({ status: -1 });
        return;
      }
      // The whole export, not each silence: a collector that drips bytes times out too (its status, when it sent
      // one, stands).
      const timer = setTimeout(() => req.destroy(new Error('OTLP export timed out')), this.options.timeoutMs).unref();
      req.once('error', () => {
        if (!answered) status = 0;
      });
      req.once('close', () => {
        clearTimeout(timer);
        resolve({ status, retryAfterMs });
      });
      try {
        for (let i = 0; i < body.length - 1; i++) req.write(body[i]);
        req.end(body[body.length - 1]);
      } catch {
        req.destroy();
      }
    });
  }

  /** Sends what is queued now (not what comes while it sends). */
  async flush(): Promise<void> {
    let rounds = this.full.length + 2;
    while ((this.sending !== undefined || this.queued > 0) && rounds-- > 0) {
      this.drain();
      await this.sending;
    }
  }

  /**
   * Sends what is queued, each export tried once more at most, then takes no more. A collector that does
   * not answer within `deadlineMs` (default 2 s) loses what is unsent: stopping a server does not wait out
   * the export timeout, which would overrun its shutdown deadline.
   */
  async shutdown(deadlineMs = 2_000): Promise<void> {
    this.stopping = true;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, deadlineMs);
    });
    await Promise.race([this.flush(), deadline]);
    clearTimeout(timer);
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    // Ends an export still waiting for its answer; its spans count as dropped when it closes.
    this.agent.destroy();
  }
}
