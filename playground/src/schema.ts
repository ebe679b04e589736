/**
 * The JSON Schemas the server derives from a chain (draft 7 as zod writes
 * it): reference resolution, what kind of field a schema asks for, default
 * values, and validation of the subset the forms use — checked in the
 * browser so a wrong field is shown where it is and no request is sent.
 */
export type Schema = {
  $ref?: string;
  type?: string | string[];
  title?: string;
  description?: string;
  default?: unknown;
  enum?: unknown[];
  const?: unknown;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  /** One schema for every item, or (draft 7's tuples: `[role, content]`) one per position. */
  items?: Schema | Schema[];
  additionalItems?: boolean | Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minItems?: number;
  maxItems?: number;
  pattern?: string;
  $defs?: Record<string, Schema>;
  definitions?: Record<string, Schema>;
};

/** A problem at a path of the value. */
export interface Issue {
  path: (string | number)[];
  message: string;
  /** For a value outside an enum or a const: the values allowed there. */
  allowed?: unknown[];
}

export function resolve(schema: Schema, root: Schema): Schema {
  let current = schema;
  for (let guard = 0; current.$ref !== undefined && guard < 32; guard++) {
    const parts = current.$ref.replace(/^#\//, '').split('/').map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
    let target: unknown = root;
    for (const part of parts) target = (target as Record<string, unknown> | undefined)?.[part];
    if (target === undefined || typeof target !== 'object') return {};
    current = target as Schema;
  }
  return current;
}

const types = (schema: Schema): string[] => (schema.type === undefined ? [] : Array.isArray(schema.type) ? schema.type : [schema.type]);

/** The non-null alternative of `anyOf: [X, {type: null}]` or `type: [X, 'null']`, and whether null is allowed. */
export function unwrapNullable(schema: Schema, root: Schema): { schema: Schema; nullable: boolean } {
  const s = resolve(schema, root);
  const alternatives = s.anyOf ?? s.oneOf;
  if (alternatives !== undefined) {
    const rest = alternatives.filter((a) => !types(resolve(a, root)).includes('null') || types(resolve(a, root)).length > 1);
    if (rest.length === 1 && rest.length < alternatives.length) return { schema: resolve(rest[0] as Schema, root), nullable: true };
  }
  const t = types(s);
  if (t.includes('null') && t.length === 2) return { schema: { ...s, type: t.find((x) => x !== 'null') }, nullable: true };
  return { schema: s, nullable: false };
}

/** What kind of input a schema asks for. */
export type Kind = 'string' | 'number' | 'integer' | 'boolean' | 'enum' | 'object' | 'array' | 'messages' | 'json';

export function kindOf(schema: Schema, root: Schema): Kind {
  const s = unwrapNullable(schema, root).schema;
  if (s.enum !== undefined) return 'enum';
  if (s.const !== undefined) return 'enum';
  const t = types(s)[0];
  // A tuple (one schema per position) is edited as JSON.
  if (t === 'array' && Array.isArray(s.items)) return 'json';
  if (t === 'array' && s.items !== undefined && isMessageSchema(s.items as Schema, root)) return 'messages';
  if (t === 'string' || t === 'number' || t === 'integer' || t === 'boolean' || t === 'object' || t === 'array') {
    if (t === 'object' && s.properties === undefined) return 'json';
    return t;
  }
  return 'json';
}

/** A chat message schema: alternatives keyed by a `type` of human/ai/system/... with `content`. */
export function isMessageSchema(schema: Schema, root: Schema): boolean {
  const text = JSON.stringify(resolve(schema, root));
  return text.includes('"human"') && text.includes('"content"');
}

/** The value a fresh form starts with. */
export function defaultValue(schema: Schema, root: Schema): unknown {
  const { schema: s, nullable } = unwrapNullable(schema, root);
  if (s.default !== undefined) return structuredClone(s.default);
  if (nullable) return null;
  switch (kindOf(s, root)) {
    case 'string':
      return '';
    case 'number':
    case 'integer':
      return s.minimum ?? 0;
    case 'boolean':
      return false;
    case 'enum':
      return s.const ?? s.enum?.[0] ?? null;
    case 'array':
    case 'messages':
      return [];
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const [key, prop] of Object.entries(s.properties ?? {})) {
        if (s.required?.includes(key) || resolve(prop, root).default !== undefined) out[key] = defaultValue(prop, root);
      }
      return out;
    }
    default:
      return undefined;
  }
}

