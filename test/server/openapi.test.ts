import { readFileSync } from 'node:fs';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { errorCodes } from '../../src/index.js';
import { openApiText } from '../../scripts/openapi.js';

const committed = readFileSync(new URL('../../openapi/openapi.json', import.meta.url), 'utf8');

describe('openapi/openapi.json', () => {
  it('is up to date (run `npm run openapi` after changing a chain or a route)', async () => {
    expect(await openApiText()).toBe(committed);
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    const validator = new Validator();
    const result = await validator.validate(JSON.parse(committed));
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it("names each chain's bodies as components and documents SSE routes as text/event-stream", () => {
    const doc = JSON.parse(committed);
    for (const name of ['JokeInvokeRequest', 'JokeInvokeResponse', 'JokeBatchRequest', 'JokeBatchResponse', 'JokeStreamRequest', 'JokeStreamLogRequest', 'JokeStreamEventsRequest', 'RunnelError']) {
      expect(doc.components.schemas[name], name).toBeDefined();
    }
    expect(doc.paths['/joke/invoke'].post.requestBody.content['application/json'].schema.$ref).toBe('#/components/schemas/JokeInvokeRequest');
    for (const route of ['stream', 'stream_log', 'stream_events']) {
      expect(Object.keys(doc.paths[`/joke/${route}`].post.responses['200'].content)).toEqual(['text/event-stream']);
    }
    // Durable streams are asked for in the body: a trial found the field nowhere in the document.
    for (const name of ['JokeStreamRequest', 'JokeStreamEventsRequest']) expect(doc.components.schemas[name].properties.on_disconnect.enum, name).toEqual(['cancel', 'continue']);
    expect(doc.components.schemas.JokeStreamLogRequest.properties.on_disconnect).toBeUndefined();
  });

  // A probe: the document's validator does not look inside the schemas, and a draft-07 tuple there
  // (`items: [...]`) made a 2020-12 validator refuse the whole document.
  it("holds schemas of OpenAPI 3.1's dialect (JSON Schema 2020-12) that take what the routes take", () => {
    const doc = JSON.parse(committed);
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats.default(ajv);
    ajv.addSchema({ $id: 'openapi', components: doc.components });
    const body = (name: string) => ajv.compile({ $ref: `openapi#/components/schemas/${name}` });
    for (const name of Object.keys(doc.components.schemas)) expect(() => body(name), name).not.toThrow();
    // A message as a [role, text] pair, and not as a triple.
    const agent = body('AgentInvokeRequest');
    expect(agent({ input: { input: 'hi', chat_history: [['human', 'hi'], ['ai', 'hello']] } }), JSON.stringify(agent.errors)).toBe(true);
    expect(agent({ input: { input: 'hi', chat_history: [['human', 'hi', 'extra']] } })).toBe(false);
    // A configurable field the chain does not have is dropped by the server, not refused.
    expect(body('JokeInvokeRequest')({ input: { topic: 'x' }, config: { configurable: { zzz: 1 } } })).toBe(true);
    // kwargs: the LangChain JS client sends a list on /batch.
    expect(body('JokeBatchRequest')({ inputs: [{ topic: 'x' }], config: [{}], kwargs: [{}] })).toBe(true);
    // /chat's session id may come from the URL's /c/{config_hash}/, which shares these bodies.
    expect(body('ChatInvokeRequest')({ input: { message: 'hi' } })).toBe(true);
    expect(doc.components.schemas.ChatConfig.description).toContain('configurable.session_id');
  });

  it('documents the error answers of the schema routes', () => {
    const doc = JSON.parse(committed);
    for (const route of ['/joke/input_schema', '/joke/c/{config_hash}/config_schema']) expect(Object.keys(doc.paths[route].get.responses), route).toEqual(['200', '4XX', '5XX']);
  });

  it('lists every error code, as docs/errors.md does', () => {
    const doc = JSON.parse(committed);
    expect([...doc.components.schemas.RunnelError.properties.code.enum].sort()).toEqual(Object.keys(errorCodes).sort());
    const table = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
    for (const code of doc.components.schemas.RunnelError.properties.code.enum) expect(table).toContain(`\`${code}\``);
  });
});
