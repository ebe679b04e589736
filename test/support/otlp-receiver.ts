/**
 * A small OTLP/HTTP traces receiver for the tests: it takes what the real
 * exporters send to `/v1/traces` — protobuf (`application/x-protobuf`,
 * decoded here by hand from the wire format, so the test does not trust the
 * exporter's own encoder) or JSON, gzipped or not — and keeps the spans,
 * flattened. It can answer the first exports with other statuses, to test
 * an exporter's retries.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

/** One received span. Ids are lower-case hex; attribute values are strings, numbers, booleans or lists. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  /** The W3C tracestate the span carries ('' for none). */
  traceState: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  status: { code: number; message: string };
  /** Start and end, in milliseconds since the epoch (fractional). */
  startMs: number;
  endMs: number;
  /** The resource's attributes (`service.name`, …). */
  resource: Record<string, unknown>;
}

export interface OtlpReceiver {
  /** The base URL (what `OTEL_EXPORTER_OTLP_ENDPOINT` takes). */
  url: string;
  spans: ReceivedSpan[];
  /** Content types of the export requests, in order. */
  contentTypes: string[];
  /** Every export request's headers, answered or not, in order. */
  requests: IncomingHttpHeaders[];
  /** Resolves once `predicate` holds for the spans received (checked on every export). */
  until(predicate: (spans: ReceivedSpan[]) => boolean): Promise<void>;
  close(): Promise<void>;
}

/** A protobuf message as its fields: number → values (varints as bigint, length-delimited as bytes, fixed as bytes). */
type Fields = Map<number, (bigint | Buffer)[]>;

function decodeMessage(buffer: Buffer): Fields {
  const fields: Fields = new Map();
  let at = 0;
  const varint = (): bigint => {
    let result = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const byte = buffer[at++] as number;
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
    }
  };
  while (at < buffer.length) {
    const key = Number(varint());
    const field = key >>> 3;
    let value: bigint | Buffer;
    switch (key & 7) {
      case 0:
        value = varint();
        break;
      case 1:
        value = buffer.subarray(at, at + 8);
        at += 8;
        break;
      case 2: {
        const length = Number(varint());
        value = buffer.subarray(at, at + length);
        at += length;
        break;
      }
      case 5:
        value = buffer.subarray(at, at + 4);
        at += 4;
        break;
      default:
        throw new Error(`unsupported wire type ${key & 7}`);
    }
    fields.set(field, [...(fields.get(field) ?? []), value]);
  }
  return fields;
}

const bytes = (fields: Fields, n: number): Buffer => (fields.get(n)?.[0] as Buffer | undefined) ?? Buffer.alloc(0);
const text = (fields: Fields, n: number): string => bytes(fields, n).toString('utf8');
const all = (fields: Fields, n: number): Buffer[] => (fields.get(n) ?? []) as Buffer[];
const number = (fields: Fields, n: number): number => Number((fields.get(n)?.[0] as bigint | undefined) ?? 0n);
/** A fixed64 nanosecond time, in milliseconds. */
const nanosToMs = (fields: Fields, n: number): number => Number(bytes(fields, n).readBigUInt64LE(0) / 1000n) / 1000;

/** An AnyValue: string 1, bool 2, int 3, double 4, array 5. */
function anyValue(buffer: Buffer): unknown {
  const fields = decodeMessage(buffer);
  if (fields.has(1)) return text(fields, 1);
  if (fields.has(2)) return number(fields, 2) !== 0;
  if (fields.has(3)) return Number(BigInt.asIntN(64, fields.get(3)?.[0] as bigint));
  if (fields.has(4)) return bytes(fields, 4).readDoubleLE(0);
  if (fields.has(5)) return all(decodeMessage(bytes(fields, 5)), 1).map(anyValue);
  return undefined;
}

function keyValues(buffers: Buffer[]): Record<string, unknown> {
  return Object.fromEntries(buffers.map((buffer) => decodeMessage(buffer)).map((kv) => [text(kv, 1), anyValue(bytes(kv, 2))]));
}

