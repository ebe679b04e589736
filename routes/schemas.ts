/** `GET /{path}/input_schema`, `/output_schema`, `/config_schema`: JSON Schemas derived from the chain. */
import type { PreparedChain } from '../src/server/prepared.js';

export function schemaHandler(chain: PreparedChain, which: 'input' | 'output' | 'config') {
  const schema = which === 'input' ? chain.inputSchema : which === 'output' ? chain.outputSchema : chain.configSchema;
  return async () => schema;
}
