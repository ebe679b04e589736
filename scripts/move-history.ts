/**
 * `npm run history:move -- [--namespace NAME] [--dry-run]`
 *
 * Chat histories used to be kept under `runnel:history` whatever the
 * deployment's `RUNNEL_RUN_NAMESPACE`; they are now under
 * `{namespace}:history`, so deployments sharing a Redis keep their callers
 * apart. A deployment with a namespace other than `runnel` finds its earlier
 * conversations again by moving them under its own: this renames every
 * `runnel:history:*` key of the Redis at REDIS_URL to `{namespace}:history:*`
 * (each keeps its time to live), never over a key that exists there already,
 * and prints what it moved and what it left. Run it once, for the deployment
 * that owned those conversations — on a Redis several deployments shared,
 * the old keys do not say whose they were — between stopping the old version
 * and starting the new one: a conversation the new version continues first
 * exists under the namespace, and its old turns would stay where they were.
 * The response cache is not moved; it fills again.
 */
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { redactUrlCredentials } from '../src/observability/index.js';

const LEGACY = 'runnel:history:';

const USAGE = 'usage: REDIS_URL=redis://… npm run history:move -- [--namespace NAME] [--dry-run]';
// A mistyped option (`--namesapce`) or `--help` threw parseArgs's TypeError with its stack: said as ingest says it.
let parsed;
try {
  parsed = parseArgs({ options: { namespace: { type: 'string' }, 'dry-run': { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false } } });
} catch (error) {
  console.error(`history:move: ${error instanceof Error ? error.message : String(error)}\n${USAGE}`);
  process.exit(2);
}
const { values } = parsed;
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const namespace = values.namespace ?? process.env.RUNNEL_RUN_NAMESPACE ?? 'runnel';
const url = process.env.REDIS_URL;
if (url === undefined || url === '') {
  console.error('history:move: REDIS_URL is required (the Redis that holds the histories)');
  process.exit(2);
}
if (!/^[\w:-]{1,64}$/.test(namespace)) {
  console.error('history:move: the namespace takes letters, digits, _, - and : only (1 to 64), as RUNNEL_RUN_NAMESPACE does');
  process.exit(2);
}
// Its own keys would match the old ones, and be moved again, its runs and queue with them.
if (namespace === 'runnel:history' || namespace.startsWith('runnel:history:')) {
  console.error('history:move: a namespace under runnel:history would take its own keys for old ones; choose another');
  process.exit(2);
}
if (namespace === 'runnel') {
  console.log('history:move: the namespace is runnel, whose histories are where they were; nothing to move');
  process.exit(0);
}

const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
redis.on('error', () => {});
try {
  await redis.connect();
  let moved = 0;
  let kept = 0;
  let gone = 0;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${LEGACY}*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      // A history is a list; anything else under the prefix is not one of Runnel's, and stays.
      const type = await redis.type(key);
      if (type === 'none') {
        gone++;
        continue;
      }
      if (type !== 'list') {
        kept++;
        continue;
      }
      const target = `${namespace}:history:${key.slice(LEGACY.length)}`;
      if (values['dry-run']) {
        if ((await redis.exists(target)) === 1) kept++;
        else moved++;
        continue;
      }
      // RENAMENX keeps the key's TTL, and refuses when the target exists: a conversation this deployment
      // holds under its namespace already is never overwritten. One that expired since the SCAN is gone.
      const renamed = await redis.renamenx(key, target).catch((error: unknown) => {
        if (error instanceof Error && /no such key/i.test(error.message)) return -1;
        throw error;
      });
      if (renamed === 1) moved++;
      else if (renamed === -1) gone++;
      else kept++;
    }
  } while (cursor !== '0');
  const verb = values['dry-run'] ? 'would move' : 'moved';
  console.log(`history:move: ${verb} ${moved} conversations to ${namespace}:history; ${kept} left where they were (one of the same name is there already, or not a history); ${gone} expired meanwhile`);
} catch (error) {
  console.error(`history:move: ${redactUrlCredentials(error instanceof Error ? error.message : String(error))}`);
  process.exitCode = 1;
} finally {
  redis.disconnect();
}
