/**
 * `GET /{path}/playground/` (and under `/c/{hash}/`): the browser
 * playground. One Vite bundle serves every chain: the page is the bundle's
 * index.html with the chain's path, description and playground kind in a
 * meta tag (escaped) and a relative link to the server's icon; its assets
 * come through @fastify/static from the bundle's `assets/` folder only, by
 * names that cannot leave it. The pages hold no data, so they load without
 * an API key (the page then asks for one); everything they fetch needs the
 * key as usual.
 */
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { errorBody } from '../src/server/http-errors.js';
import type { PreparedChain } from '../src/server/prepared.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Served without an API key (pages and assets that hold no data). */
    public?: boolean;
  }
}

/** The Content-Security-Policy of the playground: our own script and styles, requests to this origin only. */
export const PLAYGROUND_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

export interface PlaygroundOptions {
  chain: PreparedChain;
  /** The bundle's index.html as it is now, or undefined when the bundle is not built ({@link bundleTemplate}). */
  template: () => string | undefined;
}

/**
 * The index.html of the bundle in `dir` as it is at each call: read again once a build has replaced it, as
 * `npm run build` (and every test run) does under a running server — whose page, read once, named the assets of
 * the build before, which the new build had deleted (a probe). Undefined while the bundle is not built.
 */
export function bundleTemplate(dir: string): () => string | undefined {
  const file = join(dir, 'index.html');
  let read: { mtimeMs: number; size: number; text: string } | undefined;
  return () => {
    try {
      const { mtimeMs, size } = statSync(file);
      if (read?.mtimeMs !== mtimeMs || read.size !== size) {
        const text = readFileSync(file, 'utf8');
        // Caught between a build's truncate and its write: not built yet, and read again next time.
        if (text === '') return undefined;
        read = { mtimeMs, size, text };
      }
      return read.text;
    } catch {
      return undefined;
    }
  };
}

const escapeAttribute = (text: string): string => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
/** Asset names as Vite writes them: a name, a hash, an extension — no slash, no dot-dot, nothing encoded. */
const ASSET = /^[A-Za-z0-9_-]+\.(js|css)$/;

function secure(reply: FastifyReply): FastifyReply {
  return reply.header('content-security-policy', PLAYGROUND_CSP).header('x-content-type-options', 'nosniff').header('referrer-policy', 'no-referrer');
}

export const playgroundRoutes: FastifyPluginAsync<PlaygroundOptions> = async (app, { chain, template }) => {
  const spec = chain.spec;
  // configHashes: whether `{path}/c/{hash}/playground/` exists, so the page keeps its setup in the address only then.
  const meta = JSON.stringify({ path: spec.path, description: spec.description ?? '', playground: spec.playground, configHashes: spec.enabledEndpoints.includes('config_hashes') });
  // The icon is the server's /favicon.svg, reached relatively (up from {prefix}/playground/) so the page works under any prefix.
  const root = '../'.repeat(app.prefix.split('/').filter(Boolean).length + 1);
  const head = `<meta name="runnel-chain" content="${escapeAttribute(meta)}" />\n    <link rel="icon" type="image/svg+xml" href="${root}favicon.svg" />`;
  // The chain's page, made once for each version of the bundle's.
  let made: { from: string; page: string } | undefined;
  const current = (): string | undefined => {
    const from = template();
    if (from === undefined) return undefined;
    if (made?.from !== from) made = { from, page: from.replace('<meta name="runnel-chain" content="" />', head) };
    return made.page;
  };
  const config = { public: true };
  const schema = { hide: true };

  app.get('/playground', { config, schema }, (request, reply) => {
    // Relative asset URLs need the trailing slash. 307, as LangServe answers (PROTOCOL.md).
    const [path, query] = request.url.split('?');
    return reply.redirect(`${path}/${query === undefined ? '' : `?${query}`}`, 307);
  });
  app.get('/playground/', { config, schema }, (_request, reply) => {
    const page = current();
    if (page === undefined) {
      return reply.code(404).header('x-request-id', reply.request.id).send(errorBody(404, 'RUNNEL_ERR_NOT_FOUND', 'The playground is not built: run npm run build', 'Not Found'));
    }
    return secure(reply).header('cache-control', 'no-cache').type('text/html; charset=utf-8').send(page);
  });
  app.get<{ Params: { file: string } }>('/playground/assets/:file', { config, schema }, (request, reply) => {
    const { file } = request.params;
    if (template() === undefined || !ASSET.test(file)) return reply.code(404).header('x-request-id', request.id).send(errorBody(404, 'RUNNEL_ERR_NOT_FOUND', 'Not Found'));
    return secure(reply).header('cache-control', 'public, max-age=31536000, immutable').sendFile(`assets/${file}`);
  });
};
