/**
 * A local HTTP server that speaks OpenAI's and Anthropic's streaming wire
 * formats from recorded fixtures (test/fixtures/providers), so the adapters
 * are tested through the real SDKs. The request's `model` picks the scenario:
 *
 * - `text`, `tools`: the recorded stream;
 * - `stall`: two chunks, then silence with the socket open;
 * - `rate-limited`: 429 with `retry-after` every time; `rate-limited-once`: 429, then `text`;
 * - `unauthorized`: 401 whose message quotes the request's key, as OpenAI's does;
 *   `rate-limited-long`: 429 asking for 7 s (`retry-after` alone); `rate-limited-until`: 429 with an HTTP date 2 min ahead;
 * - `error`: 500 every time; `error-once`: 500, then `text`;
 * - `slow`: the text stream, one frame every 50 ms;
 * - `endless`: the text stream's start, then its second word again and again until the client goes (a million at most);
 *   `wide`: the same with that word 64 KiB long;
 * - `midstream-rate-limited`, `midstream-rejected`, `midstream-overloaded`: four frames of the text stream (a word), then
 *   an error of that kind in the provider's streaming format;
 * - `unavailable-long`: 503 asking for 120 s (`retry-after`);
 * - `malformed`: three frames of the text stream, then one whose JSON breaks off after the text
 *   `MALFORMED-XYZZY` (the SDK cannot parse it), then the end.
 *
 * `/embeddings` answers with deterministic vectors `[text length, index, 1]`.
 *
 * It records every request and counts requests whose client went away
 * before the response ended. `holdNext` and `cutNext` shape the next chat
 * reply, whatever its scenario: stop after some frames and keep the
 * connection open until the client closes it, or end the response there.
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

type Provider = 'openai' | 'anthropic';

export interface RecordedRequest {
  path: string;
  headers: IncomingMessage['headers'];
  body: Record<string, unknown>;
}

const fixture = (name: string): string => readFileSync(new URL(`../fixtures/providers/${name}`, import.meta.url), 'utf8');

/** A frame whose JSON breaks off: the output it carries must reach no log. */
const MALFORMED: Record<Provider, string> = {
  openai: 'data: {"id":"chatcmpl-fx","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"MALFORMED-XYZZY"\n\n',
  anthropic: 'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"MALFORMED-XYZZY"\n\n',
};

/** An error the provider sends after its answer began (`rate-limited`, `rejected` or `overloaded`), in its own format. */
function midstreamError(provider: Provider, kind: string): string {
  if (provider === 'anthropic') {
    const type = { 'rate-limited': 'rate_limit_error', rejected: 'invalid_request_error', overloaded: 'overloaded_error' }[kind];
    return `event: error\ndata: ${JSON.stringify({ type: 'error', error: { type, message: `${kind} mid-answer` } })}\n\n`;
  }
  const error = { 'rate-limited': { type: 'requests', code: 'rate_limit_exceeded' }, rejected: { type: 'invalid_request_error', code: null }, overloaded: { type: 'server_error', code: null } }[kind];
  return `data: ${JSON.stringify({ error: { message: `${kind} mid-answer`, param: null, ...error } })}\n\n`;
}

/** Resolves when `res` may be written again, or has closed; leaves no listener behind. */
function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

/** Splits an SSE body into frames (each ending with a blank line). */
function frames(body: string): string[] {
  return body.split(/(?<=\n\n)/).filter((frame) => frame.length > 0);
}

/** A reply a test computes from the request body: text, tool calls, or both. */
export interface ScriptedReply {
  text?: string;
  /** `args` as a string is sent as it is: arguments cut short, say. */
  toolCalls?: { name: string; args: Record<string, unknown> | string }[];
  /** The finish (stop) reason, in place of the usual one. */
  finish?: string;
  /** OpenAI: every chunk carries the answer's running usage (vLLM's continuous usage stats), not only the last. */
  usageEveryChunk?: boolean;
  /** OpenAI: fields added to the last chunk's usage (`prompt_tokens_details`, `completion_tokens_details`). */
  openAIUsage?: Record<string, unknown>;
  /** OpenAI: the answer streamed as a refusal (`delta.refusal`), ending in `stop`. */
  refusal?: string;
  /** Anthropic: `message_start`'s usage (null: none), and one `message_delta` per entry with that usage (null: none; an empty list: no `message_delta` at all, so no stop reason). */
  anthropicUsage?: { start?: Record<string, unknown> | null; deltas?: (Record<string, unknown> | null)[] };
  /** The stream's frames as they are, in place of all the above: data a compatible server sends that the provider's own never does. */
  frames?: string[];
}