/** ExportTraceServiceRequest → resource_spans (1) → resource (1), scope_spans (2) → spans (2). */
function fromProtobuf(body: Buffer): ReceivedSpan[] {
  return all(decodeMessage(body), 1).flatMap((resourceSpans) => {
    const rs = decodeMessage(resourceSpans);
    const resource = keyValues(all(decodeMessage(bytes(rs, 1)), 1));
    return all(rs, 2).flatMap((scopeSpans) =>
      all(decodeMessage(scopeSpans), 2).map((raw) => {
        const span = decodeMessage(raw);
        const status = decodeMessage(bytes(span, 15));
        return {
          traceId: bytes(span, 1).toString('hex'),
          spanId: bytes(span, 2).toString('hex'),
          parentSpanId: bytes(span, 4).toString('hex'),
          traceState: text(span, 3),
          name: text(span, 5),
          kind: number(span, 6),
          attributes: keyValues(all(span, 9)),
          status: { code: number(status, 3), message: text(status, 2) },
          startMs: nanosToMs(span, 7),
          endMs: nanosToMs(span, 8),
          resource,
        };
      }),
    );
  });
}

interface JsonValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
  arrayValue?: { values?: JsonValue[] };
}
const jsonValue = (value: JsonValue): unknown =>
  value.stringValue ?? value.boolValue ?? (value.intValue !== undefined ? Number(value.intValue) : (value.doubleValue ?? value.arrayValue?.values?.map(jsonValue)));
const jsonAttributes = (list: { key: string; value: JsonValue }[] | undefined): Record<string, unknown> => Object.fromEntries((list ?? []).map(({ key, value }) => [key, jsonValue(value)]));

interface JsonRequest {
  resourceSpans?: {
    resource?: { attributes?: { key: string; value: JsonValue }[] };
    scopeSpans?: {
      spans?: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        traceState?: string;
        name: string;
        kind?: number;
        startTimeUnixNano?: string | number;
        endTimeUnixNano?: string | number;
        attributes?: { key: string; value: JsonValue }[];
        status?: { code?: number; message?: string };
      }[];
    }[];
  }[];
}

function fromJson(body: Buffer): ReceivedSpan[] {
  const request = JSON.parse(body.toString('utf8')) as JsonRequest;
  return (request.resourceSpans ?? []).flatMap((rs) =>
    (rs.scopeSpans ?? []).flatMap((ss) =>
      (ss.spans ?? []).map((span) => ({
        traceId: span.traceId.toLowerCase(),
        spanId: span.spanId.toLowerCase(),
        parentSpanId: (span.parentSpanId ?? '').toLowerCase(),
        traceState: span.traceState ?? '',
        name: span.name,
        kind: span.kind ?? 0,
        attributes: jsonAttributes(span.attributes),
        status: { code: span.status?.code ?? 0, message: span.status?.message ?? '' },
        startMs: Number(BigInt(span.startTimeUnixNano ?? 0) / 1000n) / 1000,
        endMs: Number(BigInt(span.endTimeUnixNano ?? 0) / 1000n) / 1000,
        resource: jsonAttributes(rs.resource?.attributes),
      })),
    ),
  );
}

/** The spans of one export request's body, by its content type (protobuf unless JSON). */
export function decodeTraces(body: Buffer, contentType: string): ReceivedSpan[] {
  return contentType.startsWith('application/json') ? fromJson(body) : fromProtobuf(body);
}

/** `answers`: statuses (and headers) for the first exports, in order (their spans are not kept); 200 after them. */
export async function startOtlpReceiver(options: { answers?: (number | { status: number; headers: Record<string, string> })[] } = {}): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const contentTypes: string[] = [];
  const requests: IncomingHttpHeaders[] = [];
  const answers = [...(options.answers ?? [])];
  let waiters: { predicate: (spans: ReceivedSpan[]) => boolean; resolve: () => void }[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      requests.push(req.headers);
      const answer = answers.shift();
      if (answer !== undefined) {
        if (typeof answer === 'number') res.writeHead(answer).end();
        else res.writeHead(answer.status, answer.headers).end();
        return;
      }
      const type = req.headers['content-type'] ?? '';
      contentTypes.push(type);
      const raw = Buffer.concat(chunks);
      const body = req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw;
      spans.push(...decodeTraces(body, type));
      waiters = waiters.filter((waiter) => {
        if (!waiter.predicate(spans)) return true;
        waiter.resolve();
        return false;
      });
      if (type.startsWith('application/json')) res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    contentTypes,
    requests,
    until: (predicate) =>
      predicate(spans)
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            waiters.push({ predicate, resolve });
          }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
