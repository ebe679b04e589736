import { describe, expect, it } from 'vitest';
import { queryTerms, stem, terms } from '../../src/index.js';

describe('stem (Porter, 1980)', () => {
  it('gives the stems of the algorithm paper for every step', () => {
    const cases: Record<string, string> = {
      caresses: 'caress', ponies: 'poni', ties: 'ti', caress: 'caress', cats: 'cat',
      feed: 'feed', agreed: 'agre', plastered: 'plaster', bled: 'bled', motoring: 'motor', sing: 'sing',
      conflated: 'conflat', troubled: 'troubl', sized: 'size', hopping: 'hop', tanned: 'tan', falling: 'fall',
      hissing: 'hiss', fizzed: 'fizz', failing: 'fail', filing: 'file', happy: 'happi', sky: 'sky',
      relational: 'relat', conditional: 'condit', rational: 'ration', valenci: 'valenc', digitizer: 'digit',
      conformabli: 'conform', radicalli: 'radic', differentli: 'differ', vileli: 'vile', analogousli: 'analog',
      vietnamization: 'vietnam', predication: 'predic', operator: 'oper', feudalism: 'feudal', decisiveness: 'decis',
      hopefulness: 'hope', callousness: 'callous', formaliti: 'formal', sensitiviti: 'sensit', sensibiliti: 'sensibl',
      triplicate: 'triplic', formative: 'form', formalize: 'formal', electriciti: 'electr', electrical: 'electr',
      hopeful: 'hope', goodness: 'good', revival: 'reviv', allowance: 'allow', inference: 'infer', airliner: 'airlin',
      gyroscopic: 'gyroscop', adjustable: 'adjust', defensible: 'defens', irritant: 'irrit', replacement: 'replac',
      adjustment: 'adjust', dependent: 'depend', adoption: 'adopt', communism: 'commun', activate: 'activ',
      angulariti: 'angular', homologous: 'homolog', effective: 'effect', bowdlerize: 'bowdler', probate: 'probat',
      rate: 'rate', cease: 'ceas', controll: 'control', roll: 'roll', generalizations: 'gener', connections: 'connect',
    };
    for (const [word, expected] of Object.entries(cases)) expect([word, stem(word)]).toEqual([word, expected]);
  });

  it('leaves short words, digits and other scripts as they are', () => {
    expect(['is', '404', 'h2', 'größe', 'café'].map(stem)).toEqual(['is', '404', 'h2', 'größe', 'café']);
  });
});

describe('terms', () => {
  it('drops stop words, stems the rest and splits identifiers into their parts too', () => {
    expect(terms('How are the connections pooled?')).toEqual(['connect', 'pool']);
    expect(terms('Set messageKey or HTTPServer, max_retries')).toEqual(['set', 'messagekei', 'messag', 'kei', 'httpserver', 'http', 'server', 'max_retries', 'max', 'retri']);
    // A /rag probe: `IPv6` gave the term `pv6`, and `URLs` `ur` and `ls`.
    expect(terms('IPv6 URLs IDs XMLHttpRequest APIKey')).toEqual(['ipv6', 'url', 'id', 'xmlhttprequest', 'xml', 'http', 'request', 'apikei', 'api', 'kei']);
    expect(queryTerms('logs and logging and logs')).toEqual(['log']);
  });

  it("drops the pieces of contractions, which the split at an apostrophe leaves: shouldn't is not a term", () => {
    expect(terms("Why shouldn't I use fatal? Doesn't it flush? I'm sure it'll, you've, we'd")).toEqual(['fatal', 'flush', 'sure']);
    // A curly apostrophe splits the same way.
    expect(terms('It isn’t pooled')).toEqual(['pool']);
  });

  it('skips runs of letters too long to be words, and stops at a bound on huge texts', () => {
    expect(terms(`key ${'a'.repeat(41)} value`)).toEqual(['kei', 'valu']);
    expect(terms('word '.repeat(10_000))).toHaveLength(4096);
  });

  it('keeps a word whole through its combining marks, and reads a decomposed (NFD) word as its composed (NFC) form', () => {
    // Devanagari writes its vowels as combining marks: a word is one term, not its consonants.
    expect(terms('हिन्दी भाषा')).toEqual(['हिन्दी', 'भाषा']);
    // macOS and some editors save "café" as "cafe" + U+0301: a query typed composed must meet it.
    expect(terms('cafe\u0301 nai\u0308ve')).toEqual(terms('café naïve'));
    expect(terms('café naïve')).toEqual(['café', 'naïve']);
  });
});
