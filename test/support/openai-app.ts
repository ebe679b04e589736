/**
 * The shipped `/joke`, `/chat` and `/agent` chains on the real OpenAI
 * provider path — Runnel's `ChatOpenAI` calling the local provider server —
 * with Redis for the response cache and the chat history, behind an API key,
 * and the real `openai` SDK as the client of Runnel's `/v1` routes.
 *
 * The provider answers from the request it gets, so an answer shows what the
 * chain sent: `You said: <last user message> (<n> user messages)`; to a
 * request that offers the agent's calculator it answers with a call of it
 * (`6 * 7`), then with `The calculator says <result>.`
 */
import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { agentChain } from '../../chains/agent.js';
import { chatChain } from '../../chains/chat.js';
import { DocsCollection } from '../../chains/docs.js';
import { jokeChain } from '../../chains/joke.js';
import { connectServices, type ChainSpec, type Services } from '../../src/index.js';
import { recordCacheWrites } from './cache-spy.js';
import { startProviderServer, type ProviderServer, type ScriptedReply } from './provider-server.js';
import { startServer, type TestServer } from './server.js';

export const KEY = 'ada-key-0123456789abcdef';

export interface OpenAIApp {
  provider: ProviderServer;
  server: TestServer;
  services: Services;
  /** The SDK pointed at the app's `/v1`, with a Runnel API key; no retries, so a test sees each answer. */
  client: OpenAI;
  /** Every answer handed to the response cache, as text. */
  stored: string[];
  close(): Promise<void>;
}

interface WireMessage {
  role: string;
  content: unknown;
}

/** What the provider answers (see the module comment). */
export function reply(body: Record<string, unknown>): ScriptedReply {
  const messages = body.messages as WireMessage[];
  const tools = (body.tools ?? []) as { function: { name: string } }[];
  const last = messages.at(-1);
  if (tools.some((t) => t.function.name === 'calculator')) {
    return last?.role === 'tool' ? { text: `The calculator says ${String(last.content)}.` } : { toolCalls: [{ name: 'calculator', args: { expression: '6 * 7' } }] };
  }
  const said = messages.filter((m) => m.role === 'user').map((m) => String(m.content));
  return { text: `You said: ${said.at(-1)} (${said.length} user messages)` };
}

export async function startOpenAIApp(extra: ChainSpec<never, unknown>[] = []): Promise<OpenAIApp> {
  const provider = await startProviderServer('openai');
  provider.script = reply;
  const services = await connectServices({ redisUrl: 'redis://127.0.0.1:6379', cacheNamespace: `runnel-test:openai:${randomUUID()}` });
  const stored = recordCacheWrites(services);
  const context = { services, env: { OPENAI_API_KEY: 'sk-test-0000', OPENAI_BASE_URL: provider.url } };
  const chains = [jokeChain(context), chatChain(context), agentChain(context, new DocsCollection(context)), ...extra] as ChainSpec<never, unknown>[];
  const server = await startServer({ apiKeys: [{ name: 'ada', key: KEY }] }, chains);
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0 });
  return {
    provider,
    server,
    services,
    client,
    stored,
    close: async () => {
      await server.close();
      await services.close();
      await provider.close();
    },
  };
}

/** POSTs JSON to a Runnel route with the API key; the parsed answer. */
export async function call(app: OpenAIApp, path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${app.server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

/** The caller's conversation of a `/chat` session, as `[type, content]` pairs. */
export async function history(app: OpenAIApp, sessionId: string): Promise<[string, string][]> {
  const res = await fetch(`${app.server.url}/chat/history/${sessionId}`, { headers: { authorization: `Bearer ${KEY}` } });
  const { messages } = (await res.json()) as { messages: { type: string; content: string }[] };
  return messages.map((m) => [m.type, m.content]);
}
