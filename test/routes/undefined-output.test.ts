/**
 * A chain that returns `undefined` (a lambda without a return) answered
 * differently on every route, some answers invalid: /invoke left `output`
 * out of `{output, metadata}`, /stream sent a data frame without data (SSE
 * parsers drop it, and RemoteRunnable streamed nothing), /stream_log sent
 * JSON Patch ops without a value. It is JSON's null everywhere now, as
 * /batch and run records already said.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RemoteRunnable } from '../../src/client/index.js';
import { defineChain, lambda, type ChainSpec } from '../../src/index.js';
import { post, startServer, text, type TestServer } from '../support/server.js';

describe('a chain whose output is undefined', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({}, [defineChain({ path: '/nothing', runnable: lambda((_input: unknown): undefined => undefined) })] as ChainSpec<never, unknown>[]);
  });
  afterAll(async () => {
    await server?.close();
  });

  it('answers null on /invoke, /batch, /stream and /stream_log, and RemoteRunnable streams the null', async () => {
    expect(await (await post(`${server.url}/nothing/invoke`, { input: 1 })).json()).toMatchObject({ output: null });
    expect(await (await post(`${server.url}/nothing/batch`, { inputs: [1, 2] })).json()).toMatchObject({ output: [null, null] });
    const stream = await text(await post(`${server.url}/nothing/stream`, { input: 1 }));
    expect(stream).toContain('event: data\r\ndata: null\r\n\r\n');
    const log = await text(await post(`${server.url}/nothing/stream_log`, { input: 1 }));
    const ops = log
      .split('\r\n\r\n')
      .filter((frame) => frame.startsWith('event: data'))
      .flatMap((frame) => (JSON.parse(frame.split('data: ')[1] as string) as { ops: { op: string; value?: unknown }[] }).ops);
    for (const op of ops) if (op.op === 'add' || op.op === 'replace') expect(op, JSON.stringify(op)).toHaveProperty('value');
    const remote = new RemoteRunnable({ url: `${server.url}/nothing` });
    const chunks: unknown[] = [];
    for await (const chunk of await remote.stream(1)) chunks.push(chunk);
    expect(chunks).toEqual([null]);
    expect(await remote.invoke(1)).toBeNull();
  });
});
