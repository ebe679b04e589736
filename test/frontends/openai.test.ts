/**
 * Issue 16: Runnel's chains as OpenAI chat models, through the real `openai`
 * SDK — `/v1/models`, and `/v1/chat/completions` with and without streaming
 * on the shipped `/joke`, `/chat` and `/agent`, on the real OpenAI provider
 * path with Redis for the cache and the history.
 */
import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, history, reply, startOpenAIApp, type OpenAIApp } from '../support/openai-app.js';

let app: OpenAIApp;
beforeAll(async () => {
  app = await startOpenAIApp();
});
afterAll(async () => {
  await app.close();
});

/** Every chunk of a streamed answer, through the SDK. */
async function chunks(body: OpenAI.ChatCompletionCreateParamsStreaming): Promise<OpenAI.ChatCompletionChunk[]> {
  const out: OpenAI.ChatCompletionChunk[] = [];
  for await (const chunk of await app.client.chat.completions.create(body)) out.push(chunk);
  return out;
}

const textOf = (all: OpenAI.ChatCompletionChunk[]): string => all.map((c) => c.choices[0]?.delta.content ?? '').join('');

describe('GET /v1/models', () => {
  it('lists the chains with a messages adapter, by path without the slash', async () => {
    const models = [];
    for await (const model of app.client.models.list()) models.push(model);
    expect(models.map((m) => m.id)).toEqual(['joke', 'chat', 'agent']);
    for (const model of models) {
      expect(model).toMatchObject({ object: 'model', owned_by: 'runnel' });
      expect(Number.isInteger(model.created)).toBe(true);
    }
    expect(await app.client.models.retrieve('chat')).toMatchObject({ id: 'chat', object: 'model' });
  });
});

