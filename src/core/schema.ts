/**
 * JSON Schemas derived from a chain's zod schemas (zod 4's own converter,
 * draft-07, the dialect Fastify validates with), and the config schema that
 * lists a chain's configurable fields.
 */
import { z, type ZodType } from 'zod';

/** A JSON Schema document, as plain data. */
export type JsonSchema = Record<string, unknown>;

/** One configurable field or alternative, as `configJsonSchema()` lists it. */
export interface ConfigSpec {
  id: string;
  name?: string | undefined;
  description?: string | undefined;
  default: unknown;
  /** The value's schema; for alternatives, an enum of their keys. */
  schema?: ZodType | undefined;
  /** The keys of the alternatives, when this spec selects one. */
  options?: string[] | undefined;
  /** No default: every call must set it (`session_id` of a chain with history). Servers check it before running. */
  required?: boolean | undefined;
}

/**
 * Converts a zod schema to JSON Schema (draft-07), with `title` when the
 * schema has none. Types JSON cannot describe become `{}` (anything).
 *
 * @example
 * toJsonSchema(z.object({ topic: z.string() }), { title: 'JokeInput' })
 * // { title: 'JokeInput', type: 'object', properties: { topic: { type: 'string' } }, required: ['topic'], ... }
 */
export function toJsonSchema(schema: ZodType, options: { title?: string; io?: 'input' | 'output' } = {}): JsonSchema {
  const json = z.toJSONSchema(schema, {
    target: 'draft-7',
    io: options.io ?? 'output',
    unrepresentable: 'any',
  }) as JsonSchema;
  delete json.$schema;
  if (options.title !== undefined && json.title === undefined) return { title: options.title, ...json };
  return json;
}

function titleOf(id: string): string {
  return id
    .split(/[_\s-]+/)
    .filter((part) => part.length > 0)
    .map((part) => part[0]?.toUpperCase() + part.slice(1))
    .join(' ');
}

function schemaOfDefault(value: unknown): JsonSchema {
  switch (typeof value) {
    case 'string':
      return { type: 'string' };
    case 'number':
      return { type: Number.isInteger(value) ? 'integer' : 'number' };
    case 'boolean':
      return { type: 'boolean' };
    default:
      if (Array.isArray(value)) return { type: 'array' };
      if (value !== null && typeof value === 'object') return { type: 'object' };
      return {};
  }
}

/** The JSON Schema of one configurable spec: type, title, description and default. */
export function specJsonSchema(spec: ConfigSpec): JsonSchema {
  const base: JsonSchema =
    spec.options !== undefined
      ? { type: 'string', enum: spec.options }
      : spec.schema !== undefined
        ? toJsonSchema(spec.schema, { io: 'input' })
        : schemaOfDefault(spec.default);
  const out: JsonSchema = { title: spec.name ?? titleOf(spec.id), ...base };
  if (spec.description !== undefined) out.description = spec.description;
  if (spec.default !== undefined) out.default = spec.default;
  return out;
}

/**
 * The config schema of a chain: an object whose `configurable` property
 * lists every configurable field reachable in it (absent when there is none).
 */
export function configJsonSchema(specs: readonly ConfigSpec[], title: string): JsonSchema {
  const properties: Record<string, JsonSchema> = {};
  for (const spec of specs) properties[spec.id] = specJsonSchema(spec);
  return {
    title,
    type: 'object',
    properties:
      specs.length === 0 ? {} : { configurable: { title: 'Configurable', type: 'object', properties } },
  };
}