const argsText = (args: Record<string, unknown> | string): string => (typeof args === 'string' ? args : JSON.stringify(args));

/** A scripted reply in OpenAI's chat-completions streaming format. */
function openAIFrames(reply: ScriptedReply, model: string): string[] {
  let sent = 0;
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => {
    if (delta.content !== undefined && delta.content !== '') sent += 1;
    const usage = reply.usageEveryChunk === true ? { usage: { prompt_tokens: 10, completion_tokens: sent, total_tokens: 10 + sent } } : {};
    return `data: ${JSON.stringify({ id: 'chatcmpl-sc', object: 'chat.completion.chunk', created: 1764500000, model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...usage })}\n\n`;
  };
  const out = [chunk({ role: 'assistant', content: '' })];
  for (const word of reply.text?.match(/\s*\S+/g) ?? []) out.push(chunk({ content: word }));
  for (const word of reply.refusal?.match(/\s*\S+/g) ?? []) out.push(chunk({ refusal: word }));
  for (const [index, call] of (reply.toolCalls ?? []).entries()) {
    const args = argsText(call.args);
    out.push(chunk({ tool_calls: [{ index, id: `call_sc${index}`, type: 'function', function: { name: call.name, arguments: '' } }] }));
    out.push(chunk({ tool_calls: [{ index, function: { arguments: args.slice(0, 5) } }] }), chunk({ tool_calls: [{ index, function: { arguments: args.slice(5) } }] }));
  }
  out.push(chunk({}, reply.finish ?? (reply.toolCalls?.length ? 'tool_calls' : 'stop')));
  const total = reply.usageEveryChunk === true ? sent : 5;
  out.push(`data: ${JSON.stringify({ id: 'chatcmpl-sc', object: 'chat.completion.chunk', created: 1764500000, model, choices: [], usage: { prompt_tokens: 10, completion_tokens: total, total_tokens: 10 + total, ...reply.openAIUsage } })}\n\n`);
  out.push('data: [DONE]\n\n');
  return out;
}

/** A scripted reply in Anthropic's Messages streaming format. */
function anthropicFrames(reply: ScriptedReply, model: string): string[] {
  const event = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
  const out = [
    event('message_start', {
      message: {
        id: 'msg_sc',
        type: 'message',
        role: 'assistant',
        content: [],
        model,
        stop_reason: null,
        stop_sequence: null,
        ...(reply.anthropicUsage?.start === null ? {} : { usage: reply.anthropicUsage?.start ?? { input_tokens: 10, output_tokens: 1 } }),
      },
    }),
  ];
  let index = 0;
  if (reply.text !== undefined) {
    out.push(event('content_block_start', { index, content_block: { type: 'text', text: '' } }));
    for (const word of reply.text.match(/\s*\S+/g) ?? []) out.push(event('content_block_delta', { index, delta: { type: 'text_delta', text: word } }));
    out.push(event('content_block_stop', { index }));
    index++;
  }
  for (const [n, call] of (reply.toolCalls ?? []).entries()) {
    const args = argsText(call.args);
    out.push(event('content_block_start', { index, content_block: { type: 'tool_use', id: `toolu_sc${n}`, name: call.name, input: {} } }));
    out.push(event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: args.slice(0, 5) } }));
    out.push(event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: args.slice(5) } }));
    out.push(event('content_block_stop', { index }));
    index++;
  }
  const stop = reply.finish ?? (reply.toolCalls?.length ? 'tool_use' : 'end_turn');
  for (const usage of reply.anthropicUsage?.deltas ?? [{ output_tokens: 5 }]) {
    out.push(event('message_delta', { delta: { stop_reason: stop, stop_sequence: null }, ...(usage === null ? {} : { usage }) }));
  }
  out.push(event('message_stop', {}));
  return out;
}

/** How the next chat reply is cut short: after `frames` frames (negative: all but that many). */
interface Plan {
  frames: number;
  /** `hold`: keep the connection open and silent; `cut`: end the response there; `gate`: hold it until `release` settles, then end it. */
  mode: 'hold' | 'cut' | 'gate';
  reached: () => void;
  release?: Promise<void>;
}

