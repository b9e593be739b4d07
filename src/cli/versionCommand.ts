/** `nodevol version`: the version of this build, kubectl style (`-o json` for scripts). */
import { readFileSync } from 'node:fs';
import { Command, Option } from 'commander';
import { addHelpAfter, examples } from './flags.js';

/** The version in package.json (read once; dist/src/cli → the package root). */
export function nodevolVersion(): string {
  try {
    const pkg: unknown = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8'));
    if (typeof pkg === 'object' && pkg !== null && 'version' in pkg && typeof pkg.version === 'string') return pkg.version;
  } catch {
    // fall through
  }
  return 'unknown';
}

export function versionCommand(): Command {
  const cmd = new Command('version')
    .description('Print the nodevol version, the Node.js version and the CSI spec it speaks.')
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'));
  addHelpAfter(cmd, examples([['The version', 'nodevol version'], ['For a script', 'nodevol version -o json']]));
  cmd.action((flags: { output: 'text' | 'json' }) => {
    const info = { nodevolVersion: nodevolVersion(), nodeVersion: process.version, csiSpec: 'v1', platform: `${process.platform}/${process.arch}` };
    process.stdout.write(
      flags.output === 'json'
        ? `${JSON.stringify(info, null, 2)}\n`
        : `nodevol v${info.nodevolVersion}\nNode.js ${info.nodeVersion} (${info.platform}), CSI ${info.csiSpec}\n`,
    );
  });
  return cmd;
}
