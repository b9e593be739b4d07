/**
 * Test helper, run by test/unit/adapters/nodeMounter.test.ts as
 *   unshare --mount --propagation private node dist/test/support/bindMountProbe.js <workDir>
 * i.e. only ever inside a private mount namespace that dies with it. It uses NodeMounter to
 * bind mount <workDir>/src onto <workDir>/tar get (a name with a space, to exercise the
 * mountinfo escaping), checks the mount-point answers (by the mount table and by mount ids),
 * unmounts, and prints one JSON line.
 *
 * It lives outside test/ so that the test runner does not take it for a test file.
 */
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';

import { errorCode, errorMessage } from '../../src/ports/fs.js';
import { NodeMounter } from '../../src/adapters/node/nodeMounter.js';
import { isMountRootByMountId, liveMountIdProbe } from '../../src/adapters/node/mountId.js';

async function main(): Promise<void> {
  const work = process.argv[2];
  if (work === undefined || process.env.NODEVOL_BIND_PROBE !== '1') {
    throw new Error('usage: NODEVOL_BIND_PROBE=1 unshare --mount --propagation private node bindMountProbe.js <workDir>');
  }
  const src = join(work, 'src');
  const target = join(work, 'tar get');
  mkdirSync(src, { recursive: true });
  mkdirSync(target, { recursive: true });
  writeFileSync(join(src, 'marker'), 'through the bind mount');

  const mounter = new NodeMounter({ mountIds: false });
  const tableOnly = (p: string): Promise<boolean> => mounter.isLikelyNotMountPoint(p);
  // The default mounter checks a directory by mount ids, without the table.
  const byMountId = new NodeMounter();
  const probe = liveMountIdProbe();
  const rootByMountId = (p: string): Promise<boolean | undefined> =>
    probe === undefined ? Promise.resolve(undefined) : isMountRootByMountId(probe, p);
  // The same mounter, with a mount table that cannot be read: the st_dev fall-back.
  const devOnly = new NodeMounter({
    mountInfo: { name: 'unreadable', read: () => Promise.reject(new Error('unreadable on purpose')) },
  });

  const out: Record<string, unknown> = {};
  out.beforeNotMountPoint = await tableOnly(target);
  out.beforeMountIdNotMountPoint = await byMountId.isLikelyNotMountPoint(target);
  out.beforeRootByMountId = await rootByMountId(target);
  await mounter.mount(src, target, '', ['bind']);
  out.mountedNotMountPoint = await tableOnly(target);
  out.mountedMountIdNotMountPoint = await byMountId.isLikelyNotMountPoint(target);
  out.mountedRootByMountId = await rootByMountId(target);
  out.mountedRootByMountIdSlash = await rootByMountId(`${target}/`);
  out.insideRootByMountId = await rootByMountId(join(target, '.'));
  out.devFallbackNotMountPoint = await devOnly.isLikelyNotMountPoint(target);
  out.markerThroughTarget = readFileSync(join(target, 'marker'), 'utf8');
  const table = await mounter.readMountTable();
  out.tableHasEscapedTarget = table.entries.some((e) => e.mountPoint === target.replaceAll(' ', '\\040'));
  await mounter.unmount(target);
  out.afterNotMountPoint = await tableOnly(target);
  out.afterMountIdNotMountPoint = await byMountId.isLikelyNotMountPoint(target);
  try {
    await mounter.unmount(target);
    out.secondUnmount = 'resolved';
  } catch (err) {
    out.secondUnmount = errorCode(err);
    out.secondUnmountMessage = errorMessage(err);
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bindMountProbe: ${errorMessage(err)}\n`);
  process.exitCode = 1;
});
