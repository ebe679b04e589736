import { describe, expect, it } from 'vitest';
import { calculatorTool, evaluateExpression, formatNumber } from '../../src/index.js';

describe('evaluateExpression', () => {
  it.each([
    ['1 + 2 * 3', 7],
    ['(1 + 2) * 3', 9],
    ['2 ^ 3 ^ 2', 512],
    ['2 ** 10', 1024],
    ['-2 ^ 2', -4],
    ['2 ^ -1', 0.5],
    ['--3', 3],
    ['10 % 4', 2],
    ['7 / 2', 3.5],
    ['.5 + 1.5e2', 150.5],
    ['sqrt(16) + abs(-3)', 7],
    ['max(1, 5, 3) - min(4, 2)', 3],
    ['round(2 * PI)', 6],
    ['log(1000) + ln(e)', 4],
    ['6 × 7 ÷ 2', 21],
  ])('%s = %d', (expression, expected) => {
    expect(evaluateExpression(expression)).toBeCloseTo(expected, 12);
  });

  it.each([
    ['', /empty/],
    ['1 +', /ends too early/],
    ['(1 + 2', /Expected "\)" at the end/],
    ['1 2', /Unexpected "2" at position 3/],
    ['process.exit(1)', /Unexpected character "\." at position 8/],
    ['constructor', /Unknown name "constructor"/],
    ['__proto__', /Unknown name/],
    ['alert(1)', /Unknown name "alert"/],
    ['1 / 0', /Division by zero/],
    ['sqrt(1, 2)', /sqrt takes 1 argument/],
    ['10 ^ 400', /not a finite number/],
    ['1; 2', /Unexpected character ";"/],
    ['('.repeat(100) + '1' + ')'.repeat(100), /deeper than 64/],
    ['1+'.repeat(300) + '1', /longer than 500/],
  ])('refuses %j', (expression, message) => {
    expect(() => evaluateExpression(expression)).toThrow(message);
    try {
      evaluateExpression(expression);
    } catch (error) {
      expect(error).toMatchObject({ code: 'RUNNEL_ERR_INPUT_INVALID' });
    }
  });

  it('formats results without float noise', () => {
    expect(formatNumber(evaluateExpression('0.1 + 0.2'))).toBe('0.3');
    expect(formatNumber(1e21)).toBe('1e+21');
  });

  it('as a tool, answers tool calls and returns errors to the model', async () => {
    const calculator = calculatorTool();
    expect(await calculator.invoke({ expression: '(12.5 + 7) * 2' })).toBe('39');
    const message = await calculator.invoke({ type: 'tool_call', name: 'calculator', id: 'c1', args: { expression: '2 +' } });
    expect(message).toMatchObject({ tool_call_id: 'c1', status: 'error' });
    expect(String((message as { content: unknown }).content)).toMatch(/ends too early/);
  });
});
