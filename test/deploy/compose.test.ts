/**
 * What can be checked of the deployment without a Docker engine: the compose
 * file's services, health checks, volumes and wiring; the Dockerfile's
 * stages, user, port, health check and signal handling; that the server
 * accepts the environment compose gives it; and that nginx accepts the
 * repository's proxy config.
 */
import { execFileSync, spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadServerConfig } from '../../src/index.js';
import { RUNNEL_SETTINGS } from '../../src/server/config.js';
import { shutdownDeadlineMs } from '../../src/server/signals.js';

const root = new URL('../../', import.meta.url).pathname;
const read = (path: string): string => readFileSync(join(root, path), 'utf8');

interface Service {
  image?: string;
  profiles?: string[];
  build?: unknown;
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  expose?: string[];
  volumes?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  init?: boolean;
  stop_grace_period?: string;
  networks?: string[];
}
interface Network {
  ipam?: { config?: { subnet?: string }[] };
}
const compose = parse(read('docker-compose.yml')) as { services: Record<string, Service>; volumes: Record<string, unknown>; networks: Record<string, Network | null> };
const { app, nginx, redis, postgres } = compose.services as Record<'app' | 'nginx' | 'redis' | 'postgres', Service>;

/**
 * Compose's interpolation of the forms the file uses, given the host's variables: `${NAME:-default}` (the
 * value, or the default when unset or empty) and `${NAME:+alternative}` (the alternative when set and not
 * empty, else nothing).
 */
const interpolate = (value: string, host: Record<string, string> = {}): string =>
  value.replace(/\$\{([A-Z_][A-Z0-9_]*):([-+])([^}]*)\}/g, (_, name: string, operator: string, word: string) => {
    const given = host[name] ?? '';
    if (operator === '-') return given === '' ? word : given;
    return given === '' ? '' : word;
  });
/** The value with nothing set on the host. */
const substitute = (value: string): string => interpolate(value);

