/**
 * Before any test: builds the playground bundle (Vite, about a second), so
 * the server under test serves the playground of the current source.
 */
import { execFileSync } from 'node:child_process';

export default function setup(): void {
  execFileSync(process.execPath, ['node_modules/vite/bin/vite.js', 'build', '--config', 'playground/vite.config.ts'], { stdio: 'inherit' });
}