function typeMatches(value: unknown, type: string): boolean {
  switch (type) {
    case 'null':
      return value === null;
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'integer':
      return Number.isInteger(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'array':
      return Array.isArray(value);
    case 'object':
      return value !== null && typeof value === 'object' && !Array.isArray(value);
    default:
      return true;
  }
}

/** Whether `schema` (or one of its alternatives) is of `value`'s JSON type, whatever else it asks. */
function admitsTypeOf(value: unknown, schema: Schema, root: Schema, depth = 0): boolean {
  const s = resolve(schema, root);
  const alternatives = s.anyOf ?? s.oneOf;
  if (alternatives !== undefined && depth < 8) return alternatives.some((a) => admitsTypeOf(value, a, root, depth + 1));
  const t = types(s);
  return t.length === 0 || t.some((type) => typeMatches(value, type));
}

const pathKeyOf = (path: readonly (string | number)[]): string => path.map(String).join('.');

/** Validates `value`; an empty list means valid. */
export function validate(value: unknown, schema: Schema, root: Schema, path: (string | number)[] = []): Issue[] {
  const s = resolve(schema, root);
  const issues: Issue[] = [];
  const fail = (message: string) => issues.push({ path, message });
  for (const sub of s.allOf ?? []) issues.push(...validate(value, sub, root, path));
  const alternatives = s.anyOf ?? s.oneOf;
  if (alternatives !== undefined) {
    const results = alternatives.map((a) => validate(value, a, root, path));
    if (!results.some((r) => r.length === 0)) {
      // Report the closest alternative's issues, which names the field that is wrong: one of the value's own
      // type first (an array's, for a list: its item that is wrong, not "must be object"), then the one that
      // asks for the fewest fields the value does not have (`{role: "robot"}`: its role is wrong, not its
      // `type` missing), then the fewest issues.
      const ofItsType = (i: number): boolean => admitsTypeOf(value, alternatives[i] as Schema, root);
      const missing = (i: number): number => (results[i] as Issue[]).filter((issue) => issue.message === 'required' && issue.path.length === path.length + 1).length;
      const closer = (i: number, than: number): boolean => {
        if (ofItsType(i) !== ofItsType(than)) return ofItsType(i);
        if (missing(i) !== missing(than)) return missing(i) < missing(than);
        return (results[i] as Issue[]).length < (results[than] as Issue[]).length;
      };
      let closest = 0;
      for (let i = 1; i < results.length; i++) if (closer(i, closest)) closest = i;
      const best = results[closest] as Issue[];
      // Alternatives as close as the closest, each refusing the same field's value only (a message's `type`):
      // the values they allow, all of them (a probe: `{type: "alien"}` was told the first form's two).
      const ties = results.filter((_, i) => !closer(i, closest) && !closer(closest, i));
      const field = best.length === 1 ? best[0] : undefined;
      if (field?.allowed !== undefined && ties.every((r) => r.length === 1 && r[0]?.allowed !== undefined && pathKeyOf(r[0].path) === pathKeyOf(field.path))) {
        const allowed = [...new Map(ties.flatMap((r) => r[0]?.allowed ?? []).map((value) => [JSON.stringify(value), value])).values()];
        issues.push({ path: field.path, message: `must be one of ${allowed.map((value) => JSON.stringify(value)).join(', ')}`, allowed });
      } else {
        issues.push(...(best.length > 0 ? best : [{ path, message: 'matches none of the allowed forms' }]));
      }
    }
    return issues;
  }
  const t = types(s);
  if (t.length > 0 && !t.some((type) => typeMatches(value, type))) {
    fail(value === undefined || value === '' ? 'required' : `must be ${t.join(' or ')}`);
    return issues;
  }
  if (s.enum !== undefined && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) issues.push({ path, message: `must be one of ${s.enum.map((e) => JSON.stringify(e)).join(', ')}`, allowed: s.enum });
  if (s.const !== undefined && JSON.stringify(s.const) !== JSON.stringify(value)) issues.push({ path, message: `must be ${JSON.stringify(s.const)}`, allowed: [s.const] });
  if (typeof value === 'string') {
    if (s.minLength !== undefined && value.length < s.minLength) fail(s.minLength === 1 ? 'required' : `at least ${s.minLength} characters`);
    if (s.maxLength !== undefined && value.length > s.maxLength) fail(`at most ${s.maxLength} characters`);
    if (s.pattern !== undefined && !new RegExp(s.pattern, 'u').test(value)) fail(`must match ${s.pattern}`);
  }
  if (typeof value === 'number') {
    if (s.minimum !== undefined && value < s.minimum) fail(`at least ${s.minimum}`);
    if (s.maximum !== undefined && value > s.maximum) fail(`at most ${s.maximum}`);
    if (s.exclusiveMinimum !== undefined && value <= s.exclusiveMinimum) fail(`more than ${s.exclusiveMinimum}`);
    if (s.exclusiveMaximum !== undefined && value >= s.exclusiveMaximum) fail(`less than ${s.exclusiveMaximum}`);
  }
  if (Array.isArray(value)) {
    if (s.minItems !== undefined && value.length < s.minItems) fail(`at least ${s.minItems} items`);
    if (s.maxItems !== undefined && value.length > s.maxItems) fail(`at most ${s.maxItems} items`);
    if (Array.isArray(s.items)) {
      const positions = s.items;
      value.forEach((item, i) => {
        const at = positions[i];
        if (at !== undefined) issues.push(...validate(item, at, root, [...path, i]));
        else if (s.additionalItems === false) issues.push({ path: [...path, i], message: 'is not allowed here' });
        else if (typeof s.additionalItems === 'object') issues.push(...validate(item, s.additionalItems, root, [...path, i]));
      });
    } else if (s.items !== undefined) {
      const each = s.items;
      value.forEach((item, i) => issues.push(...validate(item, each, root, [...path, i])));
    }
  }
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const record = value as Record<string, unknown>;
    for (const key of s.required ?? []) if (record[key] === undefined) issues.push({ path: [...path, key], message: 'required' });
    for (const [key, prop] of Object.entries(s.properties ?? {})) if (record[key] !== undefined) issues.push(...validate(record[key], prop, root, [...path, key]));
    if (s.additionalProperties === false) {
      for (const key of Object.keys(record)) if (!(key in (s.properties ?? {}))) issues.push({ path: [...path, key], message: 'is not allowed here' });
    }
  }
  return issues;
}

