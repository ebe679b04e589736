/**
 * A probe: a playground bundle built again under a running server (`npm run build`, or a test run, which builds
 * it) broke every playground until a restart. The server had read the page once, and it named the assets of
 * the build before, which the new build deleted. The page is now the bundle's as it is.
 */
import { mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildApp, type ChainSpec } from '../../src/index.js';
import { echo } from '../support/server.js';

const dir = mkdtempSync(join(tmpdir(), 'runnel-bundle-'));
let app: FastifyInstance;

/** Writes a build: its page naming its one script, and the script. */
function build(script: string): void {
  mkdirSync(join(dir, 'assets'), { recursive: true });
  writeFileSync(join(dir, 'assets', script), `console.log(${JSON.stringify(script)});`);
  writeFileSync(join(dir, 'index.html'), `<!doctype html><html><head><meta name="runnel-chain" content="" /><script type="module" src="./assets/${script}"></script></head><body></body></html>`);
}

beforeAll(async () => {
  build('index-AAAA.js');
  app = await buildApp({ chains: [echo] as ChainSpec<never, unknown>[], playgroundDir: dir });
});
afterAll(async () => {
  await app?.close();
  rmSync(dir, { recursive: true, force: true });
});

it('serves the page of the bundle as it is now, with its assets, after a build under the running server', async () => {
  const before = await app.inject({ method: 'GET', url: '/echo/playground/' });
  expect(before.body).toContain('./assets/index-AAAA.js');
  expect(before.body).toContain('&#34;path&#34;:&#34;/echo&#34;');
  // The next build replaces the last: its page names a script of another name, and the old one is gone.
  unlinkSync(join(dir, 'assets', 'index-AAAA.js'));
  build('index-BBBBBB.js');
  const after = await app.inject({ method: 'GET', url: '/echo/playground/' });
  expect(after.body).toContain('./assets/index-BBBBBB.js');
  expect(after.body).toContain('&#34;path&#34;:&#34;/echo&#34;');
  const script = await app.inject({ method: 'GET', url: '/echo/playground/assets/index-BBBBBB.js' });
  expect([script.statusCode, script.body]).toEqual([200, 'console.log("index-BBBBBB.js");']);
  // A build under way (its page not written yet) is no page: said as before a build, not a broken one.
  unlinkSync(join(dir, 'index.html'));
  expect((await app.inject({ method: 'GET', url: '/echo/playground/' })).statusCode).toBe(404);
});
