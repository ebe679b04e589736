import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HashingEmbeddings, OpenAIEmbeddings } from '../../src/index.js';
import { freePort } from '../helpers.js';
import { startProviderServer, type ProviderServer } from '../support/provider-server.js';

const dot = (a: number[], b: number[]) => a.reduce((sum, x, i) => sum + x * (b[i] as number), 0);

describe('HashingEmbeddings', () => {
  const embeddings = new HashingEmbeddings();

  it('is deterministic, 384-dimensional by default and L2-normalised', async () => {
    const [a, b] = await embeddings.embedDocuments(['Stream events over SSE', 'Stream events over SSE']);
    expect(a).toEqual(b);
    expect(a).toHaveLength(384);
    expect(Math.sqrt(dot(a as number[], a as number[]))).toBeCloseTo(1, 10);
    expect(await new HashingEmbeddings({ dimensions: 64 }).embedQuery('x')).toHaveLength(64);
    expect(await embeddings.embedQuery('')).toEqual(new Array(384).fill(0));
  });

  it('ranks lexical overlap first', async () => {
    const docs = [
      'Redis keeps the conversation history of each session',
      'Postgres with pgvector stores the document vectors',
      'The playground streams answers in the browser',
    ];
    const vectors = await embeddings.embedDocuments(docs);
    const query = await embeddings.embedQuery('where is conversation history kept? redis?');
    const scores = vectors.map((v) => dot(v, query));
    expect(scores.indexOf(Math.max(...scores))).toBe(0);
    const pgQuery = await embeddings.embedQuery('pgvector vectors');
    const pgScores = vectors.map((v) => dot(v, pgQuery));
    expect(pgScores.indexOf(Math.max(...pgScores))).toBe(1);
  });
});

describe('OpenAIEmbeddings through the real SDK', () => {
  let server: ProviderServer;
  beforeAll(async () => {
    server = await startProviderServer('openai');
  });
  afterAll(async () => {
    await server.close();
  });

  it('sends batched requests and keeps the order of the inputs', async () => {
    const embeddings = new OpenAIEmbeddings({ apiKey: 'sk-x', baseURL: server.url, batchSize: 2, dimensions: 3 });
    const before = server.requests.length;
    const vectors = await embeddings.embedDocuments(['a', 'bb', 'ccc', 'dddd', 'eeeee']);
    expect(vectors).toEqual([
      [1, 0, 1],
      [2, 1, 1],
      [3, 0, 1],
      [4, 1, 1],
      [5, 0, 1],
    ]);
    const sent = server.requests.slice(before);
    expect(sent.map((r) => r.body.input)).toEqual([['a', 'bb'], ['ccc', 'dddd'], ['eeeee']]);
    expect(sent[0]?.path).toBe('/v1/embeddings');
    expect(await embeddings.embedQuery('xyz')).toEqual([3, 0, 1]);
  });

  // A review: the SDK's own errors came through, so an ingest did not see the provider gone and tried every file.
  it('fails as Runnel\'s provider errors: unreachable, rate-limited', async () => {
    const closed = await freePort();
    const nowhere = new OpenAIEmbeddings({ apiKey: 'sk-x', baseURL: `http://127.0.0.1:${closed}/v1`, maxRetries: 0 });
    await expect(nowhere.embedDocuments(['a'])).rejects.toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_UNAVAILABLE' });
    const limited = new OpenAIEmbeddings({ apiKey: 'sk-x', baseURL: server.url, model: 'rate-limited', maxRetries: 0 });
    await expect(limited.embedQuery('a')).rejects.toMatchObject({ code: 'RUNNEL_ERR_PROVIDER_RATE_LIMITED' });
  });
});
