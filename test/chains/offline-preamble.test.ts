/**
 * A new user's probe: with `RUNNEL_MODEL=fake` and `OPENAI_API_KEY` both set (a compose file passing keys
 * through, the model pinned to the offline one for a demo), every answer began "Offline model (no
 * OPENAI_API_KEY or ANTHROPIC_API_KEY is set, …)" — untrue, and the first thing that user would check. The
 * preamble names both ways the offline model is chosen, and still the variables that switch it off.
 */
import { describe, expect, it } from 'vitest';
import { jokeChain } from '../../chains/joke.js';
import { connectServices } from '../../src/index.js';

async function joke(env: Record<string, string>): Promise<string> {
  const services = await connectServices({});
  try {
    return (await jokeChain({ services, env, offlineDelayMs: 0 }).runnable.invoke({ topic: 'cats' })) as string;
  } finally {
    await services.close();
  }
}

describe("the offline model's preamble", () => {
  it('does not say no key is set when RUNNEL_MODEL=fake chose it beside a key', async () => {
    const pinned = await joke({ RUNNEL_MODEL: 'fake', OPENAI_API_KEY: 'sk-probe' });
    expect(pinned).toMatch(/^Offline model \(/);
    expect(pinned).not.toContain('is set');
    expect(pinned).toContain('RUNNEL_MODEL=fake');
  });

  it('without a key, names the keys that bring a real model', async () => {
    const keyless = await joke({});
    expect(keyless).toMatch(/^Offline model \(.*OPENAI_API_KEY.*ANTHROPIC_API_KEY.*\): why did the cats cross the road\?/);
  });
});