describe('POST /v1/chat/completions on /joke', () => {
  it('answers what /invoke answers for the same input, with the usage the provider reported', async () => {
    const topic = `cats ${randomUUID()}`;
    const completion = await app.client.chat.completions.create({ model: 'joke', messages: [{ role: 'user', content: topic }], temperature: 0.2, max_tokens: 50 });
    const invoked = await call(app, '/joke/invoke', { input: { topic } });
    expect(completion.choices[0]?.message.content).toBe(invoked.json.output);
    expect(completion.choices[0]?.message.content).toBe(`You said: Tell me a joke about ${topic} (1 user messages)`);
    expect(completion).toMatchObject({ object: 'chat.completion', model: 'joke', choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', refusal: null } }] });
    expect(completion.id).toMatch(/^chatcmpl-/);
    expect(completion.usage).toEqual({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 });
  });

  it('takes a conversation whose assistant turn holds a refusal part, sent by the openai SDK', async () => {
    // A probe: such a turn (OpenAI's answers carry them, the SDK's types allow them) was a 400.
    const topic = `owls ${randomUUID()}`;
    const completion = await app.client.chat.completions.create({
      model: 'joke',
      messages: [
        { role: 'user', content: 'something' },
        { role: 'assistant', content: [{ type: 'refusal', refusal: 'I cannot help with that.' }] },
        { role: 'user', content: topic },
      ],
    });
    expect(completion.choices[0]?.message.content).toContain(topic);
  });

  // A probe: a 64-bit seed (OpenAI takes any int64; clients draw them at random) was a 400, the range checked
  // being JavaScript's safe integers.
  it("takes a seed anywhere in OpenAI's int64 range, sent by the SDK or as exact JSON text", async () => {
    const completion = await app.client.chat.completions.create({ model: 'joke', messages: [{ role: 'user', content: `seeds ${randomUUID()}` }], seed: 2 ** 62 });
    expect(completion.choices[0]?.finish_reason).toBe('stop');
    for (const seed of ['9223372036854775807', '-9223372036854775808']) {
      const res = await fetch(`${app.server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${app.client.apiKey}`, 'content-type': 'application/json' },
        body: `{"model": "joke", "seed": ${seed}, "messages": [{"role": "user", "content": "seeds ${randomUUID()}"}]}`,
      });
      expect(res.status, seed).toBe(200);
    }
    // Outside it, or not an integer: still OpenAI's 400 naming it.
    for (const seed of [2 ** 64, 1.5]) {
      const failed = await app.client.chat.completions.create({ model: 'joke', messages: [{ role: 'user', content: 'hi' }], seed }).catch((error: unknown) => error);
      expect(failed, String(seed)).toBeInstanceOf(OpenAI.BadRequestError);
      expect(failed).toMatchObject({ param: 'seed', code: 'invalid_value' });
    }
  });

  // A probe: JSON mode, log probabilities and audio were accepted and ignored, so a client that asked for JSON
  // parsed the chain's plain text and failed there, far from the cause.
  it('refuses what no chain gives (JSON mode, log probabilities, audio), naming the parameter; takes their neutral values', async () => {
    const messages = [{ role: 'user' as const, content: `formats ${randomUUID()}` }];
    const asks = [
      [{ response_format: { type: 'json_object' as const } }, 'response_format'],
      [{ response_format: { type: 'json_schema' as const, json_schema: { name: 'x', schema: { type: 'object' } } } }, 'response_format'],
      [{ logprobs: true }, 'logprobs'],
      [{ logprobs: true, top_logprobs: 3 }, 'logprobs'],
      [{ modalities: ['text', 'audio'] as ('text' | 'audio')[], audio: { voice: 'alloy' as const, format: 'mp3' as const } }, 'modalities'],
    ] as const;
    for (const [ask, param] of asks) {
      const failed = await app.client.chat.completions.create({ model: 'joke', messages, ...ask }).catch((error: unknown) => error);
      expect(failed, JSON.stringify(ask)).toBeInstanceOf(OpenAI.BadRequestError);
      expect(failed, JSON.stringify(ask)).toMatchObject({ status: 400, param, code: 'unsupported_value' });
    }
    const neutral = await app.client.chat.completions.create({ model: 'joke', messages, response_format: { type: 'text' }, logprobs: false, top_logprobs: 0, modalities: ['text'] });
    expect(neutral.choices[0]?.finish_reason).toBe('stop');
    expect(neutral.choices[0]?.logprobs).toBeNull();
  });

  // Left by the thirty-sixth session: the cached and reasoning counts were dropped, which providers price apart.
  it("says the prompt tokens the provider's cache gave and the reasoning tokens, in OpenAI's fields, streamed or not, and on a run's record", async () => {
    const details = { prompt_tokens_details: { cached_tokens: 8, audio_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 3, audio_tokens: 0 } };
    app.provider.script = (body) => ({ ...reply(body), openAIUsage: details });
    try {
      const expected = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, prompt_tokens_details: { cached_tokens: 8 }, completion_tokens_details: { reasoning_tokens: 3 } };
      const completion = await app.client.chat.completions.create({ model: 'joke', messages: [{ role: 'user', content: `cache ${randomUUID()}` }] });
      expect(completion.usage).toEqual(expected);
      const all = await chunks({ model: 'joke', messages: [{ role: 'user', content: `cache ${randomUUID()}` }], stream: true, stream_options: { include_usage: true } });
      expect(all.at(-1)?.usage).toEqual(expected);
      // A background run keeps them on its record, in LangChain's names.
      const submitted = await call(app, '/joke/runs', { input: { topic: `cache ${randomUUID()}` } });
      expect(submitted.status).toBe(202);
      const res = await fetch(`${app.server.url}/joke/runs/${String(submitted.json.run_id)}/wait`, { headers: { authorization: `Bearer ${app.client.apiKey}` } });
      expect(await res.json()).toMatchObject({
        status: 'success',
        usage: { input_tokens: 10, output_tokens: 5, total_tokens: 15, input_token_details: { cache_read: 8 }, output_token_details: { reasoning: 3 } },
      });
    } finally {
      app.provider.script = reply;
    }
  });

  it('reports no usage for an answer from the cache: no model call spent any', async () => {
    const topic = `dogs ${randomUUID()}`;
    await app.client.chat.completions.create({ model: 'joke', messages: [{ role: 'user', content: topic }] });
    const requests = app.provider.requests.length;
    const again = await app.client.chat.completions.create({ model: 'joke', messages: [{ role: 'user', content: topic }] });
    expect(app.provider.requests.length).toBe(requests);
    expect(again.usage).toEqual({ prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 });
  });

  it('streams chunks whose text is what /invoke answers, then the finish and the usage', async () => {
    const topic = `owls ${randomUUID()}`;
    const all = await chunks({ model: 'joke', messages: [{ role: 'user', content: [{ type: 'text', text: topic }] }], stream: true, stream_options: { include_usage: true } });
    const invoked = await call(app, '/joke/invoke', { input: { topic } });
    expect(textOf(all)).toBe(invoked.json.output);
    expect(new Set(all.map((c) => c.id)).size).toBe(1);
    expect(new Set(all.map((c) => c.created)).size).toBe(1);
    expect(all.every((c) => c.object === 'chat.completion.chunk' && c.model === 'joke')).toBe(true);
    expect(all[0]?.choices[0]?.delta).toEqual({ role: 'assistant', content: '' });
    // More than one content delta: the answer streams as the model makes it.
    expect(all.filter((c) => (c.choices[0]?.delta.content ?? '') !== '').length).toBeGreaterThan(1);
    const finish = all.at(-2);
    expect(finish?.choices).toEqual([{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }]);
    const last = all.at(-1);
    expect(last?.choices).toEqual([]);
    expect(last?.usage).toEqual({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 });
  });

  // `include_usage: null` (a client that serialises its unset fields) was a 400; null is not asked, as elsewhere.
  it.each([{}, { stream_options: { include_usage: null } }, { stream_options: { include_usage: false } }])(
    'writes OpenAI\'s frames: data-only JSON chunks ending with data: [DONE]; no usage chunk unless asked (%j)',
    async (options) => {
      const res = await fetch(`${app.server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${app.client.apiKey}` },
        body: JSON.stringify({ model: 'joke', stream: true, messages: [{ role: 'user', content: `frames ${randomUUID()}` }], ...options }),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const frames = (await res.text()).split('\n\n').filter((f) => f !== '' && !f.startsWith(':'));
      expect(frames.at(-1)).toBe('data: [DONE]');
      const parsed = frames.slice(0, -1).map((f) => {
        expect(f.startsWith('data: ')).toBe(true);
        return JSON.parse(f.slice(6)) as OpenAI.ChatCompletionChunk;
      });
      expect(parsed.at(-1)?.choices[0]?.finish_reason).toBe('stop');
      expect(parsed.every((c) => c.usage === undefined && c.choices.length === 1)).toBe(true);
    },
  );

  it('says finish_reason length for an answer the provider cut at its token limit, streamed or not, and asks again next time', async () => {
    const topic = `limits ${randomUUID()}`;
    app.provider.script = (body) => ({ ...reply(body), finish: 'length' });
    try {
      const before = app.provider.requests.length;
      const completion = await app.client.chat.completions.create({ model: 'joke', messages: [{ role: 'user', content: topic }], max_tokens: 5 });
      expect(completion.choices[0]?.finish_reason).toBe('length');
      expect(completion.choices[0]?.message.content).toBe(`You said: Tell me a joke about ${topic} (1 user messages)`);
      const all = await chunks({ model: 'joke', messages: [{ role: 'user', content: topic }], max_tokens: 5, stream: true });
      expect(all.at(-1)?.choices[0]?.finish_reason).toBe('length');
      expect(textOf(all)).toBe(completion.choices[0]?.message.content);
      // A cut answer is not cached: the stream asked the provider again.
      expect(app.provider.requests.length - before).toBe(2);
    } finally {
      app.provider.script = reply;
    }
  });

  it('sends an error after the stream started as one OpenAI error frame, which the SDK raises', async () => {
    app.provider.cutNext(-3);
    const seen: string[] = [];
    const failed = await (async () => {
      for await (const chunk of await app.client.chat.completions.create({ model: 'joke', stream: true, messages: [{ role: 'user', content: `cut ${randomUUID()}` }] })) {
        seen.push(chunk.choices[0]?.delta.content ?? '');
      }
    })().catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(OpenAI.APIError);
    expect(failed).toMatchObject({ type: 'server_error', code: 'RUNNEL_ERR_PROVIDER_UNAVAILABLE' });
    expect(seen[0]).toBe('');
  });
});

