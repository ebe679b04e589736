/**
 * Metadata filters compiled to parameterised SQL over a `jsonb` column: the
 * same semantics as `matchesFilter` (the in-memory store's), so both pass one
 * contract. Keys were validated (`validateFilter`) and become text-array
 * parameters; values become jsonb parameters; no SQL is built from a user's
 * string.
 */
import { validateFilter, type Filter } from './filter.js';

/** A compiled filter: a SQL condition and its parameters, numbered from `firstParam`. */
export interface CompiledFilter {
  sql: string;
  params: unknown[];
}

export function compileFilter(filter: Filter, column: string, firstParam: number): CompiledFilter {
  validateFilter(filter);
  const params: unknown[] = [];
  const param = (value: unknown): string => {
    params.push(value);
    return `$${firstParam + params.length - 1}`;
  };
  const compile = (f: Filter): string => {
    const parts = Object.entries(f).map(([key, condition]) => {
      if (key === '$and' || key === '$or') {
        const subs = (condition as Filter[]).map((sub) => `(${compile(sub)})`);
        return `(${subs.join(key === '$and' ? ' AND ' : ' OR ')})`;
      }
      // The key's parameter is made on first use too: a condition that compiles to FALSE uses none.
      let keyParam: string | undefined;
      const pathOf = (): string => `${column} #> ${(keyParam ??= param(key.split('.')))}::text[]`;
      const ops = condition !== null && typeof condition === 'object' ? Object.entries(condition as Record<string, unknown>) : [['$eq', condition] as const];
      return ops
        .map(([op, operand]) => {
          // A parameter is made only where it is used (Postgres cannot type one it never sees).
          const jsonb = (): string => `${param(JSON.stringify(operand))}::jsonb`;
          switch (op) {
            case '$eq':
              return `(${pathOf()}) = ${jsonb()}`;
            case '$ne':
              return `(${pathOf()}) IS DISTINCT FROM ${jsonb()}`;
            case '$in':
              return `EXISTS (SELECT 1 FROM jsonb_array_elements(${jsonb()}) AS e(v) WHERE e.v = (${pathOf()}))`;
            case '$nin':
              return `NOT EXISTS (SELECT 1 FROM jsonb_array_elements(${jsonb()}) AS e(v) WHERE e.v = (${pathOf()}))`;
            default: {
              const sqlOp = { $gt: '>', $gte: '>=', $lt: '<', $lte: '<=' }[op as '$gt'];
              // Only numbers with numbers and strings with strings compare, as in memory. Strings compare by code
              // point (COLLATE "C": UTF-8's byte order), as the memory store does — not by the database's
              // collation, which a jsonb comparison follows (ICU's "en" put "Banana" after "b").
              if (typeof operand === 'number') return `(jsonb_typeof(${pathOf()}) = 'number' AND (${pathOf()}) ${sqlOp} ${jsonb()})`;
              if (typeof operand === 'string') return `(jsonb_typeof(${pathOf()}) = 'string' AND ((${pathOf()}) #>> '{}') COLLATE "C" ${sqlOp} (${param(operand)}::text COLLATE "C"))`;
              return 'FALSE';
            }
          }
        })
        .join(' AND ');
    });
    return parts.length === 0 ? 'TRUE' : parts.join(' AND ');
  };
  return { sql: compile(filter), params };
}
