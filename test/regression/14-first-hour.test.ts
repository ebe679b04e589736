/**
 * Issue 14: what a new user and the LangServe clients ran into, on the
 * shipped chains with the offline model — errors before streams, cached
 * answers that stream, and the run types and metadata LangChain clients filter on.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatChain } from '../../chains/chat.js';
import { jokeChain } from '../../chains/joke.js';
import { connectServices, type ChainSpec, type Services } from '../../src/index.js';
import { post, startServer, text, type TestServer } from '../support/server.js';

let server: TestServer;
let services: Services;

beforeAll(async () => {
  services = await connectServices({});
  const context = { services, env: {}, offlineDelayMs: 0 };
  server = await startServer({}, [jokeChain(context), chatChain(context)] as ChainSpec<never, unknown>[]);
});
afterAll(async () => {
  await server.close();
  await services.close();
});

/** The `data` payloads of the frames of one event type in an SSE body. */
function frames(body: string, event: string): unknown[] {
  return body
    .split(/\r?\n\r?\n/)
    .map((frame) => frame.split(/\r?\n/))
    .filter((lines) => lines.includes(`event: ${event}`))
    .map((lines) => JSON.parse(lines.find((line) => line.startsWith('data: '))?.slice(6) ?? 'null') as unknown);
}

describe("a newcomer's usual mistakes are told how the body goes (a trial from the README, with curl)", () => {
  it('an empty body, a form, the input at the top, an input that is not an object', async () => {
    const send = async (body: string, type = 'application/json') => {
      const res = await fetch(`${server.url}/joke/invoke`, { method: 'POST', headers: { 'content-type': type }, body });
      return [res.status, ((await res.json()) as { message: string }).message];
    };
    expect(await send('')).toEqual([422, 'The request body is empty: send a JSON object, such as {"input": {...}}']);
    expect(await send('topic=cats', 'application/x-www-form-urlencoded')).toEqual([422, 'Invalid JSON body: send a JSON object, such as {"input": {...}}']);
    expect(await send('{"topic": "cats"}')).toEqual([422, 'Field required: input (the body is {"input": ..., "config": {...}}: the chain\'s input goes under "input")']);
    expect(await send('{"input": "cats"}')).toEqual([422, 'Invalid input: must be object']);
    // Each route's hint is its own body: /batch takes "inputs".
    const batch = await fetch(`${server.url}/joke/batch`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"inputs": [' });
    expect(((await batch.json()) as { message: string }).message).toBe('Invalid JSON body: send a JSON object, such as {"inputs": [{...}]}');
    // A probe: an empty body on /ui_stream was told to send {"input": ...}, which that route does not take.
    for (const [path, example] of [['/joke/ui_stream', '{"messages": [{"role": "user", "parts": [{"type": "text", "text": "..."}]}]}'], ['/joke/batch', '{"inputs": [{...}]}']]) {
      const empty = await fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '' });
      expect([path, ((await empty.json()) as { message: string }).message]).toEqual([path, `The request body is empty: send a JSON object, such as ${example}`]);
    }
  });
});

describe('everything decidable before a stream starts is a JSON error', () => {
  for (const endpoint of ['invoke', 'batch', 'stream', 'stream_log', 'stream_events']) {
    it(`/chat/${endpoint} without session_id: 422 JSON, no event stream`, async () => {
      const body = endpoint === 'batch' ? { inputs: [{ message: 'hi' }] } : { input: { message: 'hi' } };
      const res = await post(`${server.url}/chat/${endpoint}`, body);
      expect(res.status).toBe(422);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      const json = (await res.json()) as { code: string; detail: { type: string; loc: string[]; msg: string }[] };
      expect(json.code).toBe('RUNNEL_ERR_CONFIG_INVALID');
      expect(json.detail).toEqual([{ type: 'missing', loc: ['config', 'configurable', 'session_id'], msg: 'Field required' }]);
    });
  }
});

describe('a cached answer streams in pieces', () => {
  it('/joke/stream after /joke/invoke of the same topic sends the answer over several data frames', async () => {
    const topic = `cats ${randomUUID()}`;
    const invoked = (await (await post(`${server.url}/joke/invoke`, { input: { topic } })).json()) as { output: string };
    const streamed = await text(await post(`${server.url}/joke/stream`, { input: { topic } }));
    const data = frames(streamed, 'data') as string[];
    expect(data.length).toBeGreaterThan(5);
    expect(data.join('')).toBe(invoked.output);
    // A client's no-store still asks the model anew, and that streams too.
    const fresh = await text(await post(`${server.url}/joke/stream`, { input: { topic } }, { 'cache-control': 'no-store' }));
    expect((frames(fresh, 'data') as string[]).join('')).toBe(invoked.output);
  });
});

describe('on_disconnect says what is wrong with it', () => {
  // A probe: "continue" on /stream_log was told 'on_disconnect must be "cancel" or "continue"' — what it had sent.
  it('"continue" on /stream_log is refused as unavailable there, a misspelling as not a value', async () => {
    const log = await post(`${server.url}/joke/stream_log`, { input: { topic: 'cats' }, on_disconnect: 'continue' });
    expect(log.status).toBe(422);
    expect(((await log.json()) as { message: string }).message).toBe(
      'on_disconnect "continue" is not available on /stream_log, which has no durable form: use /stream or /stream_events to continue a run, or "cancel" here',
    );
    const typo = await post(`${server.url}/joke/stream`, { input: { topic: 'cats' }, on_disconnect: 'contiune' });
    expect(typo.status).toBe(422);
    expect(((await typo.json()) as { message: string }).message).toBe('on_disconnect must be "cancel" or "continue" ("continue": /stream and /stream_events)');
  });
});

describe('what LangChain clients filter on', () => {
  it("stream_log names a chat model's run `llm`, so include_types: ['llm'] finds it", async () => {
    const body = await text(await post(`${server.url}/joke/stream_log`, { input: { topic: `logs ${randomUUID()}` }, include_types: ['llm'] }));
    const ops = (frames(body, 'data') as { ops: { op: string; path: string; value?: { type?: string; name?: string } }[] }[]).flatMap((patch) => patch.ops);
    const added = ops.filter((op) => op.op === 'add' && /^\/logs\/[^/]+$/.test(op.path));
    expect(added.map((op) => [op.value?.name, op.value?.type])).toEqual([['ScriptedChatModel', 'llm']]);
  });

  it('chat model events carry ls_provider, ls_model_name, ls_model_type (and the parameters set)', async () => {
    const body = await text(await post(`${server.url}/joke/stream_events`, { input: { topic: `meta ${randomUUID()}` }, include_types: ['chat_model'] }));
    const events = frames(body, 'data') as { event: string; metadata: Record<string, unknown> }[];
    const start = events.find((e) => e.event === 'on_chat_model_start');
    expect(start?.metadata).toMatchObject({ ls_provider: 'fake', ls_model_name: 'offline', ls_model_type: 'chat' });
    expect(events.filter((e) => e.event.startsWith('on_chat_model')).every((e) => e.metadata.ls_provider === 'fake')).toBe(true);
  });
});