describe('POST /v1/chat/completions on /chat', () => {
  it('continues the conversation named by metadata.session_id', async () => {
    const sessionId = `s-${randomUUID()}`;
    const first = await app.client.chat.completions.create({ model: 'chat', metadata: { session_id: sessionId }, messages: [{ role: 'user', content: 'My name is Grace.' }] });
    expect(first.choices[0]?.message.content).toBe('You said: My name is Grace. (1 user messages)');
    // The client sends only the new message; the server holds the rest.
    const second = await chunks({ model: 'chat', stream: true, metadata: { session_id: sessionId }, messages: [{ role: 'user', content: 'What is my name?' }] });
    expect(textOf(second)).toBe('You said: What is my name? (2 user messages)');
    expect(await history(app, sessionId)).toEqual([
      ['human', 'My name is Grace.'],
      ['ai', 'You said: My name is Grace. (1 user messages)'],
      ['human', 'What is my name?'],
      ['ai', 'You said: What is my name? (2 user messages)'],
    ]);
  });

  it('without metadata.session_id, is a 400 that says to send one', async () => {
    const failed = await app.client.chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'hi' }] }).catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(OpenAI.BadRequestError);
    expect(failed).toMatchObject({ status: 400, type: 'invalid_request_error', param: 'metadata.session_id', code: 'missing_required_parameter' });
    expect((failed as Error).message).toContain('metadata.session_id');
  });
});

