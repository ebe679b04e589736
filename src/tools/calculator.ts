/**
 * A calculator for agents: a small recursive-descent parser over arithmetic
 * (never `eval`). Numbers, `+ - * / %`, `^` (right-associative), unary
 * signs, parentheses, the constants `pi` and `e`, and the functions `sqrt
 * abs round floor ceil ln log exp sin cos tan min max`. Expressions are at
 * most 500 characters and 64 levels deep; anything else is an error that
 * names the position.
 */
import { z } from 'zod';
import { RunnelError } from '../core/index.js';
import { tool } from './tool.js';

const MAX_LENGTH = 500;
const MAX_DEPTH = 64;

const CONSTANTS: Readonly<Record<string, number>> = { pi: Math.PI, e: Math.E };
const FUNCTIONS: Readonly<Record<string, { arity: [number, number]; fn: (...args: number[]) => number }>> = {
  sqrt: { arity: [1, 1], fn: Math.sqrt },
  abs: { arity: [1, 1], fn: Math.abs },
  round: { arity: [1, 1], fn: Math.round },
  floor: { arity: [1, 1], fn: Math.floor },
  ceil: { arity: [1, 1], fn: Math.ceil },
  ln: { arity: [1, 1], fn: Math.log },
  log: { arity: [1, 1], fn: Math.log10 },
  exp: { arity: [1, 1], fn: Math.exp },
  sin: { arity: [1, 1], fn: Math.sin },
  cos: { arity: [1, 1], fn: Math.cos },
  tan: { arity: [1, 1], fn: Math.tan },
  min: { arity: [1, 32], fn: Math.min },
  max: { arity: [1, 32], fn: Math.max },
};

type Token = { kind: 'number'; value: number; at: number } | { kind: 'name'; value: string; at: number } | { kind: 'op'; value: string; at: number };

function syntaxError(message: string): RunnelError {
  return new RunnelError('RUNNEL_ERR_INPUT_INVALID', message);
}

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  const pattern = /(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|([A-Za-z_]\w*)|(\*\*|[-+*/%^(),×÷])/y;
  let at = 0;
  while (at < text.length) {
    if (/\s/.test(text[at] as string)) {
      at++;
      continue;
    }
    pattern.lastIndex = at;
    const match = pattern.exec(text);
    if (match === null) throw syntaxError(`Unexpected character ${JSON.stringify(text[at])} at position ${at + 1}`);
    if (match[1] !== undefined) tokens.push({ kind: 'number', value: Number(match[1]), at });
    else if (match[2] !== undefined) tokens.push({ kind: 'name', value: match[2].toLowerCase(), at });
    else {
      const op = match[3] as string;
      tokens.push({ kind: 'op', value: op === '**' ? '^' : op === '×' ? '*' : op === '÷' ? '/' : op, at });
    }
    at = pattern.lastIndex;
  }
  return tokens;
}

/**
 * Evaluates an arithmetic expression.
 *
 * @example
 * evaluateExpression('2 * (3 + 4) ^ 2'); // 98
 */
