/**
 * `GET /`: the chains — JSON for programs, an HTML page for browsers. The
 * page looks like the playground (its colours and fonts, kept in step with
 * `playground/src/style.css`) but is one self-contained document: inline
 * styles, no script, the icon from `/favicon.svg`, every URL relative so it
 * works under a prefix.
 */
import type { FastifyPluginAsync } from 'fastify';

const escape = (text: string): string => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** No script at all; inline styles and our own icon only. */
const CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// The playground's variables and base rules (playground/src/style.css), and the little this page adds.
const STYLE = `
:root { --fg: #1d2330; --muted: #5d6678; --line: #d9dee8; --bg: #f6f7fb; --card: #fff; --accent: #2456d6;
  font: 15px/1.5 system-ui, -apple-system, 'Segoe UI', sans-serif; color: var(--fg); background: var(--bg); }
body { margin: 0; }
#app { max-width: 1200px; margin: 0 auto; padding: 16px 20px 40px; }
header h1 { margin: 0 0 4px; font-size: 22px; display: flex; gap: 8px; align-items: center; }
header .description { margin: 0 0 4px; color: var(--muted); }
header nav { font-size: 13px; margin-bottom: 16px; }
a { color: var(--accent); }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px; }
.chains { list-style: none; margin: 0; padding: 0; display: grid; grid-template-columns: repeat(auto-fill, minmax(min(340px, 100%), 1fr)); gap: 16px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 14px 16px; display: flex; flex-direction: column; }
.card h2 { font-size: 15px; margin: 0 0 6px; }
.card h2 code { font-size: 16px; }
.card h2 a { text-decoration: none; }
.card .description { margin: 0 0 10px; flex: 1; }
.card nav { font-size: 13px; }
.endpoints { font-size: 12px; color: var(--muted); margin: 6px 0 0; }
.endpoints code { font-size: 12px; }
.empty { color: var(--muted); }
`;

interface ChainEntry {
  path: string;
  description: string;
  endpoints: readonly string[];
  playground: string | null;
}

/** A chain's card: its path (to its playground), description, and links; all URLs relative to `/`. */
function card(chain: ChainEntry): string {
  const here = escape(chain.path.slice(1));
  const playground = chain.playground === null ? null : escape(chain.playground.slice(1));
  const name = `<code>${escape(chain.path)}</code>`;
  const links = [
    playground === null ? null : `<a href="${playground}">playground</a>`,
    `<a href="docs#/${encodeURIComponent(chain.path)}">API docs</a>`,
    ...(['input_schema', 'output_schema', 'config_schema'] as const)
      .filter((endpoint) => chain.endpoints.includes(endpoint))
      .map((endpoint) => `<a href="${here}/${endpoint}">${endpoint.replace('_', ' ')}</a>`),
  ].filter((link) => link !== null);
  const calls = chain.endpoints.filter((endpoint) => ['invoke', 'batch', 'stream', 'stream_log', 'stream_events'].includes(endpoint));
  return (
    `<li class="card" data-chain="${escape(chain.path)}">` +
    `<h2>${playground === null ? name : `<a href="${playground}">${name}</a>`}</h2>` +
    `<p class="description">${escape(chain.description)}</p>` +
    `<nav>${links.join(' · ')}</nav>` +
    (calls.length === 0 ? '' : `<p class="endpoints">POST ${calls.map((c) => `<code>${escape(c)}</code>`).join(' · ')}</p>`) +
    '</li>'
  );
}

function page(chains: readonly ChainEntry[]): string {
  const count = chains.length === 1 ? 'One chain' : `${chains.length} chains`;
  const list = chains.length === 0 ? '<p class="empty">No chains are registered.</p>' : `<ul class="chains">${chains.map(card).join('\n')}</ul>`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Runnel</title>
<link rel="icon" type="image/svg+xml" href="favicon.svg">
<style>${STYLE}</style>
</head>
<body>
<div id="app">
<header>
<h1><img src="favicon.svg" alt="" width="26" height="26"> Runnel</h1>
<p class="description">${count} served here over LangServe’s HTTP API.</p>
<nav><a href="docs">API docs</a> · <a href="openapi.json">OpenAPI document</a></nav>
</header>
<main>
${list}
</main>
</div>
</body>
</html>
`;
}

export const indexRoutes: FastifyPluginAsync = async (app) => {
  app.get('/', { schema: { tags: ['operations'], summary: 'The chains served here', security: [] } }, async (request, reply) => {
    const chains = app.runnel.chains.map((chain) => ({
      path: chain.spec.path,
      description: chain.spec.description ?? '',
      endpoints: chain.spec.enabledEndpoints,
      playground: app.hasRoute({ method: 'GET', url: `${chain.spec.path}/playground/` }) ? `${chain.spec.path}/playground/` : null,
    }));
    const wantsHtml = /text\/html/.test(request.headers.accept ?? '') && !/application\/json/.test(request.headers.accept ?? '');
    void reply.header('vary', 'accept');
    if (!wantsHtml) return { chains, docs: '/docs', openapi: '/openapi.json' };
    return reply
      .type('text/html; charset=utf-8')
      .header('content-security-policy', CSP)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('cache-control', 'no-cache')
      .send(page(chains));
  });
};