describe('docker-compose.yml', () => {
  it('has app, nginx, redis and postgres, each with a health check, and workers for background runs', () => {
    const always = Object.entries(compose.services).filter(([, service]) => service.profiles === undefined).map(([name]) => name);
    expect(always.sort()).toEqual(['app', 'nginx', 'postgres', 'redis', 'worker']);
    const worker = compose.services.worker as Service & { command: string[] };
    expect(worker.command).toEqual(['node', 'dist/src/server/worker.js']);
    expect(existsSync(join(root, 'src/server/worker.ts'))).toBe(true);
    expect(worker.networks).toEqual(['backend']);
    const env = Object.fromEntries(Object.entries(worker.environment ?? {}).map(([key, value]) => [key, substitute(value)]));
    expect(loadServerConfig(env)).toMatchObject({ redisUrl: 'redis://redis:6379', workerConcurrency: 8 });
    for (const service of [app, nginx, redis, postgres]) expect(service.healthcheck?.test.length).toBeGreaterThan(1);
    expect(app.healthcheck?.test.join(' ')).toContain('/healthz');
  });

  it('keeps Redis append-only on a volume, and Postgres with pgvector on a volume', () => {
    expect(redis.image).toMatch(/^redis:7/);
    expect(redis.command?.join(' ')).toMatch(/--appendonly yes/);
    expect(postgres.image).toBe('pgvector/pgvector:pg17');
    const named = Object.keys(compose.volumes);
    expect(named).toContain((redis.volumes?.[0] ?? '').split(':')[0]);
    expect(redis.volumes?.[0]).toMatch(/:\/data$/);
    expect(named).toContain((postgres.volumes?.[0] ?? '').split(':')[0]);
    expect(postgres.volumes?.[0]).toMatch(/:\/var\/lib\/postgresql\/data$/);
  });

  it('starts the app after healthy services, wired to them, with model keys from the host', () => {
    expect(app.build).toBe('.');
    expect(app.depends_on).toEqual({ redis: { condition: 'service_healthy' }, postgres: { condition: 'service_healthy' } });
    const env = app.environment ?? {};
    expect(new URL(substitute(env.REDIS_URL ?? '')).hostname).toBe('redis');
    const database = new URL(substitute(env.DATABASE_URL ?? ''));
    expect(database.hostname).toBe('postgres');
    expect(database.username).toBe(postgres.environment?.POSTGRES_USER);
    expect(database.pathname).toBe(`/${postgres.environment?.POSTGRES_DB}`);
    expect(substitute(database.password)).toBe(substitute(postgres.environment?.POSTGRES_PASSWORD ?? ''));
    for (const key of ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY']) expect(env[key]).toBe(`\${${key}:-}`);
    // Secrets are never written into the file.
    expect(read('docker-compose.yml')).not.toMatch(/sk-[A-Za-z0-9]{8,}/);
  });

  it('scales the app behind nginx: no published app port, nginx publishes and mounts the repository config', () => {
    expect(app.ports).toBeUndefined();
    expect(app.expose).toEqual(['8000']);
    expect(nginx.ports?.[0]).toMatch(/:80$/);
    expect(nginx.depends_on?.app?.condition).toBe('service_healthy');
    const [source, target] = (nginx.volumes?.[0] ?? '').split(':');
    expect(existsSync(join(root, source ?? ''))).toBe(true);
    expect(target).toBe('/etc/nginx/conf.d/default.conf');
    expect(read('deploy/nginx.conf')).toMatch(/server app:8000/);
  });

  it('gives the server an environment it accepts (host variables unset)', () => {
    const env = Object.fromEntries(Object.entries(app.environment ?? {}).map(([key, value]) => [key, substitute(value)]));
    const config = loadServerConfig({ ...env, HOST: '0.0.0.0', PORT: '8000' });
    expect(config.redisUrl).toBe('redis://redis:6379');
    expect(config.apiKeys).toEqual([]);
    expect(config.rateLimit).toBe(0);
    expect(config.authFailLimit).toBe(20);
  });

  // An operator's trial: the worker had no RUNNEL_RUN_NAMESPACE to share with the app, neither had the model
  // providers' base URLs, and both reported the service name runnel.
  it('gives the app and the worker the same run and model settings, and service names of their own', () => {
    const worker = compose.services.worker as Service;
    for (const name of ['RUNNEL_RUN_NAMESPACE', 'RUNNEL_RUN_TTL', 'RUNNEL_RUN_LOCK_MS', 'RUNNEL_WEBHOOK_HOSTS', 'RUNNEL_WEBHOOK_SECRET', 'RUNNEL_WEBHOOK_ALLOW_HTTP', 'RUNNEL_WORKER_CONCURRENCY', 'RUNNEL_MODEL', 'OPENAI_BASE_URL', 'ANTHROPIC_BASE_URL', 'RUNNEL_TRACE_CONTENT', 'OTEL_EXPORTER_OTLP_ENDPOINT']) {
      expect(worker.environment?.[name], name).toBeDefined();
      expect(worker.environment?.[name], name).toBe(app.environment?.[name]);
    }
    expect([app.environment?.OTEL_SERVICE_NAME, worker.environment?.OTEL_SERVICE_NAME]).toEqual(['runnel', 'runnel-worker']);
  });

  // A probe: the app had no RUNNEL_BODY_LIMIT, RUNNEL_MAX_BATCH, RUNNEL_MAX_STREAMS, RUNNEL_STREAM_STALL_MS,
  // RUNNEL_PING_MS, RUNNEL_WORKER_CONCURRENCY, RUNNEL_PROCESSES or RUNNEL_WEBHOOK_ALLOW_HTTP: set on the host, they changed nothing.
  it("passes the app every setting README's Configuration table documents, but those that make no sense in compose", () => {
    const readme = read('README.md');
    const table = readme.slice(readme.indexOf('| variable | default | meaning |')).split('\n\n')[0] ?? '';
    const rows = table.split('\n').slice(2);
    expect(rows.length).toBeGreaterThan(20);
    const documented = new Set<string>();
    for (const row of rows) {
      const [name = '', , meaning = ''] = row.split(/(?<!\\)\|/).slice(1);
      // The compose-only row configures compose itself, not the server.
      if (meaning.trim().startsWith('compose only')) continue;
      for (const match of name.matchAll(/`([A-Z][A-Z0-9_]+)`/g)) documented.add(match[1] as string);
      // Settings named in passing: `RUNNEL_WEBHOOK_ALLOW_HTTP=true`.
      for (const match of meaning.matchAll(/`([A-Z][A-Z0-9_]+)=[^`]*`/g)) documented.add(match[1] as string);
    }
    const notInCompose: Record<string, string> = {
      PORT: 'fixed at 8000: nginx, the health check and `expose` reach the app there',
      HOST: 'the image sets 0.0.0.0; the default, loopback, would leave the app unreachable from nginx',
      RUNNEL_DATA_DIR: "PGlite's files, unused: compose gives the app DATABASE_URL",
      RUNNEL_WORKER_METRICS_PORT: "a worker process's: the app serves /metrics on its own port (the worker service sets it)",
    };
    for (const name of Object.keys(notInCompose)) expect(documented, `${name} is no longer documented: drop its exclusion`).toContain(name);
    const missing = [...documented].filter((name) => !(name in notInCompose) && app.environment?.[name] === undefined);
    expect(missing).toEqual([]);
    // And the server takes what it gets with nothing set on the host.
    const env = Object.fromEntries(Object.entries(app.environment ?? {}).map(([key, value]) => [key, substitute(value)]));
    expect(loadServerConfig(env)).toMatchObject({ bodyLimit: 1024 * 1024, maxBatch: 100, maxStreams: 1000, streamStallMs: 30_000, pingMs: 15_000, processes: 1, workerConcurrency: 8, webhookAllowHttp: false });
  });

  // A probe: RUNNEL_STOP_GRACE_PERIOD and JAEGER_PORT were read by the file and documented nowhere.
  it('reads from the host only variables the docs name: README\'s Configuration table, or docs/observability.md for its profile', () => {
    const readme = read('README.md');
    const table = readme.slice(readme.indexOf('| variable | default | meaning |')).split('\n\n')[0] ?? '';
    const observability = read('docs/observability.md');
    const names = [...new Set([...read('docker-compose.yml').matchAll(/\$\{([A-Z_][A-Z0-9_]*)/g)].map((match) => match[1] as string))];
    expect(names).toContain('RUNNEL_STOP_GRACE_PERIOD');
    const named = (text: string, name: string): boolean => text.includes(`\`${name}\``) || text.includes(`\`${name}=`);
    const undocumented = names.filter((name) => !named(table, name) && !named(observability, name));
    expect(undocumented).toEqual([]);
    // The RUNNEL_* ones are settings the server knows, so one set on the host for compose draws no warning from it.
    expect(names.filter((name) => name.startsWith('RUNNEL_') && !RUNNEL_SETTINGS.has(name))).toEqual([]);
  });

  it("lets Docker wait longer than the server's own hard deadline before it kills the app", () => {
    const env = Object.fromEntries(Object.entries(app.environment ?? {}).map(([key, value]) => [key, substitute(value)]));
    const config = loadServerConfig(env);
    const period = /^(\d+)s$/.exec(substitute(app.stop_grace_period ?? ''))?.[1];
    expect(Number(period) * 1000).toBeGreaterThan(shutdownDeadlineMs(config.shutdownGraceMs));
  });

  it("trusts X-Forwarded-For from nginx's network only: a fixed subnet that holds nginx and the app alone", () => {
    const subnet = substitute(compose.networks.edge?.ipam?.config?.[0]?.subnet ?? '');
    expect(subnet).toMatch(/^\d+\.\d+\.\d+\.\d+\/\d+$/);
    expect(substitute(app.environment?.RUNNEL_TRUST_PROXY ?? '')).toBe(subnet);
    // The subnet and the trust setting move together when RUNNEL_EDGE_SUBNET is set.
    const moved = { RUNNEL_EDGE_SUBNET: '10.99.0.0/24' };
    expect(interpolate(app.environment?.RUNNEL_TRUST_PROXY ?? '', moved)).toBe('10.99.0.0/24');
    expect(interpolate(compose.networks.edge?.ipam?.config?.[0]?.subnet ?? '', moved)).toBe('10.99.0.0/24');
    const onEdge = Object.entries(compose.services).filter(([, service]) => service.networks?.includes('edge')).map(([name]) => name);
    expect(onEdge.sort()).toEqual(['app', 'nginx']);
    expect(nginx.networks).toEqual(['edge']);
    // Every service names its networks: none lands on compose's default network with an address of its own choosing.
    for (const [name, service] of Object.entries(compose.services)) expect(service.networks?.length, name).toBeGreaterThan(0);
    expect(app.networks).toContain('backend');
    for (const service of [redis, postgres]) expect(service.networks).toEqual(['backend']);
    const env = Object.fromEntries(Object.entries(app.environment ?? {}).map(([key, value]) => [key, substitute(value)]));
    expect(loadServerConfig(env).trustProxy).toEqual([subnet]);
    // nginx appends the client's address to X-Forwarded-For; the server takes the right-most one nginx did not add.
    expect(read('deploy/nginx.conf')).toMatch(/proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;/);
  });

  // A probe: RUNNEL_TRUST_PROXY was the edge subnet alone, so the proxy docs/deployment.md says to add (a load
  // balancer in front of nginx) could be added only by editing the file.
  it('trusts the proxies in front of nginx named by RUNNEL_FRONT_PROXIES too, and every service that trusts proxies does', () => {
    const trusting = Object.entries(compose.services).filter(([, service]) => service.environment?.RUNNEL_TRUST_PROXY !== undefined);
    expect(trusting.map(([name]) => name)).toEqual(['app']);
    for (const [name, service] of trusting) {
      const trust = (host: Record<string, string>): string[] => {
        const env = Object.fromEntries(Object.entries(service.environment ?? {}).map(([key, value]) => [key, interpolate(value, host)]));
        return loadServerConfig(env).trustProxy;
      };
      expect(trust({}), name).toEqual(['10.213.71.0/24']);
      expect(trust({ RUNNEL_FRONT_PROXIES: '' }), name).toEqual(['10.213.71.0/24']);
      expect(trust({ RUNNEL_FRONT_PROXIES: '203.0.113.7' }), name).toEqual(['10.213.71.0/24', '203.0.113.7']);
      expect(trust({ RUNNEL_EDGE_SUBNET: '10.99.0.0/24', RUNNEL_FRONT_PROXIES: '203.0.113.0/24, 2001:db8::/32' }), name).toEqual(['10.99.0.0/24', '203.0.113.0/24', '2001:db8::/32']);
    }
    // A compose setting, so the server does not warn of it as an unknown RUNNEL_* variable.
    expect(RUNNEL_SETTINGS.has('RUNNEL_FRONT_PROXIES')).toBe(true);
  });
});

describe('the observability profile', () => {
  const observability = Object.entries(compose.services).filter(([, service]) => service.profiles !== undefined);
  const mounted = (service: Service | undefined, target: string): string => {
    const volume = service?.volumes?.find((v) => v.split(':')[1] === target) ?? '';
    const source = volume.split(':')[0] ?? '';
    expect(source, target).toMatch(/^\.\/deploy\//);
    expect(existsSync(join(root, source)), `${target} from ${source}`).toBe(true);
    return source;
  };

  it('adds Prometheus, Grafana and Jaeger behind the profile only, on pinned image versions, their UIs on loopback', () => {
    expect(observability.map(([name]) => name).sort()).toEqual(['grafana', 'jaeger', 'prometheus']);
    for (const [name, service] of observability) {
      expect(service.profiles, name).toEqual(['observability']);
      expect(service.image, name).toMatch(/^[\w./-]+:v?\d+\.\d+\.\d+$/);
      for (const port of service.ports ?? []) expect(substitute(port), name).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
      expect(service.networks, name).not.toContain('edge');
    }
    const { jaeger } = compose.services;
    expect(jaeger?.ports?.map(substitute)).toEqual(['127.0.0.1:16686:16686']);
    expect(jaeger?.expose).toEqual(['4318']);
    // The app and the workers reach Jaeger and Prometheus reaches the app on the backend network.
    for (const name of ['jaeger', 'prometheus']) expect(compose.services[name]?.networks).toContain('backend');
  });

  it('points traces at Jaeger only when asked: the endpoint passes through from the host, empty (off) by default', () => {
    for (const service of [app, compose.services.worker]) expect(service?.environment?.OTEL_EXPORTER_OTLP_ENDPOINT).toBe('${OTEL_EXPORTER_OTLP_ENDPOINT:-}');
    expect(read('docker-compose.yml')).toContain('OTEL_EXPORTER_OTLP_ENDPOINT=http://jaeger:4318 docker compose --profile observability up');
  });

  it('scrapes every app replica on its /metrics with the repository config', () => {
    const source = mounted(compose.services.prometheus, '/etc/prometheus/prometheus.yml');
    expect(compose.services.prometheus?.command).toContain('--config.file=/etc/prometheus/prometheus.yml');
    const config = parse(read(source)) as { scrape_configs: { job_name: string; metrics_path?: string; dns_sd_configs?: { names: string[]; type: string; port: number }[] }[] };
    const runnel = config.scrape_configs.find((job) => job.job_name === 'runnel');
    expect(runnel?.metrics_path).toBe('/metrics');
    expect(runnel?.dns_sd_configs).toEqual([expect.objectContaining({ names: ['app'], type: 'A', port: 8000 })]);
    expect(app.expose).toEqual(['8000']);
    // And every worker on its own /metrics port, which its environment opens with the app's key rule.
    const workers = config.scrape_configs.find((job) => job.job_name === 'runnel-worker');
    expect(workers?.metrics_path).toBe('/metrics');
    expect(workers?.dns_sd_configs).toEqual([expect.objectContaining({ names: ['worker'], type: 'A', port: 9464 })]);
    const worker = compose.services.worker as Service;
    expect(worker.expose).toEqual(['9464']);
    expect(loadServerConfig({ RUNNEL_WORKER_METRICS_PORT: substitute(worker.environment?.RUNNEL_WORKER_METRICS_PORT ?? '') }).workerMetricsPort).toBe(9464);
    for (const name of ['RUNNEL_API_KEYS', 'RUNNEL_METRICS_KEYS', 'RUNNEL_AUTH_FAIL_LIMIT']) expect(worker.environment?.[name], name).toBe(app.environment?.[name]);
  });

  it('provisions Grafana with Prometheus and Jaeger and the dashboard', () => {
    const grafana = compose.services.grafana;
    const provisioning = mounted(grafana, '/etc/grafana/provisioning');
    const dashboards = mounted(grafana, '/var/lib/grafana/dashboards');
    const sources = parse(read(join(provisioning, 'datasources/datasources.yml'))) as { datasources: { uid: string; type: string; url: string }[] };
    expect(sources.datasources).toEqual(
      expect.arrayContaining([expect.objectContaining({ uid: 'prometheus', type: 'prometheus', url: 'http://prometheus:9090' }), expect.objectContaining({ uid: 'jaeger', type: 'jaeger', url: 'http://jaeger:16686' })]),
    );
    const providers = parse(read(join(provisioning, 'dashboards/dashboards.yml'))) as { providers: { options: { path: string } }[] };
    expect(providers.providers.map((p) => p.options.path)).toEqual(['/var/lib/grafana/dashboards']);
    expect(existsSync(join(root, dashboards, 'runnel.json'))).toBe(true);
    expect(grafana?.environment?.GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH).toBe('/var/lib/grafana/dashboards/runnel.json');
  });
});

describe('npm start', () => {
  it('execs node after the build, so SIGTERM to npm reaches the server (no orphan keeps the port and the data directory)', () => {
    const start = (JSON.parse(read('package.json')) as { scripts: { start: string } }).scripts.start;
    expect(start).toMatch(/&& exec node dist\/src\/server\/main\.js$/);
  });
});

describe('Dockerfile', () => {
  const dockerfile = read('Dockerfile');
  const stages = dockerfile.split(/^FROM /m).slice(1);
  const final = stages.at(-1) ?? '';

  it('builds in one stage and runs from another with production dependencies only', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(stages[0]).toMatch(/npm prune --omit=dev|npm ci --omit=dev/);
    expect(final).toMatch(/COPY --from=build \/app\/node_modules/);
    expect(final).not.toMatch(/npm (ci|install)(?! .*--omit=dev)/);
  });

  it('runs on a supported Node LTS that meets package.json engines', () => {
    const engines = (JSON.parse(read('package.json')) as { engines: { node: string } }).engines.node;
    const floor = Number(/^>=(\d+)/.exec(engines)?.[1]);
    for (const stage of stages) {
      const major = Number(/^node:(\d+)/.exec(stage)?.[1]);
      expect(major).toBeGreaterThanOrEqual(Math.max(floor, 22));
      expect(major % 2, 'an even (LTS) major').toBe(0);
    }
  });

  it("checks health on the server's own PORT: the HEALTHCHECK script, run as Docker would, passes on a server that answers and fails on none", async () => {
    const script = JSON.parse(/HEALTHCHECK[^\n]*\\\n\s*CMD (\[.*\])$/m.exec(final)?.[1] ?? '[]') as string[];
    expect(script.slice(0, 2)).toEqual(['node', '-e']);
    const server = createServer((req, res) => res.writeHead(req.url === '/healthz' ? 200 : 404).end());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const check = (env: Record<string, string>): Promise<number | null> =>
      new Promise((resolve) => spawn(process.execPath, script.slice(1), { env: { PATH: process.env.PATH ?? '', ...env } }).on('close', resolve));
    try {
      expect(await check({ PORT: String(port) })).toBe(0);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    expect(await check({ PORT: String(port) })).toBe(1);
  });

  it('runs as a non-root user, exposes 8000, checks /healthz, and lets SIGTERM reach node', () => {
    expect(final).toMatch(/^USER (node|\d{4,})$/m);
    expect(final).toMatch(/^EXPOSE 8000$/m);
    expect(final).toMatch(/HEALTHCHECK[\s\S]*\/healthz/);
    expect(final).toMatch(/^STOPSIGNAL SIGTERM$/m);
    // Exec form: node itself receives the signal, not a shell that would swallow it.
    expect(final).toMatch(/^CMD \["node", "dist\/src\/server\/main\.js"\]$/m);
  });

  it('copies only paths that exist, and leaves local state out of the context', () => {
    for (const match of dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)) {
      for (const path of (match[1] ?? '').split(/\s+/)) expect(existsSync(join(root, path)), path).toBe(true);
    }
    const ignored = read('.dockerignore').split('\n');
    for (const path of ['node_modules', 'dist', '.runnel', '.git']) expect(ignored).toContain(path);
  });

  it('builds what the server runs: the build config covers src, routes and chains, and the playground bundle', () => {
    const build = JSON.parse(read('tsconfig.build.json')) as { include: string[] };
    expect(build.include.sort()).toEqual(['chains', 'routes', 'src']);
    for (const dir of [...build.include, 'playground']) expect(dockerfile).toContain(`COPY ${dir} ./${dir}`);
    expect(JSON.parse(read('package.json')).scripts.build).toMatch(/build:playground/);
  });
});

describe('deploy/nginx.conf', () => {
  it('is valid for nginx, with SSE-safe proxying', () => {
    const conf = read('deploy/nginx.conf');
    for (const directive of ['proxy_buffering off;', 'proxy_http_version 1.1;', 'gzip off;']) expect(conf).toContain(directive);
    expect(Number(/proxy_read_timeout (\d+)h;/.exec(conf)?.[1] ?? 0)).toBeGreaterThanOrEqual(1);
    const dir = mkdtempSync(join(tmpdir(), 'runnel-nginx-t-'));
    const main = join(dir, 'nginx.conf');
    writeFileSync(
      main,
      `pid ${dir}/nginx.pid;\nerror_log ${dir}/error.log;\nevents {}\nhttp {\n${conf.replace(/server app:8000/, 'server 127.0.0.1:8000').replace('listen 80;', 'listen 127.0.0.1:1;')}\n}\n`,
    );
    const nginxBin = existsSync('/usr/sbin/nginx') ? '/usr/sbin/nginx' : 'nginx';
    const output = execFileSync(nginxBin, ['-t', '-q', '-p', dir, '-c', main], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    expect(output).toBe('');
  });
});
