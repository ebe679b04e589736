/**
 * Debian's nginx running the repository's deploy/nginx.conf, with the
 * upstream and the listening address rewritten for a test (and whatever else
 * `edit` changes), in a temporary prefix of its own.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../helpers.js';

const root = new URL('../../', import.meta.url).pathname;

export interface Nginx {
  /** `http://127.0.0.1:PORT` */
  url: string;
  /** The config nginx runs (the http block's contents). */
  conf: string;
  process: ChildProcess;
  /** Stops nginx and waits for it to exit. */
  close(): Promise<void>;
}

/** Polls `url` until it answers 2xx; throws with `logs` when `child` exits first. The caller's hook timeout bounds it. */
export async function waitUntilUp(url: string, child: ChildProcess, logs: () => string): Promise<void> {
  while (!(await fetch(url).then((r) => r.ok, () => false))) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`process exited (${child.exitCode ?? child.signalCode}):\n${logs()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Starts nginx in front of `upstreams` (`host:port` each) on 127.0.0.1 and a free port, and waits until
 * `/healthz` answers through it.
 */
export async function startNginx(options: { upstreams: string[]; edit?: (conf: string) => string }): Promise<Nginx> {
  const dir = mkdtempSync(join(tmpdir(), 'runnel-nginx-'));
  const port = await freePort();
  const rewritten = readFileSync(join(root, 'deploy/nginx.conf'), 'utf8')
    .replace(/server app:8000([^;]*);/, options.upstreams.map((upstream) => `server ${upstream}$1;`).join('\n    '))
    .replace('listen 80;', `listen 127.0.0.1:${port};`);
  if (rewritten.includes('app:8000') || !rewritten.includes(`listen 127.0.0.1:${port};`)) throw new Error('deploy/nginx.conf no longer has the upstream or listen line this helper rewrites');
  const conf = options.edit?.(rewritten) ?? rewritten;
  for (const temp of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, temp));
  writeFileSync(
    join(dir, 'nginx.conf'),
    [
      'daemon off;',
      'worker_processes 1;',
      `pid ${dir}/nginx.pid;`,
      `error_log ${dir}/error.log warn;`,
      'events {}',
      'http {',
      '  access_log off;',
      `  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fastcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;`,
      conf,
      '}',
    ].join('\n'),
  );
  const child = spawn(existsSync('/usr/sbin/nginx') ? '/usr/sbin/nginx' : 'nginx', ['-p', dir, '-c', join(dir, 'nginx.conf')], {
    env: { PATH: process.env.PATH ?? '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const close = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitUntilUp(`${url}/healthz`, child, () => `${output}${existsSync(join(dir, 'error.log')) ? readFileSync(join(dir, 'error.log'), 'utf8') : ''}`);
  } catch (error) {
    await close();
    throw error;
  }
  return { url, conf, process: child, close };
}