/**
 * `value` with its objects' keys in the order their schema lists them (the
 * rest after, as they came): a chain's output reads as its author declared
 * it (`answer` before `sources`), not in the order the stream happened to
 * fill it in.
 */
export function inSchemaOrder(value: unknown, schema: Schema, root: Schema): unknown {
  const s = resolve(schema, root);
  const alternatives = s.anyOf ?? s.oneOf;
  if (alternatives !== undefined) {
    const fits = alternatives.find((a) => validate(value, a, root).length === 0);
    return fits === undefined ? value : inSchemaOrder(value, fits, root);
  }
  if (Array.isArray(value)) {
    const items = s.items;
    if (items === undefined) return value;
    return value.map((item, i) => {
      const at = Array.isArray(items) ? items[i] : items;
      return at === undefined ? item : inSchemaOrder(item, at, root);
    });
  }
  if (value === null || typeof value !== 'object') return value;
  const record = value as Record<string, unknown>;
  const properties = s.properties ?? {};
  const extra = typeof s.additionalProperties === 'object' ? s.additionalProperties : undefined;
  const keys = [...Object.keys(properties).filter((key) => Object.hasOwn(record, key)), ...Object.keys(record).filter((key) => !Object.hasOwn(properties, key))];
  // fromEntries defines own properties, so a `__proto__` key from the model stays a key.
  return Object.fromEntries(
    keys.map((key) => {
      const sub = Object.hasOwn(properties, key) ? properties[key] : extra;
      return [key, sub === undefined ? record[key] : inSchemaOrder(record[key], sub, root)];
    }),
  );
}
