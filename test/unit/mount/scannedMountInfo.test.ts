// The scanned mount table (src/mount/mountInfo.ts ScannedMountInfo, MountTableSnapshot.scan) that
// the audit reads: the same answers as the eager parse on the example node's table and on a
// table shaped like the bench node's; entries are built only for the lines a query needs.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

import { MountInfoParseError, parseMountInfo, ScannedMountInfo } from '../../../src/mount/mountInfo.js';
import { MountTableSnapshot } from '../../../src/mount/mountRefs.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
const EXAMPLE = readFileSync(path.join(REPO, 'examples/node/mountinfo'), 'utf8');

/** A table like the bench node's: global mounts, each bind mounted into pods, plus unrelated lines. */
function nodeLikeTable(): string {
  const lines = ['1 0 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw'];
  let id = 2;
  for (let v = 0; v < 20; v++) {
    const global = `/var/lib/kubelet/plugins/kubernetes.io/csi/d/${v.toString(16).padStart(8, '0')}/globalmount`;
    lines.push(`${id++} 1 0:${100 + v} / ${global} rw,relatime shared:${id} - ext4 /dev/vd${v} rw`);
    for (let p = 0; p < 3; p++) {
      lines.push(`${id++} 1 0:${100 + v} / /var/lib/kubelet/pods/pod-${v}-${p}/volumes/kubernetes.io~csi/pv-${v}/mount rw,relatime shared:${id} - ext4 /dev/vd${v} rw`);
    }
  }
  for (let i = 0; i < 50; i++) lines.push(`${id++} 1 0:${1000 + i} / /run/containerd/io.containerd.runtime.v2.task/k8s.io/${i}/rootfs rw - overlay overlay rw,lowerdir=/a:/b`);
  lines.push(`${id++} 1 0:999 /sub /mnt/with\\040space rw - tmpfs tmpfs rw`);
  return `${lines.join('\n')}\n`;
}

const PROBES = [
  '/',
  '/var/lib/kubelet',
  '/var/lib/kubelet/pods',
  '/var/lib/kubelet/plugins/kubernetes.io/csi/d/00000003/globalmount',
  '/var/lib/kubelet/pods/pod-3-1/volumes/kubernetes.io~csi/pv-3/mount',
  '/var/lib/kubelet/pods/pod-3-1/volumes/kubernetes.io~csi/pv-3/mount/deeper',
  '/mnt/with space',
  '/mnt/with\\040space',
  '/nowhere',
];

function outcome<T>(fn: () => T): { value: T } | { error: string } {
  try {
    return { value: fn() };
  } catch (err) {
    return { error: String(err) };
  }
}

for (const [name, text] of [['examples/node/mountinfo', EXAMPLE], ['a table shaped like the bench node', nodeLikeTable()]] as const) {
  describe(`scanned mount table: ${name}`, () => {
    it('gives the eager parse\'s entries and problems', () => {
      const eager = parseMountInfo(text, { strict: false });
      const scanned = ScannedMountInfo.scan(text, { strict: false });
      assert.ok(eager.entries.length > 0);
      assert.deepEqual(scanned.entries(), eager.entries);
      assert.deepEqual(scanned.problems, eager.problems);
    });

    it('a snapshot of it answers every query as the eager snapshot does', () => {
      const eager = MountTableSnapshot.parse(text);
      const lazy = MountTableSnapshot.scan(text);
      const probes = [...PROBES, ...eager.entries.slice(0, 40).map((e) => e.mountPoint)];
      for (const p of probes) {
        assert.deepEqual(lazy.findMountFor(p), eager.findMountFor(p), p);
        assert.deepEqual(outcome(() => lazy.searchMountPoints(p)), outcome(() => eager.searchMountPoints(p)), p);
        assert.equal(lazy.isMountPoint(p), eager.isMountPoint(p), p);
        assert.deepEqual(lazy.mountsUnder(p), eager.mountsUnder(p), p);
        assert.equal(lazy.hasMountPointStartingWith(`${p}/`), eager.entries.some((e) => e.mountPoint.startsWith(`${p}/`)), p);
      }
      assert.deepEqual(lazy.entries, eager.entries);
    });
  });
}

describe('scanned mount table: bad lines', () => {
  const text = `${nodeLikeTable()}garbage line\n7 x 1:1 / /y rw - a b c\n`;

  it('strict: throws the eager parse\'s MountInfoParseError for the first bad line', () => {
    const eager = outcome(() => parseMountInfo(text, { source: '/m' }));
    assert.ok('error' in eager);
    assert.throws(() => ScannedMountInfo.scan(text, { source: '/m' }), (err: unknown) => err instanceof MountInfoParseError && String(err) === eager.error);
  });

  it('lenient: the same problems, the good lines kept', () => {
    const eager = parseMountInfo(text, { strict: false });
    const scanned = ScannedMountInfo.scan(text, { strict: false });
    assert.equal(scanned.problems.length, 2);
    assert.deepEqual(scanned.problems, eager.problems);
    assert.deepEqual(scanned.entries(), eager.entries);
  });

  it('an entry past the end is undefined', () => {
    const scanned = ScannedMountInfo.scan('1 0 8:1 / / rw - ext4 /dev/sda1 rw\n');
    assert.equal(scanned.count, 1);
    assert.equal(scanned.entry(1), undefined);
    assert.equal(scanned.entry(-1), undefined);
  });
});