export interface ProviderServer {
  url: string;
  /** The next chat reply sends `frames` frames (negative: all but the last `-frames`), then holds the connection open until the client closes it. Resolves once it holds. */
  holdNext(frames: number): Promise<void>;
  /** The next chat reply sends `frames` frames (negative: all but the last `-frames`), then ends the response: a stream the provider broke off. */
  cutNext(frames: number): void;
  /** The next chat reply sends `frames` frames and holds (`reached` resolves), then ends the response, broken off, when `cut()` is called. */
  gateNext(frames: number): { reached: Promise<void>; cut(): void };
  /** When set, answers every chat request it returns a reply for, in the provider's streaming format. */
  script: ((body: Record<string, unknown>) => ScriptedReply | undefined) | undefined;
  requests: RecordedRequest[];
  /** Requests whose client closed the connection before the response ended. */
  abandoned: number;
  /** Resolves when the next request is abandoned. */
  nextAbandon(): Promise<void>;
  close(): Promise<void>;
}

export async function startProviderServer(provider: Provider): Promise<ProviderServer> {
  const requests: RecordedRequest[] = [];
  const seen = new Map<string, number>();
  const open = new Set<ServerResponse>();
  let abandonWaiters: (() => void)[] = [];
  const plans: Plan[] = [];
  const state = { abandoned: 0 };

  const streamFrames = async (res: ServerResponse, all: string[], options: { gapMs?: number; hang?: boolean } = {}): Promise<void> => {
    const plan = plans.shift();
    const limit = plan === undefined ? all.length : plan.frames < 0 ? all.length + plan.frames : plan.frames;
    const parts = all.slice(0, limit);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-request-id': 'req_fx' });
    // Headers go out at once, so the SDK's request resolves before any frame (the "before the first token" point).
    res.flushHeaders();
    for (const part of parts) {
      if (res.destroyed) return;
      res.write(part);
      if (options.gapMs !== undefined) await new Promise((resolve) => setTimeout(resolve, options.gapMs));
    }
    if (plan !== undefined) {
      plan.reached();
      if (plan.mode === 'gate') await plan.release;
      if (plan.mode !== 'hold' && !res.destroyed) res.end();
      return;
    }
    if (!options.hang) res.end();
  };

  /**
   * An answer that never ends: its opening frames, then one word's frame over and over (a million at most), as
   * fast as the client reads; `wide`, that word 64 KiB long.
   */
  const endless = async (res: ServerResponse, wide = false): Promise<void> => {
    const all = frames(fixture(`${provider}-text.sse`));
    const opening = provider === 'openai' ? 2 : 4;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    for (const part of all.slice(0, opening)) res.write(part);
    const frame = all[opening] ?? '';
    const word = wide ? frame.replace(/"(content|text)":"[^"]*"/, (_match, key: string) => `"${key}":"${'w'.repeat(65_536)}"`) : frame;
    for (let i = 0; i < 1_000_000 && !res.destroyed; i++) {
      if (!res.write(word)) await drained(res);
    }
    if (!res.destroyed) res.end();
  };

  const fail = (res: ServerResponse, status: number, body: string, wait: Record<string, string> = { 'retry-after': '1', 'retry-after-ms': '10' }): void => {
    res.writeHead(status, {
      'content-type': 'application/json',
      ...(status === 429 ? wait : {}),
      'x-should-retry': status >= 500 || status === 429 ? 'true' : 'false',
    });
    res.end(body);
  };

  const server: Server = createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (raw += chunk));
    req.on('end', () => {
      const body = (raw === '' ? {} : JSON.parse(raw)) as Record<string, unknown>;
      requests.push({ path: req.url ?? '', headers: req.headers, body });
      open.add(res);
      res.on('close', () => {
        open.delete(res);
        if (!res.writableEnded) {
          state.abandoned += 1;
          const waiters = abandonWaiters;
          abandonWaiters = [];
          waiters.forEach((resolve) => resolve());
        }
      });
      // An embeddings request for the model `rate-limited` or `unauthorized` is refused as a chat request would be.
      if (req.url?.endsWith('/embeddings') && body.model === 'rate-limited') return fail(res, 429, fixture(`${provider}-429.json`));
      if (req.url?.endsWith('/embeddings') && body.model === 'unauthorized') return fail(res, 401, JSON.stringify({ error: { message: 'Incorrect API key provided', type: 'invalid_request_error', param: null, code: 'invalid_api_key' } }));
      if (req.url?.endsWith('/embeddings')) {
        // Deterministic vectors, returned out of order: the client must sort by index.
        const inputs = (Array.isArray(body.input) ? body.input : [body.input]) as string[];
        // The SDK asks for base64 (little-endian float32) unless told otherwise, as the real API allows.
        const encode = (vector: number[]) =>
          body.encoding_format === 'base64' ? Buffer.from(new Float32Array(vector).buffer).toString('base64') : vector;
        const data = inputs.map((text, index) => ({ object: 'embedding', index, embedding: encode([text.length, index, 1]) })).reverse();
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ object: 'list', data, model: body.model, usage: { prompt_tokens: inputs.length, total_tokens: inputs.length } }));
        return;
      }
      const scripted = self.script?.(body);
      if (scripted !== undefined) {
        const model = String(body.model ?? 'scripted');
        if (scripted.frames !== undefined) return void streamFrames(res, scripted.frames);
        return void streamFrames(res, provider === 'openai' ? openAIFrames(scripted, model) : anthropicFrames(scripted, model));
      }
      const scenario = String(body.model ?? 'text');
      const count = (seen.get(scenario) ?? 0) + 1;
      seen.set(scenario, count);
      const stream = (name: string, options?: { gapMs?: number; hang?: boolean }) => void streamFrames(res, frames(fixture(`${provider}-${name}.sse`)), options);
      switch (scenario) {
        case 'tools':
          return stream('tools');
        case 'stall':
          return stream('stall', { hang: true });
        case 'slow':
          return stream('text', { gapMs: 50 });
        case 'endless':
          return void endless(res);
        case 'wide':
          return void endless(res, true);
        case 'midstream-rate-limited':
        case 'midstream-rejected':
        case 'midstream-overloaded':
          return void streamFrames(res, [...frames(fixture(`${provider}-text.sse`)).slice(0, 4), midstreamError(provider, scenario.slice('midstream-'.length))]);
        case 'unavailable-long':
          // An outage that says how long it lasts: a 503 asking for two minutes.
          res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '120', 'x-should-retry': 'true' });
          return void res.end(fixture(`${provider}-500.json`));
        case 'malformed':
          return void streamFrames(res, [...frames(fixture(`${provider}-text.sse`)).slice(0, 3), MALFORMED[provider]]);
        case 'rate-limited':
          return fail(res, 429, fixture(`${provider}-429.json`));
        case 'unauthorized': {
          // As OpenAI answers a wrong key: its message quotes the key (OpenAI masks the middle; this quotes it whole).
          const key = String(req.headers.authorization ?? req.headers['x-api-key'] ?? '').replace(/^Bearer /, '');
          return fail(res, 401, JSON.stringify({ error: { message: `Incorrect API key provided: ${key}`, type: 'invalid_request_error', param: null, code: 'invalid_api_key' } }));
        }
        case 'rate-limited-long':
          return fail(res, 429, fixture(`${provider}-429.json`), { 'retry-after': '7' });
        case 'rate-limited-until':
          return fail(res, 429, fixture(`${provider}-429.json`), { 'retry-after': new Date(Date.now() + 120_000).toUTCString() });
        case 'rate-limited-once':
          return count === 1 ? fail(res, 429, fixture(`${provider}-429.json`)) : stream('text');
        case 'error':
          return fail(res, 500, fixture(`${provider}-500.json`));
        case 'error-once':
          return count === 1 ? fail(res, 500, fixture(`${provider}-500.json`)) : stream('text');
        default:
          return stream('text');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const self: ProviderServer = {
    script: undefined,
    url: provider === 'openai' ? `http://127.0.0.1:${port}/v1` : `http://127.0.0.1:${port}`,
    requests,
    get abandoned() {
      return state.abandoned;
    },
    nextAbandon: () => new Promise<void>((resolve) => abandonWaiters.push(resolve)),
    holdNext: (frames) => new Promise<void>((resolve) => plans.push({ frames, mode: 'hold', reached: resolve })),
    cutNext: (frames) => void plans.push({ frames, mode: 'cut', reached: () => {} }),
    gateNext: (frames) => {
      let reached!: () => void;
      let cut!: () => void;
      const whenReached = new Promise<void>((resolve) => (reached = resolve));
      plans.push({ frames, mode: 'gate', reached, release: new Promise<void>((resolve) => (cut = resolve)) });
      return { reached: whenReached, cut };
    },
    close: async () => {
      for (const res of open) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return self;
}
