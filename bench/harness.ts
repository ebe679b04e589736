/**
 * A small benchmark harness: contenders of one case run interleaved, round
 * after round, in one process, so they share the machine's noise; each
 * round's batch is long enough to time reliably, and the median per-call time
 * over the rounds is reported.
 */
export interface Contender {
  name: string;
  /** One call of the measured operation. */
  run: () => Promise<unknown>;
}

export interface CaseResult {
  name: string;
  /** Median µs per call, by contender name. */
  medians: Record<string, number>;
}

const now = (): number => performance.now();

async function timeBatch(run: () => Promise<unknown>, iterations: number): Promise<number> {
  const start = now();
  for (let i = 0; i < iterations; i++) await run();
  return now() - start;
}

/** How many calls make a batch of about `targetMs`. */
async function calibrate(run: () => Promise<unknown>, targetMs: number): Promise<number> {
  let iterations = 1;
  for (;;) {
    const elapsed = await timeBatch(run, iterations);
    if (elapsed >= targetMs / 4 || iterations >= 1 << 20) return Math.max(1, Math.ceil((iterations * targetMs) / Math.max(elapsed, 0.001)));
    iterations *= 4;
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** Runs every contender of a case for `rounds` interleaved rounds; returns medians in µs per call. */
export async function runCase(name: string, contenders: Contender[], options: { rounds?: number; targetMs?: number } = {}): Promise<CaseResult> {
  const rounds = options.rounds ?? 15;
  const targetMs = options.targetMs ?? 25;
  const iterations = new Map<string, number>();
  for (const contender of contenders) {
    await timeBatch(contender.run, 50); // warm up the JIT
    iterations.set(contender.name, await calibrate(contender.run, targetMs));
  }
  const samples = new Map<string, number[]>(contenders.map((c) => [c.name, []]));
  for (let round = 0; round < rounds; round++) {
    for (const contender of contenders) {
      const n = iterations.get(contender.name) as number;
      const elapsed = await timeBatch(contender.run, n);
      samples.get(contender.name)?.push((elapsed * 1000) / n);
    }
  }
  const medians: Record<string, number> = {};
  for (const [contender, values] of samples) medians[contender] = median(values);
  return { name, medians };
}

/** Formats µs for a table cell. */
export function formatMicros(us: number | undefined): string {
  if (us === undefined) return '—';
  if (us >= 1000) return `${(us / 1000).toFixed(2)} ms`;
  if (us >= 10) return `${us.toFixed(1)} µs`;
  return `${us.toFixed(2)} µs`;
}

/** Prints a markdown table of the cases with ratios. */
export function printTable(results: CaseResult[], columns: { floor: string; ours: string; peer: string }): void {
  const { floor, ours, peer } = columns;
  const header = `| case | ${floor} | ${ours} | ${peer} | ${ours} / ${floor} | ${peer} / ${ours} |`;
  console.log(header);
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const result of results) {
    const f = result.medians[floor];
    const o = result.medians[ours] as number;
    const p = result.medians[peer];
    const overFloor = f === undefined ? '—' : `${(o / f).toFixed(1)}×`;
    const peerOver = p === undefined ? '—' : `${(p / o).toFixed(1)}×`;
    console.log(`| ${result.name} | ${formatMicros(f)} | ${formatMicros(o)} | ${formatMicros(p)} | ${overFloor} | ${peerOver} |`);
  }
}