describe('POST /v1/chat/completions on /agent', () => {
  it('answers with what the agent concluded from its own tools; the client sees only the answer', async () => {
    const question = `What is 6 * 7? ${randomUUID()}`;
    const completion = await app.client.chat.completions.create({
      model: 'agent',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hello' },
        { role: 'assistant', content: 'Hi! Ask me a sum.' },
        { role: 'user', content: question },
      ],
    });
    const invoked = await call(app, '/agent/invoke', { input: { input: question, chat_history: [{ type: 'human', content: 'Hello' }, { type: 'ai', content: 'Hi! Ask me a sum.' }] } });
    expect(completion.choices[0]?.message).toEqual({ role: 'assistant', content: 'The calculator says 42.', refusal: null });
    expect(invoked.json.output).toBe('The calculator says 42.');
    const streamed = await chunks({ model: 'agent', stream: true, messages: [{ role: 'user', content: `${question} again` }] });
    expect(textOf(streamed)).toBe('The calculator says 42.');
    expect(streamed.at(-1)?.choices[0]?.finish_reason).toBe('stop');
  });

  it("takes its own answer sent back as the Python SDK's model_dump() writes it: every unset field null", async () => {
    // A probe: `messages.append(completion.choices[0].message.model_dump())` (the Python SDK) sends the
    // answer back with `tool_calls`, `function_call`, `audio` and `annotations` null, as OpenAI takes them; it was
    // a 400 on `messages[1].tool_calls`. `name: null` (a pydantic model of a user turn) was refused too.
    const question = `What is 6 * 7? ${randomUUID()}`;
    const first = await app.client.chat.completions.create({ model: 'agent', messages: [{ role: 'user', content: question }] });
    const dumped = { content: first.choices[0]?.message.content, refusal: null, role: 'assistant', annotations: null, audio: null, function_call: null, tool_calls: null };
    const messages = [{ role: 'user', content: question, name: null }, dumped, { role: 'user', content: 'And 6 * 8?', name: null }] as unknown as OpenAI.ChatCompletionMessageParam[];
    const completion = await app.client.chat.completions.create({ model: 'agent', messages });
    expect(completion.choices[0]?.message.content).toBe('The calculator says 42.');
    const streamed = await chunks({ model: 'agent', stream: true, messages });
    expect(textOf(streamed)).toBe('The calculator says 42.');
  });
});

