/**
 * `npm run openapi`: writes openapi/openapi.json, the OpenAPI 3.1 document of
 * the shipped chains (default configuration: no API keys). A test fails when
 * the committed file is stale; run this after changing a chain or a route.
 */
import { writeFileSync } from 'node:fs';
import { createChains } from '../chains/index.js';
import { buildApp, connectServices } from '../src/index.js';

/** The document as the server serves it, formatted for review (no keys, no services: the schemas do not depend on them). */
export async function openApiText(): Promise<string> {
  const services = await connectServices({});
  const { chains } = createChains({ services, env: {} });
  const app = await buildApp({ chains, services });
  await app.ready();
  const text = `${JSON.stringify(app.swagger(), null, 2)}\n`;
  await app.close();
  return text;
}

if (process.argv[1]?.endsWith('openapi.ts')) {
  writeFileSync(new URL('../openapi/openapi.json', import.meta.url), await openApiText());
  console.log('openapi/openapi.json written');
}
