/**
 * `npm run bench:frontends`: the frontends' protocols against LangServe's `/stream`, on the same chain
 * (`/fast`: 200 words, no delay) in one real server process on 127.0.0.1, 20 streams at a time, 4 s per
 * measure, alternating, 5 rounds (medians; the machine is noisy):
 *
 * - `/fast/ui_stream` (the AI SDK's UI message stream): `text-delta` parts per second;
 * - `/v1/chat/completions` with `stream: true` (OpenAI's chunks): content chunks per second;
 * - `/fast/stream`: `data` frames per second.
 *
 * Each protocol carries one event per output chunk, so events/s compare like for like (goal ≥ 0.9×).
 * The client shares the two cores and reads bigger frames for the other protocols (OpenAI's chunk is
 * six times a LangServe frame), so the server's own CPU time per event is printed beside them.
 */
import { randomUUID } from 'node:crypto';
import { eventsPerSecond, forgetNamespaces, median, serverCpuSeconds, startRunServer, stopRunServers } from './processes.js';

const say = (): { id: string; role: 'user'; parts: { type: 'text'; text: string }[] } => ({ id: randomUUID(), role: 'user', parts: [{ type: 'text', text: randomUUID() }] });

const routes = {
  stream: { name: '/fast/stream (LangServe)', path: '/fast/stream', body: () => ({ input: { topic: randomUUID() } }), marker: 'event: data' },
  ui: { name: '/fast/ui_stream (AI SDK UI message stream)', path: '/fast/ui_stream', body: () => ({ id: randomUUID(), messages: [say()], trigger: 'submit-message' }), marker: '"type":"text-delta"' },
  openai: {
    name: '/v1/chat/completions, stream: true (OpenAI)',
    path: '/v1/chat/completions',
    body: () => ({ model: 'fast', stream: true, messages: [{ role: 'user', content: randomUUID() }] }),
    marker: '"delta":{"content":',
  },
};
type Route = keyof typeof routes;

/** Events per second of one route, and the server's CPU µs per event meanwhile. */
async function measure(base: string, route: Route, seconds?: number): Promise<{ perSecond: number; cpuMicros: number }> {
  const { path, body, marker } = routes[route];
  const before = serverCpuSeconds(base);
  const { perSecond, events } = await eventsPerSecond(`${base}${path}`, body, marker, { seconds });
  return { perSecond, cpuMicros: ((serverCpuSeconds(base) - before) * 1e6) / events };
}

const namespace = `bench-${randomUUID()}`;
try {
  const base = (await startRunServer({ RUNNEL_RUN_NAMESPACE: namespace })) as string;
  const names = Object.keys(routes) as Route[];
  // Warm-up: every path compiled before it is timed.
  for (const route of names) await measure(base, route, 1);
  const rounds = Object.fromEntries(names.map((route) => [route, [] as { perSecond: number; cpuMicros: number }[]])) as Record<Route, { perSecond: number; cpuMicros: number }[]>;
  for (let round = 1; round <= 5; round++) {
    for (const route of names) rounds[route].push(await measure(base, route));
    console.log(`round ${round}: ${names.map((route) => `${routes[route].path} ${rounds[route].at(-1)?.perSecond.toFixed(0)} ev/s (${rounds[route].at(-1)?.cpuMicros.toFixed(2)} µs CPU)`).join(', ')}`);
  }
  // Each round's ratio pairs measures taken seconds apart, so the machine's drift between rounds cancels.
  const ratio = (route: Route): number => median(rounds[route].map((m, i) => m.perSecond / (rounds.stream[i]?.perSecond as number)));
  console.log("\nMedians of 5 rounds (the ratio: the median of the rounds' ratios):\n");
  console.log('| route | events/s | against /stream | goal | server CPU per event |\n|---|---:|---:|---|---:|');
  for (const route of names) {
    const paired = route === 'stream' ? undefined : ratio(route);
    const goal = paired === undefined ? '' : `≥ 0.9× ${paired >= 0.9 ? 'met' : 'MISSED'}`;
    console.log(
      `| ${routes[route].name} | ${median(rounds[route].map((m) => m.perSecond)).toFixed(0)} | ${paired === undefined ? '' : `${paired.toFixed(2)}×`} | ${goal} | ${median(rounds[route].map((m) => m.cpuMicros)).toFixed(2)} µs |`,
    );
  }
} finally {
  stopRunServers();
  await forgetNamespaces([namespace]);
}
