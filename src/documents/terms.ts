/**
 * The searchable terms of a text: lower-cased words, English stop words
 * dropped, Porter stems, code identifiers also split into their parts. The
 * lexical index of every store and the term-hashing embeddings both read
 * text through these, so they agree on what a word is.
 */
import { stem } from './stemmer.js';

/** The most terms one document indexes; the rest of a huge document is not searchable by words. */
export const MAX_TERMS_PER_DOCUMENT = 4096;
/** The longest term indexed; longer runs of letters (hashes, base64) are skipped. */
const MAX_TERM_LENGTH = 40;

// Words too common to say what a passage is about: Snowball's English list, plus the words every question asks with.
const STOP_WORDS = new Set(
  (
    'a about above after again against all am an and any are as at be because been before being below between both but by can could ' +
    'did do does doing don down during each few for from further had has have having he her here hers herself him himself his how i if ' +
    'in into is it its itself just me more most my myself no nor not now of off on once only or other our ours ourselves out over own same ' +
    'she should so some such than that the their theirs them themselves then there these they this those through to too under until up ' +
    'very was we were what when where which while who whom why will with would you your yours yourself yourselves ' +
    'also e g eg ie etc get gets got use used uses using way want wants tell explain happen happens one s t ' +
    'd ll m re ve aren couldn didn doesn hadn hasn haven isn mightn mustn needn shan shouldn wasn weren won wouldn'
  ).split(' '),
);

/**
 * Splits `fooBarBaz`, `foo_bar` and `HTTPServer` into their lower-case parts. An acronym ends before a capital
 * that starts a word of two letters or more: `IPv6`, `URLs` and `IDs` stay whole (not `i` + `pv6`, `ur` + `ls`).
 */
function identifierParts(word: string): string[] {
  return word
    .replace(/([a-z\d])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z]{2,})/g, '$1 $2')
    .split(/[\s_]+/)
    .map((part) => part.toLowerCase())
    .filter((part) => part !== '');
}

function addTerm(out: string[], word: string): void {
  if (word.length > MAX_TERM_LENGTH || STOP_WORDS.has(word)) return;
  out.push(stem(word));
}

/**
 * The searchable terms of `text`, in order, repeats kept (term frequency
 * counts them). An identifier counts whole and by parts: `messageKey`
 * gives `messagekei`, `messag` and `kei`.
 *
 * @example
 * terms('How are the connections pooled?'); // ['connect', 'pool']
 */
export function terms(text: string): string[] {
  const out: string[] = [];
  // Composed (NFC), so "café" typed and "cafe" + U+0301 saved are one term; a word goes on through its combining
  // marks (\p{M}: Devanagari's vowel signs, an accent), which a split there would tear into letters.
  for (const match of text.normalize('NFC').matchAll(/[\p{L}\p{N}][\p{L}\p{M}\p{N}]*(?:_[\p{L}\p{M}\p{N}]+)*/gu)) {
    const word = match[0];
    const lower = word.toLowerCase();
    addTerm(out, lower);
    const parts = identifierParts(word);
    if (parts.length > 1) for (const part of parts) addTerm(out, part);
    if (out.length >= MAX_TERMS_PER_DOCUMENT) break;
  }
  return out;
}

/** The distinct terms of a query. */
export function queryTerms(text: string): string[] {
  return [...new Set(terms(text))];
}