describe('errors, as the SDK raises them', () => {
  it('an unknown model is a 404 model_not_found', async () => {
    const failed = await app.client.chat.completions.create({ model: 'rag', messages: [{ role: 'user', content: 'hi' }] }).catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(OpenAI.NotFoundError);
    expect(failed).toMatchObject({ status: 404, code: 'model_not_found', param: 'model' });
  });

  it('a wrong API key is a 401 invalid_api_key', async () => {
    const stranger = new OpenAI({ baseURL: `${app.server.url}/v1`, apiKey: 'not-a-key', maxRetries: 0 });
    const failed = await stranger.chat.completions.create({ model: 'joke', messages: [{ role: 'user', content: 'hi' }] }).catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(failed).toMatchObject({ status: 401, type: 'invalid_request_error', code: 'invalid_api_key' });
    await expect(stranger.models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
  });

  it('stream_options without stream is a 400 naming it, as OpenAI answers (a probe: it was accepted and ignored)', async () => {
    const failed = await app.client.chat.completions
      .create({ model: 'joke', messages: [{ role: 'user', content: 'hi' }], stream_options: { include_usage: true } })
      .catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(OpenAI.BadRequestError);
    expect(failed).toMatchObject({ status: 400, param: 'stream_options' });
  });

  it('names each answer’s request, as OpenAI does: the SDK’s request id, streamed or not (a probe: only errors carried it)', async () => {
    const plain = await app.client.chat.completions.create({ model: 'joke', messages: [{ role: 'user', content: `ids ${randomUUID()}` }] });
    expect(plain._request_id).toMatch(/\S/);
    const streamed = await app.client.chat.completions.create({ model: 'joke', messages: [{ role: 'user', content: `ids ${randomUUID()}` }], stream: true }).withResponse();
    expect(streamed.request_id).toMatch(/\S/);
    expect(streamed.request_id).not.toBe(plain._request_id);
    for await (const chunk of streamed.data) expect(chunk.object).toBe('chat.completion.chunk');
    // A client's own id is kept.
    const own = await app.client.models.list({ headers: { 'x-request-id': 'trace-me-42' } }).withResponse();
    expect(own.request_id).toBe('trace-me-42');
  });

  // A probe: Fastify's own refusal of the URL, before routing, was Runnel's shape, which the SDK read as
  // "400 status code (no body)": no message, no code.
  it('a /v1 URL with broken percent-encoding is a 400 in OpenAI\'s shape, which the SDK reads', async () => {
    const failed = await app.client.get('/models/%E0%A4%A').catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(OpenAI.BadRequestError);
    expect(failed).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'RUNNEL_ERR_BAD_REQUEST', param: null, message: expect.stringContaining('Malformed') });
    expect((failed as InstanceType<typeof OpenAI.BadRequestError>).requestID).toMatch(/\S/);
    // Elsewhere, Runnel's own shape, as before.
    const plain = await fetch(`${app.server.url}/joke/%E0%A4%A`, { headers: { authorization: `Bearer ${app.client.apiKey}` } });
    expect([plain.status, ((await plain.json()) as { code?: string }).code]).toEqual([400, 'RUNNEL_ERR_BAD_REQUEST']);
  });

  it('tools sent to a chain that takes none are a 400 tools_not_supported naming the chain', async () => {
    const failed = await app.client.chat.completions
      .create({ model: 'joke', messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: {} } } }] })
      .catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(OpenAI.BadRequestError);
    expect(failed).toMatchObject({ status: 400, param: 'tools', code: 'tools_not_supported' });
    expect((failed as Error).message).toContain('/joke');
  });
});
