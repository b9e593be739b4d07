// Root-dir confinement of the paths handed to a driver or to umount: the refusals, their error
// class and their exact texts (docs/security.md).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { MemFs } from '../../../../src/adapters/memory/memFs.js';
import { assertPathConfined, assertPathUnderRoot, CsiPathError } from '../../../../src/volume/util/pathConfinement.js';
import type { VolumeHost } from '../../../../src/volume/volumeHost.js';
import { FaultyFs } from '../../../support/faultyFs.js';
import { InMemoryNode, volumeHostOf } from '../../../support/inMemoryNode.js';

const ROOT = '/var/lib/kubelet';
const POD_VOL = `${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/pv-1`;

function rig(): { mem: MemFs; fs: FaultyFs; host: VolumeHost } {
  const node = new InMemoryNode();
  const fs = new FaultyFs(node.fs);
  return { mem: node.fs, fs, host: volumeHostOf(node, { fs }) };
}

/** The rejection of `p`, checked to be a CsiPathError. */
async function refusal(p: Promise<void>): Promise<CsiPathError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof CsiPathError, `a CsiPathError, got ${String(err)}`);
    return err;
  }
  assert.fail('expected a refusal');
}

describe('assertPathUnderRoot', () => {
  it('refuses a path outside the root dir with a CsiPathError named so, saying why', () => {
    const { host } = rig();
    assert.throws(
      () => assertPathUnderRoot(host, '/etc/passwd', (m) => `csi: ${m}`),
      (err: unknown) => {
        assert.ok(err instanceof CsiPathError);
        assert.equal(err.name, 'CsiPathError');
        assert.equal(err.message, 'csi: refusing to touch "/etc/passwd": not a normalized path under the root dir /var/lib/kubelet');
        return true;
      },
    );
  });
});

describe('assertPathConfined', () => {
  it('refuses a path that is not valid UTF-8, printing its bytes as \\xNN, and touches nothing', async () => {
    const { mem, fs, host } = rig();
    await mem.mkdir(`${POD_VOL}/mou\udcffnt`, { recursive: true, mode: 0o750 });
    const err = await refusal(assertPathConfined(host, `${POD_VOL}/mou\udcffnt`, 'NodeUnpublishVolume'));
    assert.equal(err.message, `refusing to hand ${POD_VOL}/mou\\xffnt to NodeUnpublishVolume: the path is not valid UTF-8 and cannot be sent over CSI as it is`);
    assert.deepEqual(fs.calls, []);
  });

  it('refuses a path whose component cannot be checked, naming the component and the error', async () => {
    const { mem, fs, host } = rig();
    await mem.mkdir(`${POD_VOL}/mount`, { recursive: true, mode: 0o750 });
    fs.failOn('realpath', `${POD_VOL}/mount`, 'EIO').failOn('lstat', `${ROOT}/pods/pod-a`, 'EACCES');
    const err = await refusal(assertPathConfined(host, `${POD_VOL}/mount`, 'NodeUnpublishVolume'));
    assert.equal(err.message, `refusing to hand ${POD_VOL}/mount to NodeUnpublishVolume: cannot check ${ROOT}/pods/pod-a: lstat ${ROOT}/pods/pod-a: EACCES`);
    assert.deepEqual(fs.calls, [`realpath ${POD_VOL}/mount`, `lstat ${ROOT}/pods`, `lstat ${ROOT}/pods/pod-a`]);
  });

  it('accepts a path whose walk reaches a missing component, looking no further', async () => {
    const { mem, fs, host } = rig();
    await mem.mkdir(`${ROOT}/pods`, { recursive: true, mode: 0o750 });
    await assertPathConfined(host, `${POD_VOL}/mount`, 'NodeUnpublishVolume');
    assert.deepEqual(fs.calls, [`realpath ${POD_VOL}/mount`, `lstat ${ROOT}/pods`, `lstat ${ROOT}/pods/pod-a`]);
  });
});
