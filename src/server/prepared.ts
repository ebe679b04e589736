/**
 * A chain ready to serve: its JSON Schemas, validators compiled once at
 * start, and the rules that turn what a client sends (`config` in the body
 * and in the `/c/{hash}/` URL) into the run's config. docs/protocol.md, "What a
 * client may configure", is the contract.
 */
import { randomUUID } from 'node:crypto';
import AjvModule, { type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import {
  mergeConfigs,
  publicMetadata,
  RunnelError,
  specJsonSchema,
  toJsonSchema,
  type ErrorDetailItem,
  type JsonSchema,
  type Runnable,
  type RunnableConfig,
} from '../core/index.js';
import type { Tracing } from '../observability/index.js';
import type { ChainSpec, ClientConfigKey, RequestContext } from './registry.js';
import { TRACE_SPAN, type TracedContext } from './request.js';

// ajv and ajv-formats are CommonJS with a default export.
const Ajv = AjvModule as unknown as typeof AjvModule.default;
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

/** How far into the value an error is: the parts of its path, and the missing or extra key it names. */
const errorDepth = (error: ErrorObject): number => error.instancePath.split('/').length + (error.keyword === 'required' || error.keyword === 'additionalProperties' ? 1 : 0);

/**
 * Ajv's errors with each failed union (`anyOf`, `oneOf`) reduced to the
 * branch the value came closest to: the one whose errors reach deepest into
 * it, then the one missing the fewest properties (a value that has `role`
 * meant the branch with `role`), then the fewest errors. Without this, a
 * message with a bad role got eleven errors, one per kind of message it was
 * not, and the one that mattered among them. Innermost unions first; a union
 * whose branches' errors it cannot tell apart (behind a `$ref`) is left whole.
 */
function closestBranches(errors: readonly ErrorObject[]): ErrorObject[] {
  let list = [...errors];
  const unions = list.filter((error) => error.keyword === 'anyOf' || error.keyword === 'oneOf').sort((a, b) => b.schemaPath.length - a.schemaPath.length);
  for (const union of unions) {
    const prefix = `${union.schemaPath}/`;
    const branches = new Map<string, ErrorObject[]>();
    for (const error of list) {
      if (error.instancePath !== union.instancePath && !error.instancePath.startsWith(`${union.instancePath}/`)) continue;
      if (!error.schemaPath.startsWith(prefix)) continue;
      const branch = error.schemaPath.slice(prefix.length).split('/', 1)[0] as string;
      branches.set(branch, [...(branches.get(branch) ?? []), error]);
    }
    if (branches.size === 0) continue;
    const score = (branch: ErrorObject[]): [number, number, number] => [
      Math.max(...branch.map(errorDepth)),
      -branch.filter((error) => error.keyword === 'required').length,
      -branch.length,
    ];
    let best: ErrorObject[] | undefined;
    for (const branch of branches.values()) {
      if (best === undefined) best = branch;
      else {
        const [a, b] = [score(branch), score(best)];
        if (a[0] > b[0] || (a[0] === b[0] && (a[1] > b[1] || (a[1] === b[1] && a[2] > b[2])))) best = branch;
      }
    }
    // Branches told apart by one value (each message kind by its `type`): a value none takes hears them all.
    const [only] = best ?? [];
    if (best?.length === 1 && only?.keyword === 'enum') {
      const values = new Set<unknown>();
      for (const branch of branches.values()) {
        for (const error of branch) {
          if (error.keyword !== 'enum' || error.instancePath !== only.instancePath) continue;
          for (const value of (error.params as { allowedValues?: unknown[] }).allowedValues ?? []) values.add(value);
        }
      }
      const merged: ErrorObject = { ...only, params: { allowedValues: [...values] } };
      list = list.map((error) => (error === only ? merged : error));
      best = [merged];
    }
    const kept = new Set(best);
    list = list.filter((error) => error !== union && (kept.has(error) || !error.schemaPath.startsWith(prefix)));
  }
  return list;
}

/** An error's message, with the allowed values of an `enum` (a short list) named. */
function messageOf(error: ErrorObject): string {
  const allowed = error.keyword === 'enum' ? (error.params as { allowedValues?: unknown[] }).allowedValues : undefined;
  if (allowed !== undefined && allowed.length > 0 && allowed.length <= 20) return `must be one of ${allowed.map((value) => JSON.stringify(value)).join(', ')}`;
  return error.message ?? 'invalid';
}

/** Reads ajv's errors as LangServe-style detail items, `loc` relative to the checked value. */
export function detailOf(errors: readonly ErrorObject[] | null | undefined, prefix: (string | number)[] = []): ErrorDetailItem[] {
  return closestBranches(errors ?? []).map((error) => {
    const loc: (string | number)[] = [...prefix, ...error.instancePath.split('/').slice(1).map((part) => (/^\d+$/.test(part) ? Number(part) : part.replace(/~1/g, '/').replace(/~0/g, '~')))];
    if (error.keyword === 'required') loc.push((error.params as { missingProperty: string }).missingProperty);
    if (error.keyword === 'additionalProperties') loc.push((error.params as { additionalProperty: string }).additionalProperty);
    return { type: error.keyword, loc, msg: messageOf(error) };
  });
}

/** A chain's name for OpenAPI components: `/joke` → `Joke`, `/team/sum-up` → `TeamSumUp`. */
export function componentName(path: string): string {
  return path
    .split(/[/_-]+/)
    .filter((part) => part !== '')
    .map((part) => part[0]?.toUpperCase() + part.slice(1))
    .join('');
}

const CAMEL: Record<string, ClientConfigKey> = { recursionLimit: 'recursion_limit', maxConcurrency: 'max_concurrency', runId: 'run_id' };
/**
 * What a client's `tags` and `metadata` may hold (each of a request's two configs, its body's and its
 * `/c/{hash}`'s): every event of `/stream_events` carries them, so a request with 1 MB of metadata was
 * answered 1 MB an event, up to the body limit.
 */
const MAX_TAGS = 64;
const MAX_TAG_LENGTH = 256;
const MAX_METADATA_BYTES = 8192;
/** Refuses `tags` or `metadata` past their bounds, located at `loc`; `merged` says what with, when merged. */
function checkBounds(tags: unknown, metadata: unknown, loc: (string | number)[], merged = ''): void {
  const refuse = (field: string, msg: string): never => {
    const at = [...loc, field];
    throw new RunnelError('RUNNEL_ERR_CONFIG_INVALID', `Invalid config at ${JSON.stringify(at)}: ${msg}${merged}`, { detail: [{ type: 'too_long', loc: at, msg: msg + merged }] });
  };
  if (Array.isArray(tags) && tags.length > MAX_TAGS) refuse('tags', `tags must be at most ${MAX_TAGS}`);
  if (metadata !== undefined && Buffer.byteLength(JSON.stringify(metadata)) > MAX_METADATA_BYTES) refuse('metadata', `metadata must be at most ${MAX_METADATA_BYTES} bytes of JSON`);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True when `runnable` or anything inside it is a chat model (its token usage is then counted). */
function containsModel(runnable: Runnable<never, unknown>): boolean {
  return runnable.runType === 'chat_model' || runnable._children().some(containsModel);
}

/** A chain ready to serve; see the module comment. */
export class PreparedChain {
  readonly spec: ChainSpec<never, unknown>;
  readonly name: string;
  readonly inputSchema: JsonSchema;
  readonly outputSchema: JsonSchema;
  readonly configSchema: JsonSchema;
  readonly hasModel: boolean;
  private readonly validateInputFn: ValidateFunction;
  private readonly validateConfigFn: ValidateFunction;
  private readonly configurableDeclared: boolean;
  /** The config keys a client may set (`configKeys`). */
  private readonly allowedKeys: ReadonlySet<string>;
  /** Configurable fields every request must set, checked with the rest of the request (before any SSE byte). */
  private readonly requiredConfigurable: string[];

  /** Tracing, when it is on: every run of the chain gets its spans. */
  private readonly tracing: Tracing | undefined;

  constructor(spec: ChainSpec<never, unknown>, options: { tracing?: Tracing | undefined } = {}) {
    this.spec = spec;
    this.tracing = options.tracing;
    this.name = componentName(spec.path);
    const runnable = spec.runnable;
    this.inputSchema = spec.inputSchema !== undefined ? toJsonSchema(spec.inputSchema, { title: `${this.name}Input`, io: 'input' }) : { ...runnable.inputJsonSchema(), title: `${this.name}Input` };
    this.outputSchema = spec.outputSchema !== undefined ? toJsonSchema(spec.outputSchema, { title: `${this.name}Output` }) : { ...runnable.outputJsonSchema(), title: `${this.name}Output` };
    const specs = runnable.configSpecs();
    this.configurableDeclared = specs.length > 0;
    this.requiredConfigurable = [...new Set(specs.filter((s) => s.required === true).map((s) => s.id))];
    const allowed = new Set(spec.configKeys);
    this.allowedKeys = allowed;
    const properties: Record<string, JsonSchema> = {};
    if (allowed.has('configurable') && specs.length > 0) {
      properties.configurable = {
        title: 'Configurable',
        type: 'object',
        // Published open: a field the chain does not have is dropped (validated below), not refused.
        properties: Object.fromEntries(specs.map((s) => [s.id, specJsonSchema(s)])),
      };
    }
    if (allowed.has('tags')) properties.tags = { type: 'array', maxItems: MAX_TAGS, items: { type: 'string', maxLength: MAX_TAG_LENGTH } };
    if (allowed.has('metadata')) properties.metadata = { type: 'object', description: `At most ${MAX_METADATA_BYTES} bytes of JSON` };
    if (allowed.has('run_id')) properties.run_id = { type: 'string', format: 'uuid' };
    if (allowed.has('recursion_limit')) properties.recursion_limit = { type: 'integer', minimum: 1, maximum: 1000 };
    if (allowed.has('max_concurrency')) properties.max_concurrency = { type: 'integer', minimum: 1, maximum: 1000 };
    const validated: JsonSchema = { title: `${this.name}Config`, type: 'object', properties };
    // Published with what each call must set (a chain with history: configurable.session_id), so a generated
    // client or Swagger's form asks for it. Validated without: a request may take it from its /c/{hash} config,
    // and a missing one gets its own message once the two are merged (resolveConfig).
    const configurable = properties.configurable;
    this.configSchema =
      configurable !== undefined && this.requiredConfigurable.length > 0
        ? { ...validated, properties: { ...properties, configurable: { ...configurable, required: this.requiredConfigurable } }, required: ['configurable'] }
        : validated;
    this.hasModel = containsModel(runnable);

    const inputAjv = new Ajv({ strict: false, allErrors: true });
    addFormats(inputAjv);
    this.validateInputFn = inputAjv.compile(this.inputSchema);
    // Unknown configurable sub-keys are dropped silently, as LangServe does (`removeAdditional` takes out what
    // `additionalProperties: false` names); defaults are filled in.
    const configAjv = new Ajv({ strict: false, allErrors: true, removeAdditional: true, useDefaults: true });
    addFormats(configAjv);
    this.validateConfigFn = configAjv.compile(
      configurable === undefined ? validated : { ...validated, properties: { ...properties, configurable: { ...configurable, additionalProperties: false } } },
    );
  }

  /** Throws `RUNNEL_ERR_INPUT_INVALID` with located problems when `input` does not match the input schema. */
  checkInput(input: unknown, prefix: (string | number)[] = []): void {
    if (this.validateInputFn(input)) return;
    const detail = detailOf(this.validateInputFn.errors, prefix);
    // At the root, the input itself (`{"input": "cats"}` where an object goes): no empty path to read.
    const first = detail[0];
    const where = first === undefined ? '' : first.loc.length === 0 ? `: ${first.msg}` : ` at ${JSON.stringify(first.loc)}: ${first.msg}`;
    throw new RunnelError('RUNNEL_ERR_INPUT_INVALID', `Invalid input${where}`, { detail });
  }

  /** One client config (from the body or the hash): allowed keys only, both spellings, validated. */
  private clientConfig(raw: unknown, loc: (string | number)[]): Record<string, unknown> {
    if (raw === undefined) return {};
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
      throw new RunnelError('RUNNEL_ERR_CONFIG_INVALID', "Value for 'config' must be an object if provided", {
        detail: [{ type: 'dict_type', loc, msg: 'config must be an object' }],
      });
    }
    const allowed = this.allowedKeys;
    const picked: Record<string, unknown> = {};
    /** The keys sent in the JS client's spelling (`recursionLimit`): a problem is located as the client wrote it. */
    let spelled: Map<string, string> | undefined;
    for (const [key, value] of Object.entries(raw as Record<string, unknown>)) {
      const name = CAMEL[key] ?? key;
      if (allowed.has(name) && Object.hasOwn(raw, key)) {
        picked[name] = value;
        if (name !== key) (spelled ??= new Map()).set(name, key);
      }
    }
    const configurable = (raw as Record<string, unknown>).configurable;
    if (!allowed.has('configurable') && configurable !== undefined && configurable !== null && (typeof configurable !== 'object' || Object.keys(configurable).length > 0)) {
      throw new RunnelError(
        'RUNNEL_ERR_CONFIG_INVALID',
        'The config field `configurable` has been disallowed by the server. This can be modified server side by adding `configurable` to the list of `configKeys` in `defineChain`',
        { detail: [{ type: 'disallowed', loc: [...loc, 'configurable'], msg: 'configurable is not allowed for this chain' }] },
      );
    }
    // A chain with nothing configurable has no `configurable` property in its schema: drop it.
    if (!this.configurableDeclared) delete picked.configurable;
    if (picked.metadata !== null && typeof picked.metadata === 'object' && !Array.isArray(picked.metadata)) {
      // Internal metadata (keys starting with __) is the server's alone.
      picked.metadata = publicMetadata(picked.metadata as Record<string, unknown>);
    }
    if (!this.validateConfigFn(picked)) {
      const detail = detailOf(this.validateConfigFn.errors, loc).map((item) => {
        const sent = spelled?.get(String(item.loc[loc.length]));
        return sent === undefined ? item : { ...item, loc: [...loc, sent, ...item.loc.slice(loc.length + 1)] };
      });
      throw new RunnelError('RUNNEL_ERR_CONFIG_INVALID', `Invalid config${detail[0] ? ` at ${JSON.stringify(detail[0].loc)}: ${detail[0].msg}` : ''}`, { detail });
    }
    checkBounds(picked.tags, picked.metadata, loc);
    return picked;
  }

  /**
   * The run's config: the hash's config, then the body's (tags united,
   * metadata and configurable merged, later wins), then the server's
   * per-request modifier. The run is named after the chain's path; its id is
   * the client's only where `run_id` is allowed.
   */
  async resolveConfig(
    sources: {
      hash?: unknown;
      body?: unknown;
      bodyLoc?: (string | number)[];
      /** What the server decides for this request (a chat's `session_id` from a messages adapter): over the client's, unchecked. */
      server?: RunnableConfig;
    },
    context: RequestContext,
  ): Promise<{ config: RunnableConfig; runId: string; clientRunId: string | undefined }> {
    // A problem in the URL's config is located there (`["config_hash", "configurable", …]`), as the body's is under `config`.
    const fromHash = this.clientConfig(sources.hash, ['config_hash']);
    const fromBody = this.clientConfig(sources.body, sources.bodyLoc ?? []);
    const toRunnable = (c: Record<string, unknown>): RunnableConfig | undefined => {
      // Most requests send no config: nothing to build.
      let any = false;
      for (const _ in c) {
        any = true;
        break;
      }
      if (!any) return undefined;
      return {
        ...(c.tags === undefined ? {} : { tags: c.tags as string[] }),
        ...(c.metadata === undefined ? {} : { metadata: c.metadata as Record<string, unknown> }),
        ...(c.configurable === undefined ? {} : { configurable: c.configurable as Record<string, unknown> }),
        ...(c.recursion_limit === undefined ? {} : { recursionLimit: c.recursion_limit as number }),
        ...(c.max_concurrency === undefined ? {} : { maxConcurrency: c.max_concurrency as number }),
      };
    };
    // The caller's identity rides in internal metadata (clients cannot set `__` keys): histories scope by it, and
    // so do model caches, unless the chain shares its entries between callers (`cacheScope: 'shared'`).
    const internal = this.spec.cacheScope !== 'shared' ? { __identity: context.identity, __cache_partition: context.identity } : { __identity: context.identity };
    const client = mergeConfigs(toRunnable(fromHash), toRunnable(fromBody));
    // Each within the bounds, the URL's config and the body's can merge past them; the merged config is what
    // every event carries (and what a RemoteRunnable sends on to a server that bounds it too).
    if (sources.hash !== undefined && sources.body !== undefined) checkBounds(client.tags, client.metadata, sources.bodyLoc ?? [], ' with the config of the URL');
    let config = mergeConfigs(client, sources.server, { metadata: internal });
    // `cache-control: no-cache` asks for a fresh answer: the model caches bypass themselves.
    const cacheControl = context.headers['cache-control'];
    if (typeof cacheControl === 'string' && /\bno-(cache|store)\b/i.test(cacheControl)) config = mergeConfigs(config, { configurable: { cache: false } });
    if (this.spec.perRequestConfigModifier !== undefined) {
      config = mergeConfigs(config, await this.spec.perRequestConfigModifier(config, context));
    }
    for (const id of this.requiredConfigurable) {
      const value = config.configurable?.[id];
      if (value === undefined || value === null || value === '') {
        throw new RunnelError('RUNNEL_ERR_CONFIG_INVALID', `This chain needs config.configurable.${id}`, {
          // Where the client puts it: `["config", 1, …]` for the second item of a batch's list of configs.
          detail: [{ type: 'missing', loc: [...(sources.bodyLoc ?? ['config']), 'configurable', id], msg: 'Field required' }],
        });
      }
    }
    const clientRunId = (fromBody.run_id ?? fromHash.run_id) as string | undefined;
    if (clientRunId !== undefined && !UUID.test(clientRunId)) {
      throw new RunnelError('RUNNEL_ERR_CONFIG_INVALID', 'run_id must be a UUID', { detail: [{ type: 'uuid_parsing', loc: ['run_id'], msg: 'Input should be a valid UUID' }] });
    }
    const runId = clientRunId ?? randomUUID();
    if (this.tracing !== undefined) {
      // The runs' spans go under the request's; a background run carries the parent in its stored config.
      const span = (context as TracedContext)[TRACE_SPAN];
      const tracestate = span === undefined || span.traceState === '' ? undefined : span.traceState;
      config = mergeConfigs(config, {
        callbacks: [this.tracing.runCallback(span ?? context.traceparent)],
        ...(context.traceparent === undefined ? {} : { metadata: tracestate === undefined ? { __traceparent: context.traceparent } : { __traceparent: context.traceparent, __tracestate: tracestate } }),
      });
    }
    // The server owns the signal (client disconnects) and the run's name; clients never reach these keys.
    // `config` is this call's own object (made by mergeConfigs), so it is set in place.
    config.signal = undefined;
    config.timeout = undefined;
    config.runName = this.spec.path;
    config.runId = runId;
    return { config, runId, clientRunId };
  }
}
