/**
 * Where the e2e harness finds the built nodevol: everything is resolved from this module's own
 * location (dist/test/support/e2e/ once compiled), never from the working directory.
 */
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));

/** The repository root: four levels above dist/test/support/e2e/. */
export function repoRoot(): string {
  return path.resolve(HERE, '..', '..', '..', '..');
}

/** Absolute path of bin/nodevol.js; throws when it or the build it loads is missing. */
export function nodevolBin(): string {
  const bin = path.join(repoRoot(), 'bin', 'nodevol.js');
  const main = path.join(repoRoot(), 'dist', 'src', 'cli', 'main.js');
  if (!existsSync(bin)) throw new Error(`e2e: the nodevol launcher ${bin} does not exist`);
  if (!existsSync(main)) throw new Error(`e2e: ${main} does not exist: run \`npm run build\` first`);
  return bin;
}

/** The node binary running this process (what every child is started with). */
export function nodeExecPath(): string {
  return process.execPath;
}

/** An argv running the nodevol CLI: [node, bin/nodevol.js, ...args]. */
export function nodevolArgv(...args: string[]): string[] {
  return [nodeExecPath(), nodevolBin(), ...args];
}

/** The compiled namespace supervisor, next to this module. */
export function supervisorScript(): string {
  return path.join(HERE, 'nsSupervisor.js');
}
