import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseMountInfo } from '../../../src/mount/mountInfo.js';
import { MountTableSnapshot } from '../../../src/mount/mountRefs.js';
import { rebaseMountPoints } from '../../../src/mount/rebase.js';

const TEXT = [
  '22 1 8:1 / / rw - ext4 /dev/sda1 rw',
  '31 22 8:1 /var/lib/kubelet /var/lib/kubelet rw - ext4 /dev/sda1 rw',
  '40 31 259:1 / /var/lib/kubelet/plugins/kubernetes.io/csi/d/abc/globalmount rw - ext4 /dev/nvme1n1 rw',
  '41 31 259:1 / /var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/my\\040pv/mount rw - ext4 /dev/nvme1n1 rw',
  '42 22 0:50 / /var/lib/kubelet-other/x rw - tmpfs tmpfs rw',
].join('\n');

describe('rebaseMountPoints', () => {
  it('moves mount points at and below the old root dir under the new one, escaped, and nothing else', () => {
    const parsed = parseMountInfo(TEXT);
    const rebased = rebaseMountPoints(parsed, '/var/lib/kubelet', '/tmp/copy of/kubelet');
    assert.deepEqual(
      rebased.entries.map((e) => e.mountPoint),
      [
        '/',
        '/tmp/copy\\040of/kubelet',
        '/tmp/copy\\040of/kubelet/plugins/kubernetes.io/csi/d/abc/globalmount',
        '/tmp/copy\\040of/kubelet/pods/u1/volumes/kubernetes.io~csi/my\\040pv/mount',
        // A sibling sharing the prefix text is not below the root dir.
        '/var/lib/kubelet-other/x',
      ],
    );
    // The root field is a path inside the filesystem: unchanged.
    assert.deepEqual(rebased.entries.map((e) => e.root), parsed.entries.map((e) => e.root));
    // The input is not modified.
    assert.equal(parsed.entries[2]?.mountPoint, '/var/lib/kubelet/plugins/kubernetes.io/csi/d/abc/globalmount');
  });

  it('mount references are found at the new paths', () => {
    const table = new MountTableSnapshot(rebaseMountPoints(parseMountInfo(TEXT), '/var/lib/kubelet/', '/copy'));
    assert.deepEqual(table.searchMountPoints('/copy/plugins/kubernetes.io/csi/d/abc/globalmount'), ['/copy/pods/u1/volumes/kubernetes.io~csi/my\\040pv/mount']);
  });

  it('the same root dir on both sides returns the table as it is', () => {
    const parsed = parseMountInfo(TEXT);
    assert.equal(rebaseMountPoints(parsed, '/var/lib/kubelet', '/var/lib/kubelet'), parsed);
  });
});