export function evaluateExpression(expression: string): number {
  if (typeof expression !== 'string') throw syntaxError('The expression must be a string');
  if (expression.length > MAX_LENGTH) throw syntaxError(`The expression is longer than ${MAX_LENGTH} characters`);
  const tokens = tokenize(expression);
  if (tokens.length === 0) throw syntaxError('The expression is empty');
  let position = 0;
  let depth = 0;

  const peek = (): Token | undefined => tokens[position];
  const isOp = (value: string): boolean => {
    const token = peek();
    return token?.kind === 'op' && token.value === value;
  };
  const where = (): string => {
    const token = peek();
    return token === undefined ? 'at the end' : `at position ${token.at + 1}`;
  };
  const expect = (value: string): void => {
    if (!isOp(value)) throw syntaxError(`Expected ${JSON.stringify(value)} ${where()}`);
    position++;
  };
  const nested = <T>(fn: () => T): T => {
    if (++depth > MAX_DEPTH) throw syntaxError(`The expression nests deeper than ${MAX_DEPTH} levels`);
    try {
      return fn();
    } finally {
      depth--;
    }
  };

  // sum := product (('+' | '-') product)*
  const sum = (): number =>
    nested(() => {
      let value = product();
      while (isOp('+') || isOp('-')) {
        const op = (tokens[position++] as Token).value;
        const right = product();
        value = op === '+' ? value + right : value - right;
      }
      return value;
    });
  // product := unary (('*' | '/' | '%') unary)*
  const product = (): number => {
    let value = unary();
    while (isOp('*') || isOp('/') || isOp('%')) {
      const op = (tokens[position++] as Token).value;
      const right = unary();
      if ((op === '/' || op === '%') && right === 0) throw syntaxError('Division by zero');
      value = op === '*' ? value * right : op === '/' ? value / right : value % right;
    }
    return value;
  };
  // unary := ('-' | '+') unary | power
  const unary = (): number =>
    nested(() => {
      if (isOp('-')) {
        position++;
        return -unary();
      }
      if (isOp('+')) {
        position++;
        return unary();
      }
      return power();
    });
  // power := atom ('^' unary)?   (right-associative; -2^2 = -4, 2^-1 = 0.5)
  const power = (): number => {
    const base = atom();
    if (!isOp('^')) return base;
    position++;
    return base ** unary();
  };
  // atom := number | constant | name '(' sum (',' sum)* ')' | '(' sum ')'
  const atom = (): number => {
    const token = peek();
    if (token === undefined) throw syntaxError('The expression ends too early');
    if (token.kind === 'number') {
      position++;
      return token.value;
    }
    if (token.kind === 'name') {
      position++;
      const fn = FUNCTIONS[token.value];
      if (fn !== undefined && isOp('(')) {
        position++;
        const args = [sum()];
        while (isOp(',')) {
          position++;
          args.push(sum());
        }
        expect(')');
        const [least, most] = fn.arity;
        if (args.length < least || args.length > most) throw syntaxError(`${token.value} takes ${least === most ? least : `${least} to ${most}`} argument(s), got ${args.length}`);
        return fn.fn(...args);
      }
      const constant = Object.hasOwn(CONSTANTS, token.value) ? CONSTANTS[token.value] : undefined;
      if (constant !== undefined) return constant;
      throw syntaxError(`Unknown name ${JSON.stringify(token.value)} at position ${token.at + 1}`);
    }
    if (token.value === '(') {
      position++;
      const value = sum();
      expect(')');
      return value;
    }
    throw syntaxError(`Unexpected ${JSON.stringify(String(token.value))} at position ${token.at + 1}`);
  };

  const value = sum();
  if (position < tokens.length) throw syntaxError(`Unexpected ${JSON.stringify(String((tokens[position] as Token).value))} at position ${(tokens[position] as Token).at + 1}`);
  if (!Number.isFinite(value)) throw syntaxError('The result is not a finite number');
  return value;
}

/** Formats a result without float noise (0.1 + 0.2 → 0.3). */
export function formatNumber(value: number): string {
  return String(Number.parseFloat(value.toPrecision(12)));
}

/**
 * The calculator as a tool: `{expression}` → the result as text.
 *
 * @example
 * createToolCallingAgent({ model, tools: [calculatorTool()] });
 */
export function calculatorTool() {
  return tool(({ expression }) => formatNumber(evaluateExpression(expression)), {
    name: 'calculator',
    description: 'Evaluates an arithmetic expression: + - * / % ^, parentheses, pi, e, sqrt, abs, round, floor, ceil, ln, log, exp, sin, cos, tan, min, max.',
    schema: z.object({ expression: z.string().max(MAX_LENGTH).describe('The expression, e.g. "(12.5 + 7) * 3 ^ 2"') }),
  });
}
