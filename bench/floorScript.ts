/**
 * The audit's floor as a process of its own: a plain script that makes the readdir/read calls
 * `nodevol audit` makes, synchronously, with none of its logic. It imports nothing from nodevol,
 * so its start-up is node's plus a few built-in modules.
 *
 *   node dist/bench/floorScript.js <root dir> <mountinfo file>
 *
 * The calls: read the mount table; the pods walk (pods/, each pod dir, its volumes/ and
 * volumeDevices/, each plugin dir, each volume's vol_data.json); the CSI plugin tree (each
 * driver dir, each staged volume's globalmount lstat and vol_data.json) and the block tree
 * (each data/vol_data.json).
 * Prints the bytes read, so that nothing can be skipped.
 */
import { lstatSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

function floor(root: string, mountinfo: string): number {
  let bytes = readFileSync(mountinfo).length;
  const podsDir = join(root, 'pods');
  for (const pod of readdirSync(podsDir)) {
    const podDir = join(podsDir, pod);
    for (const sub of readdirSync(podDir)) {
      if (sub !== 'volumes' && sub !== 'volumeDevices') continue;
      const subDir = join(podDir, sub);
      for (const plugin of readdirSync(subDir)) {
        const pluginDir = join(subDir, plugin);
        for (const child of readdirSync(pluginDir)) {
          if (sub === 'volumes') bytes += readFileSync(join(pluginDir, child, 'vol_data.json')).length;
        }
      }
    }
  }
  const csiDir = join(root, 'plugins', 'kubernetes.io', 'csi');
  const blockDir = join(csiDir, 'volumeDevices');
  for (const driver of readdirSync(csiDir)) {
    const driverDir = join(csiDir, driver);
    if (driverDir === blockDir) continue;
    for (const vol of readdirSync(driverDir)) {
      // The audit must know that globalmount exists (and is no symlink) before it trusts the data.
      if (lstatSync(join(driverDir, vol, 'globalmount')).isDirectory()) bytes += 1;
      bytes += readFileSync(join(driverDir, vol, 'vol_data.json')).length;
    }
  }
  const staged = new Set(readdirSync(join(blockDir, 'staging')));
  for (const entry of readdirSync(blockDir)) {
    if (entry === 'staging' || entry === 'publish' || !staged.has(entry)) continue;
    bytes += readFileSync(join(blockDir, entry, 'data', 'vol_data.json')).length;
  }
  return bytes;
}

const [root, mountinfo] = process.argv.slice(2);
if (root === undefined || mountinfo === undefined) {
  process.stderr.write('usage: floorScript.js <root dir> <mountinfo file>\n');
  process.exitCode = 2;
} else {
  process.stdout.write(`${floor(root, mountinfo)}\n`);
}
