/** `GET /`: the chains — JSON for programs, an HTML page for browsers. */
import type { FastifyPluginAsync } from 'fastify';

const escape = (text: string): string => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export const indexRoutes: FastifyPluginAsync = async (app) => {
  app.get('/', { schema: { tags: ['operations'], summary: 'The chains served here' } }, async (request, reply) => {
    const chains = app.runnel.chains.map((chain) => ({
      path: chain.spec.path,
      description: chain.spec.description ?? '',
      endpoints: chain.spec.enabledEndpoints,
      playground: app.hasRoute({ method: 'GET', url: `${chain.spec.path}/playground/` }) ? `${chain.spec.path}/playground/` : null,
    }));
    const wantsHtml = /text\/html/.test(request.headers.accept ?? '') && !/application\/json/.test(request.headers.accept ?? '');
    if (!wantsHtml) return { chains, docs: '/docs', openapi: '/openapi.json' };
    const items = chains
      .map((c) => {
        const name = `<code>${escape(c.path)}</code>`;
        const link = c.playground === null ? name : `<a href="${escape(c.playground.slice(1))}">${name}</a>`;
        const playground = c.playground === null ? '' : `<a href="${escape(c.playground.slice(1))}">playground</a> · `;
        const docs = `<a href="docs#/${encodeURIComponent(c.path)}">API docs</a>`;
        return `<li>${link} — ${escape(c.description)} (${playground}${docs} · <a href="${escape(c.path.slice(1))}/input_schema">input schema</a>)</li>`;
      })
      .join('\n');
    return reply
      .type('text/html; charset=utf-8')
      .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'")
      .send(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Runnel</title></head><body><h1>Runnel</h1><p>Chains served here (<a href="docs">API docs</a>):</p><ul>${items}</ul></body></html>`);
  });
};
