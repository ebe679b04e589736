# Runnel's image: built in one stage, run from a second that holds only the
# compiled server, production dependencies and the docs /rag seeds from.
# docker build -t runnel . && docker run -p 8000:8000 runnel

FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# No install scripts: the image's own Node 24 runs everything, so the `node` dev dependency (the Node 24
# binary that development machines and CI run on) need not download its binary here.
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY routes ./routes
COPY chains ./chains
COPY playground ./playground
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

FROM node:24-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8000 \
    RUNNEL_DATA_DIR=/data
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# /rag seeds its collection from these on first start.
COPY README.md ./README.md
COPY docs ./docs
# PGlite keeps its files here when no DATABASE_URL is set; the only path the server writes.
RUN mkdir -p /data && chown node:node /data
USER node
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8000) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
STOPSIGNAL SIGTERM
# Exec form: node is the process that receives SIGTERM and shuts down gracefully (streams get a final frame).
CMD ["node", "dist/src/server/main.js"]
