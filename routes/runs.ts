/**
 * Background runs of a chain: `POST /{path}/runs` (submit, 202), `GET
 * /{path}/runs` (the caller's recent runs), `GET /{path}/runs/{run_id}` (the
 * record), `/wait` (until it ends, bounded), `/stream` (SSE from the log,
 * resumable with `Last-Event-ID`), `POST .../cancel`. docs/runs.md is the
 * contract.
 */
import { Readable } from 'node:stream';
import type { FastifyPluginAsync } from 'fastify';
import { RunnelError } from '../src/core/index.js';
import { publicRun, TERMINAL, type RunStatus } from '../src/runs/index.js';
import type { PreparedChain } from '../src/server/prepared.js';
import { countRequests } from './chain.js';
import { Answering, clientGone, decodeConfigHash, refuseCrossSitePost, whenClientGone } from '../src/server/request.js';
import { joinFormat, lastEventId, ownRun, runQueue, sendRunStream, submitRun } from '../src/server/runs.js';

const STATUSES: readonly RunStatus[] = ['pending', 'running', 'success', 'error', 'cancelled'];
const errors = { '4xx': { description: 'A request error (see RunnelError.code); 404 for a run that is not the caller\'s or has expired.', $ref: 'RunnelError#' }, '5xx': { description: 'Redis unavailable (503) or a bug (500).', $ref: 'RunnelError#' } };
const runSchema = {
  type: 'object',
  required: ['run_id', 'chain', 'status', 'created_at', 'updated_at'],
  properties: {
    run_id: { type: 'string' },
    chain: { type: 'string' },
    status: { type: 'string', enum: [...STATUSES] },
    output: { description: 'On success: the output, as /invoke gives it' },
    error: { type: 'object', properties: { code: { type: 'string' }, message: { type: 'string' } } },
    usage: {
      type: 'object',
      description: "When known: the tokens the run's model calls spent, and of them, when a call reported any, those its provider's prompt cache read or wrote and those spent reasoning",
      properties: {
        input_tokens: { type: 'integer' },
        output_tokens: { type: 'integer' },
        total_tokens: { type: 'integer' },
        input_token_details: { type: 'object', properties: { cache_read: { type: 'integer' }, cache_creation: { type: 'integer' } } },
        output_token_details: { type: 'object', properties: { reasoning: { type: 'integer' } } },
      },
    },
    finish_reason: { type: 'string', description: "On success, when the run called a model: why its last model call ended, in the provider's words (`stop`, `end_turn`; `length` or `max_tokens` when the answer was cut at the token limit)" },
    created_at: { type: 'string', format: 'date-time' },
    updated_at: { type: 'string', format: 'date-time' },
  },
};
/** The bytes of a listing answered at once; past them the rest of it is written as its runs are read. */
const LIST_ANSWER_BUFFER = 1024 * 1024;
const runParams = { params: { type: 'object', properties: { run_id: { type: 'string' } } } };

/**
 * A query parameter in [min, max] written in decimal digits (`5`, and `2.5` where not `whole`), or the
 * default when absent. `Number()` alone took `0x10`, `1e1`, `+5`, `5.0`, `0b11` and an empty value.
 */
function numberParam(value: unknown, name: string, min: number, max: number, fallback: number, whole = false): number {
  if (value === undefined) return fallback;
  // Any number of decimals (`1.9999999` was refused as out of range), within a length no number needs.
  const n = typeof value === 'string' && value.length <= 32 && (whole ? /^\d{1,6}$/ : /^\d{1,6}(\.\d+)?$/).test(value) ? Number(value) : Number.NaN;
  if (!Number.isFinite(n) || n < min || n > max) {
    const what = whole ? 'a whole number' : 'a number';
    throw new RunnelError('RUNNEL_ERR_BAD_REQUEST', `${name} must be ${what} from ${min} to ${max}`, { detail: [{ type: 'value_error', loc: ['query', name], msg: `must be ${what} from ${min} to ${max}` }] });
  }
  return n;
}

/** The `/metrics` endpoint of a run route: `runs` (submit, list), `runs_record`, `runs_wait`, `runs_stream`, `runs_cancel`. */
function runEndpoint(url: string): string {
  const last = url.split('/').pop() ?? '';
  if (last === 'runs') return 'runs';
  return last === ':run_id' ? 'runs_record' : `runs_${last}`;
}

