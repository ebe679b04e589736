/**
 * `npm run openapi`: writes openapi/openapi.json, the OpenAPI 3.1 document of
 * the shipped chains (default configuration: no API keys). A test fails when
 * the committed file is stale; run this after changing a chain or a route.
 */
import { writeFileSync } from 'node:fs';
import { chains } from '../chains/index.js';
import { buildApp } from '../src/index.js';

/** The document as the server serves it, formatted for review. */
export async function openApiText(): Promise<string> {
  const app = await buildApp({ chains });
  await app.ready();
  const text = `${JSON.stringify(app.swagger(), null, 2)}\n`;
  await app.close();
  return text;
}

if (process.argv[1]?.endsWith('openapi.ts')) {
  writeFileSync(new URL('../openapi/openapi.json', import.meta.url), await openApiText());
  console.log('openapi/openapi.json written');
}
