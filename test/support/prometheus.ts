/**
 * Reads Prometheus's text exposition the way Prometheus does, so tests ask
 * for a series by its labels whatever order the client library writes them in.
 */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** Every sample of an exposition. Throws on a line that is neither a comment nor a sample. */
export function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = LINE.exec(line);
    if (match === null) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, name, value] of (match[2] ?? '').matchAll(LABEL)) labels[name as string] = (value as string).replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
    samples.push({ name: match[1] as string, labels, value: Number(match[3]) });
  }
  return samples;
}

/** The value of the one series named `name` with exactly `labels`, or undefined when there is none. */
export function sampleValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels);
  const found = parseMetrics(text).find(
    (sample) => sample.name === name && Object.keys(sample.labels).length === wanted.length && wanted.every(([key, value]) => sample.labels[key] === value),
  );
  return found?.value;
}

/** The sum over every series named `name` whose labels include `labels` (0 when there is none). */
export function sumOf(text: string, name: string, labels: Record<string, string> = {}): number {
  const wanted = Object.entries(labels);
  return parseMetrics(text)
    .filter((sample) => sample.name === name && wanted.every(([key, value]) => sample.labels[key] === value))
    .reduce((sum, sample) => sum + sample.value, 0);
}

/**
 * The names a query may use, from the `# TYPE` lines: a histogram's `_bucket`, `_sum` and `_count`, a
 * summary's quantiles, `_sum` and `_count`, any other metric's own name. Metrics without a series yet count too.
 */
export function metricNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const base = name as string;
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(base + suffix);
    else if (type === 'summary') for (const suffix of ['', '_sum', '_count']) names.add(base + suffix);
    else names.add(base);
  }
  return names;
}
