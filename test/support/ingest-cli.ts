/** `npm run ingest` as a user runs it, in its own process, for the tests of the CLI. */
import { spawn } from 'node:child_process';

const root = new URL('../..', import.meta.url).pathname;

/** Runs the ingest CLI with `args`, `env` over this process's environment; its exit code and output. */
export function ingestCli(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/ingest.ts', ...args], { cwd: root, env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
