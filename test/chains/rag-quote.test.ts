import { describe, expect, it } from 'vitest';
import { answeringPart } from '../../chains/rag.js';

// The passage as the offline model sees it: formatSources flattens each passage to one line.
const flat = (text: string): string => text.replace(/\s+/g, ' ').trim();

describe('/rag offline quote', () => {
  // A /rag probe: a quote that started on a table row opened on the `| |` between two rows.
  it('reads a table row as a sentence: the quote starts on its first cell', () => {
    const passage = flat(`The faults and their answers:

| fault | status | code |
|:------|-------:|------|
| Redis down | 503 | RUNNEL_ERR_REDIS_UNAVAILABLE |
| a slow model | 504 | RUNNEL_ERR_TIMEOUT. |
| Postgres down | 503 | RUNNEL_ERR_DATABASE_UNAVAILABLE |`);
    expect(answeringPart(passage, 'What answers a slow model?')).toBe('a slow model, 504, RUNNEL_ERR_TIMEOUT. Postgres down, 503, RUNNEL_ERR_DATABASE_UNAVAILABLE');
    expect(answeringPart(passage, 'Which faults are there?')).toMatch(/^The faults and their answers: fault, status, code\. Redis down, 503/);
  });

  // A review: a cell `-` (nothing to say) was taken for a separator and dropped.
  it('keeps a cell that is a dash', () => {
    // A second review: and a separator of one or two dashes (`|--|--|`, GFM's least) is still one.
    for (const separator of ['|---|:-:|', '|--|--|', '|-|-|', '| --- | --- |']) {
      expect(answeringPart(flat(`| option | default |\n${separator}\n| timeout | - |\n| retries | 2 |`), 'What is the timeout?')).toBe('timeout, -. retries, 2');
    }
  });

  it('leaves a bar that is not a table alone', () => {
    expect(answeringPart('Declare it `string | number`. Then call go().', 'How do I declare it?')).toBe('Declare it `string | number`. Then call go().');
  });
});
