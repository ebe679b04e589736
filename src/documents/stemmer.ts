/**
 * Porter's stemming algorithm (M. F. Porter, 1980, "An algorithm for suffix
 * stripping"): `connections`, `connected` and `connecting` all become
 * `connect`, so a question's words meet the same words inflected otherwise
 * in a passage. English only; a word it does not know is left as it is.
 */

const isConsonant = (word: string, i: number): boolean => {
  const ch = word[i];
  if (ch === 'a' || ch === 'e' || ch === 'i' || ch === 'o' || ch === 'u') return false;
  if (ch === 'y') return i === 0 || !isConsonant(word, i - 1);
  return true;
};

/** The measure m of a stem: the number of vowel-consonant sequences, [C](VC)^m[V]. */
function measure(stem: string): number {
  let m = 0;
  let i = 0;
  const n = stem.length;
  while (i < n && isConsonant(stem, i)) i++;
  while (i < n) {
    while (i < n && !isConsonant(stem, i)) i++;
    if (i >= n) break;
    while (i < n && isConsonant(stem, i)) i++;
    m++;
  }
  return m;
}

const hasVowel = (stem: string): boolean => {
  for (let i = 0; i < stem.length; i++) if (!isConsonant(stem, i)) return true;
  return false;
};

const endsDoubleConsonant = (word: string): boolean => {
  const n = word.length;
  return n >= 2 && word[n - 1] === word[n - 2] && isConsonant(word, n - 1);
};

/** *o: the stem ends consonant-vowel-consonant, the last not w, x or y. */
const endsCvc = (word: string): boolean => {
  const n = word.length;
  if (n < 3 || !isConsonant(word, n - 1) || isConsonant(word, n - 2) || !isConsonant(word, n - 3)) return false;
  const last = word[n - 1];
  return last !== 'w' && last !== 'x' && last !== 'y';
};

/** Replaces the first suffix of `rules` that `word` ends with, when the stem before it passes `when`. */
function replaceSuffix(word: string, rules: readonly (readonly [string, string])[], when: (stem: string) => boolean): string {
  for (const [suffix, replacement] of rules) {
    if (!word.endsWith(suffix)) continue;
    const stem = word.slice(0, word.length - suffix.length);
    return when(stem) ? stem + replacement : word;
  }
  return word;
}

const STEP2: readonly (readonly [string, string])[] = [
  ['ational', 'ate'], ['tional', 'tion'], ['enci', 'ence'], ['anci', 'ance'], ['izer', 'ize'], ['bli', 'ble'],
  ['alli', 'al'], ['entli', 'ent'], ['eli', 'e'], ['ousli', 'ous'], ['ization', 'ize'], ['ation', 'ate'],
  ['ator', 'ate'], ['alism', 'al'], ['iveness', 'ive'], ['fulness', 'ful'], ['ousness', 'ous'], ['aliti', 'al'],
  ['iviti', 'ive'], ['biliti', 'ble'], ['logi', 'log'],
];
// Longest suffix first, so `ational` wins over `tional`.
const STEP2_SORTED = [...STEP2].sort((a, b) => b[0].length - a[0].length);
const STEP3: readonly (readonly [string, string])[] = [
  ['icate', 'ic'], ['ative', ''], ['alize', 'al'], ['iciti', 'ic'], ['ical', 'ic'], ['ful', ''], ['ness', ''],
];
const STEP4 = ['ement', 'ance', 'ence', 'able', 'ible', 'ment', 'ant', 'ent', 'ism', 'ate', 'iti', 'ous', 'ive', 'ize', 'ion', 'al', 'er', 'ic', 'ou'];

/**
 * The Porter stem of a lower-case word.
 *
 * @example
 * stem('generalizations'); // 'gener'
 */
export function stem(input: string): string {
  if (input.length <= 2 || !/^[a-z]+$/.test(input)) return input;
  let word = input;

  // Step 1a: plurals.
  if (word.endsWith('sses')) word = word.slice(0, -2);
  else if (word.endsWith('ies')) word = word.slice(0, -2);
  else if (!word.endsWith('ss') && word.endsWith('s')) word = word.slice(0, -1);

  // Step 1b: -eed, -ed, -ing.
  let tidy = false;
  if (word.endsWith('eed')) {
    if (measure(word.slice(0, -3)) > 0) word = word.slice(0, -1);
  } else if (word.endsWith('ed') && hasVowel(word.slice(0, -2))) {
    word = word.slice(0, -2);
    tidy = true;
  } else if (word.endsWith('ing') && hasVowel(word.slice(0, -3))) {
    word = word.slice(0, -3);
    tidy = true;
  }
  if (tidy) {
    if (word.endsWith('at') || word.endsWith('bl') || word.endsWith('iz')) word += 'e';
    else if (endsDoubleConsonant(word) && !/[lsz]$/.test(word)) word = word.slice(0, -1);
    else if (measure(word) === 1 && endsCvc(word)) word += 'e';
  }

  // Step 1c: y → i after a vowel in the stem.
  if (word.endsWith('y') && hasVowel(word.slice(0, -1))) word = `${word.slice(0, -1)}i`;

  // Steps 2-3: double suffixes to single ones.
  word = replaceSuffix(word, STEP2_SORTED, (s) => measure(s) > 0);
  word = replaceSuffix(word, STEP3, (s) => measure(s) > 0);

  // Step 4: drop a suffix from a long enough stem.
  for (const suffix of STEP4) {
    if (!word.endsWith(suffix)) continue;
    const s = word.slice(0, word.length - suffix.length);
    if (measure(s) > 1 && (suffix !== 'ion' || /[st]$/.test(s))) word = s;
    break;
  }

  // Step 5: a final -e, and -ll.
  if (word.endsWith('e')) {
    const s = word.slice(0, -1);
    const m = measure(s);
    if (m > 1 || (m === 1 && !endsCvc(s))) word = s;
  }
  if (measure(word) > 1 && endsDoubleConsonant(word) && word.endsWith('l')) word = word.slice(0, -1);
  return word;
}