/**
 * A chain's run routes; `hashed`: their copy under `/{path}/c/{config_hash}/`, where a run is submitted with the
 * URL's config (a `RemoteRunnable` made on such a URL submits, follows and cancels its runs there). The copies
 * are left out of the OpenAPI document, which lists the routes once.
 */
export const runRoutes: FastifyPluginAsync<{ chain: PreparedChain; hashed?: boolean }> = async (app, { chain, hashed = false }) => {
  const path = chain.spec.path;
  const tags = [path];
  countRequests(app, path, runEndpoint);
  if (hashed) {
    // Every route under the hash checks it (a cancel too): one that does not decode is a 400. After
    // authentication and the rate limit (a pre-handler).
    app.addHook('preHandler', async (request) => void decodeConfigHash((request.params as { config_hash?: string }).config_hash));
    app.addHook('onRoute', (route) => void (route.schema = { ...route.schema, hide: true }));
  }

  app.post<{ Params: { config_hash?: string } }>(
    '/runs',
    {
      schema: {
        tags,
        summary: `Run ${path} in the background`,
        body: { type: 'object', required: ['input'], properties: { input: {}, config: { type: 'object' }, kwargs: { description: 'Accepted and ignored.' }, webhook: { type: 'string', description: 'An https URL on a host of RUNNEL_WEBHOOK_HOSTS: the run record is POSTed there when the run ends, signed.' } } },
        response: { 202: { description: 'Queued: the run record (pending), with Location', ...runSchema }, ...errors },
      },
    },
    async (request, reply) => {
      const record = await submitRun(request, chain, 'run');
      return reply.code(202).header('location', `${path}/runs/${record.run_id}`).send(publicRun(record));
    },
  );

  app.get<{ Querystring: { status?: string; limit?: string } }>(
    '/runs',
    { schema: { tags, summary: `The caller's recent runs of ${path}, newest first`, querystring: { type: 'object', properties: { status: { type: 'string', enum: [...STATUSES] }, limit: { type: 'integer', minimum: 1, maximum: 100 } } }, response: { 200: { description: 'Runs', type: 'object', properties: { runs: { type: 'array', items: runSchema } } }, ...errors } } },
    async (request, reply) => {
      const status = request.query.status;
      if (status !== undefined && !STATUSES.includes(status as RunStatus)) {
        throw new RunnelError('RUNNEL_ERR_BAD_REQUEST', `status must be one of ${STATUSES.join(', ')}`, { detail: [{ type: 'enum', loc: ['query', 'status'], msg: `Input should be ${STATUSES.join(', ')}` }] });
      }
      const limit = numberParam(request.query.limit, 'limit', 1, 100, 20, true);
      const records = runQueue(request).store.each(request.identity, limit, { chain: path, status: status as RunStatus | undefined })[Symbol.asyncIterator]();
      // Each run as the schema serialises it (its fields, no more), the answer written as its runs are read.
      const serialize = reply.compileSerializationSchema(runSchema);
      const listed: string[] = [];
      let bytes = 0;
      reply.type('application/json; charset=utf-8');
      while (bytes <= LIST_ANSWER_BUFFER) {
        const next = await records.next();
        if (next.done === true) return reply.send(`{"runs":[${listed.join(',')}]}`);
        const run = serialize(publicRun(next.value));
        listed.push(run);
        bytes += run.length;
      }
      // A long answer (a hundred outputs of a megabyte each) goes out as its runs are read, a few at a time,
      // as fast as the client takes it — not built whole in memory first. A failure from here on cuts it, which
      // every HTTP client reports (a chunked answer without its end).
      async function* rest(): AsyncGenerator<string> {
        try {
          yield `{"runs":[${listed.splice(0).join(',')}`;
          for (let next = await records.next(); next.done !== true; next = await records.next()) yield `,${serialize(publicRun(next.value))}`;
          yield ']}';
        } finally {
          await records.return?.();
        }
      }
      return reply.send(Readable.from(rest(), { highWaterMark: 1 }));
    },
  );

  app.get<{ Params: { run_id: string } }>('/runs/:run_id', { schema: { tags, summary: 'A run record', ...runParams, response: { 200: { description: 'The run record', ...runSchema }, ...errors } } }, async (request) =>
    publicRun(await ownRun(request, chain, request.params.run_id)),
  );

  app.get<{ Params: { run_id: string }; Querystring: { timeout_s?: string } }>(
    '/runs/:run_id/wait',
    { schema: { tags, summary: 'Waits until the run ends (from any replica)', ...runParams, querystring: { type: 'object', properties: { timeout_s: { type: 'number', minimum: 0, maximum: 300 } } }, response: { 200: { description: 'The ended run', ...runSchema }, 408: { description: 'Still running after timeout_s: the record as it is now', ...runSchema }, ...errors } } },
    async (request, reply) => {
      const timeoutMs = numberParam(request.query.timeout_s, 'timeout_s', 0, 300, 30) * 1000;
      const deadline = performance.now() + timeoutMs;
      let record = await ownRun(request, chain, request.params.run_id);
      // Ended already: one read answers (no subscription to open and close).
      if (TERMINAL.has(record.status)) return reply.code(200).send(publicRun(record));
      const gone = new AbortController();
      whenClientGone(reply, () => gone.abort());
      // A stopping server ends the wait at once with RUNNEL_ERR_SHUTTING_DOWN (a 503): the run goes on, and its
      // client waits on another replica.
      if (request.server.runnel.shuttingDown) throw new RunnelError('RUNNEL_ERR_SHUTTING_DOWN', 'The server is shutting down');
      let stopped: RunnelError | undefined;
      const pending = new Answering(request.server.runnel.answers, (reason) => ((stopped = reason), gone.abort()), true);
      try {
        const watch = await runQueue(request).store.watch(record.run_id);
        try {
          record = await ownRun(request, chain, request.params.run_id);
          while (!TERMINAL.has(record.status) && !gone.signal.aborted) {
            const left = deadline - performance.now();
            if (left <= 0) break;
            await watch.next(Math.min(left, 1_000), gone.signal);
            record = await ownRun(request, chain, request.params.run_id);
          }
        } finally {
          watch.close();
        }
      } finally {
        pending.finish();
      }
      if (stopped !== undefined) {
        // Ended as the stop came: the answer it waited for, not a 503.
        if (TERMINAL.has(record.status)) return reply.code(200).send(publicRun(record));
        throw stopped;
      }
      if (gone.signal.aborted) {
        // Nobody to answer: the wait ends as a request whose client left (a 499 in the log and /metrics), not a 408.
        clientGone(request, 'runs_wait', path, reply.elapsedTime);
        return reply.hijack();
      }
      return reply.code(TERMINAL.has(record.status) ? 200 : 408).send(publicRun(record));
    },
  );

  app.get<{ Params: { run_id: string } }>(
    '/runs/:run_id/stream',
    { schema: { tags, summary: 'The run\'s stream (SSE), framed as /stream, every frame with an id; Last-Event-ID resumes after it', ...runParams, response: { 200: { description: 'Server-sent events: metadata, data..., end (or error); a finished run replays' }, 204: { description: 'The run has ended and nothing follows Last-Event-ID (it was the last frame): stop reconnecting', type: 'null' }, ...errors } } },
    async (request, reply) => {
      const record = await ownRun(request, chain, request.params.run_id);
      const queue = runQueue(request);
      const after = lastEventId(request, queue);
      // An id of the right shape that is none of this run's frames (another run's, one past its end) would
      // replay the whole run, or skip frames, as if it were: refused like a malformed one. A queued run's
      // clients have only read its log: an id past its last frame written was never sent.
      if (after !== undefined && !(await queue.store.hasFrame(record.run_id, after, record.kind === 'run'))) {
        throw new RunnelError('RUNNEL_ERR_BAD_REQUEST', "Last-Event-ID is not an event id of this run's stream", {
          detail: [{ type: 'value_error', loc: ['header', 'last-event-id'], msg: 'Not an event id of this stream' }],
        });
      }
      await sendRunStream(request, reply, record, after, joinFormat);
    },
  );

  app.post<{ Params: { run_id: string } }>(
    '/runs/:run_id/cancel',
    { schema: { tags, summary: 'Cancels the run (from any replica); answers once it has ended, or after 2 s', ...runParams, response: { 200: { description: 'The run record', ...runSchema }, ...errors } } },
    async (request) => {
      refuseCrossSitePost(request);
      let record = await ownRun(request, chain, request.params.run_id);
      if (TERMINAL.has(record.status)) return publicRun(record);
      const queue = runQueue(request);
      const watch = await queue.store.watch(record.run_id);
      try {
        await queue.cancel(record.run_id);
        const deadline = performance.now() + 2_000;
        record = await ownRun(request, chain, request.params.run_id);
        while (!TERMINAL.has(record.status) && performance.now() < deadline) {
          await watch.next(250);
          record = await ownRun(request, chain, request.params.run_id);
        }
      } finally {
        watch.close();
      }
      return publicRun(record);
    },
  );
};
