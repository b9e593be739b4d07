// Kubelet on-disk layout and names, against worked examples of the paths and hashes kubelet computes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KubeletLayout } from '../../../src/layout/layout.js';
import {
  csiVolumeName,
  escapeQualifiedName,
  getAttachmentName,
  getUniqueVolumeName,
  getUniqueVolumeNameWithPod,
  isSafePathComponent,
  isSha256Hex,
  makeEphemeralVolumeHandle,
  sha256Hex,
  unescapeQualifiedName,
} from '../../../src/layout/names.js';

const L = new KubeletLayout('/var/lib/kubelet');

describe('layout: names and hashes', () => {
  it('sha256 of a handle is the staging directory name from the reference', () => {
    assert.equal(sha256Hex('vol-0a1b2c3d'), '4e290f11dbc3910132aef6e3780c5e8fe84bbebd7c38217dd2bfa5dd6144861d');
  });
  it('the attachment id is csi- + sha256(handle + driver + node)', () => {
    assert.equal(
      getAttachmentName('vol-0a1b2c3d', 'ebs.csi.example.com', 'node-1'),
      'csi-e4af04f900afc5314bbcec517ca6a0c1bdf261fbf7f26ed62d3c14e8a79cb915',
    );
  });
  it('the ephemeral handle is csi- + sha256(podUID + volume name)', () => {
    assert.equal(
      makeEphemeralVolumeHandle('6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f', 'scratch'),
      'csi-ed4878c91b1ceb4d55c576134c6920d196ccdbeedf97e4867136ec9da20c1a7c',
    );
  });
  it('unique names: driver^handle for a PV, podUID-name for an inline volume', () => {
    assert.equal(
      getUniqueVolumeName('kubernetes.io/csi', csiVolumeName('ebs.csi.example.com', 'vol-0a1b2c3d')),
      'kubernetes.io/csi/ebs.csi.example.com^vol-0a1b2c3d',
    );
    assert.equal(getUniqueVolumeNameWithPod('kubernetes.io/csi', 'uid-1', 'scratch'), 'kubernetes.io/csi/uid-1-scratch');
  });
  const escapes: [string, string][] = [
    ['kubernetes.io/csi', 'kubernetes.io~csi'],
    ['a/b/c', 'a~b~c'],
    ['plain', 'plain'],
  ];
  for (const [raw, escaped] of escapes) {
    it(`EscapeQualifiedName(${raw}) = ${escaped} and back`, () => {
      assert.equal(escapeQualifiedName(raw), escaped);
      assert.equal(unescapeQualifiedName(escaped), raw);
    });
  }
  it('escaping is lossy for names containing ~, as in kubelet', () => {
    assert.equal(unescapeQualifiedName(escapeQualifiedName('a~b')), 'a/b');
  });
  it('recognises sha256 directory names and safe path components', () => {
    assert.ok(isSha256Hex(sha256Hex('x')));
    assert.ok(!isSha256Hex('pvc-1'));
    assert.ok(!isSha256Hex(sha256Hex('x').toUpperCase()));
    for (const bad of ['', '.', '..', 'a/b', 'a\0b']) assert.ok(!isSafePathComponent(bad), bad);
    assert.ok(isSafePathComponent('..~..~etc'));
  });
});

describe('layout: paths', () => {
  const cases: [string, string, string][] = [
    ['pods dir', L.podsDir(), '/var/lib/kubelet/pods'],
    ['plugin dir is not escaped', L.csiPluginDir(), '/var/lib/kubelet/plugins/kubernetes.io/csi'],
    [
      'device mount path',
      L.csiDeviceMountPath('ebs.csi.example.com', 'vol-0a1b2c3d'),
      '/var/lib/kubelet/plugins/kubernetes.io/csi/ebs.csi.example.com/4e290f11dbc3910132aef6e3780c5e8fe84bbebd7c38217dd2bfa5dd6144861d/globalmount',
    ],
    ['pod volume dir escapes the plugin name', L.csiPodVolumeDir('uid-1', 'pvc-1'), '/var/lib/kubelet/pods/uid-1/volumes/kubernetes.io~csi/pvc-1'],
    ['pod mount path', L.csiPodMountPath('uid-1', 'pvc-1'), '/var/lib/kubelet/pods/uid-1/volumes/kubernetes.io~csi/pvc-1/mount'],
    ['block dir', L.csiBlockDir(), '/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices'],
    ['block data dir', L.csiBlockDataDir('spec-0'), '/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/spec-0/data'],
    ['global map path', L.csiGlobalMapPath('test.spec.1'), '/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/test.spec.1/dev'],
    ['block staging path', L.csiBlockStagingPath('spec-0'), '/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/staging/spec-0'],
    ['block publish path', L.csiBlockPublishPath('spec-0', 'uid-1'), '/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/spec-0/uid-1'],
    ['legacy staging path', L.csiLegacyDeviceMountPath('pv-1'), '/var/lib/kubelet/plugins/kubernetes.io/csi/pv/pv-1/globalmount'],
    ['driver socket', L.driverSocketPath('hostpath.csi.k8s.io'), '/var/lib/kubelet/plugins/hostpath.csi.k8s.io/csi.sock'],
  ];
  for (const [name, got, want] of cases) it(name, () => assert.equal(got, want));

  it('the pod device map path is (pods/<uid>/volumeDevices/kubernetes.io~csi, <spec>)', () => {
    assert.deepEqual(L.csiPodDeviceMapPath('uid-1', 'spec-0'), { dir: '/var/lib/kubelet/pods/uid-1/volumeDevices/kubernetes.io~csi', name: 'spec-0' });
  });
  it('a trailing slash on the root dir is dropped and a relative root is refused', () => {
    assert.equal(new KubeletLayout('/var/lib/kubelet/').podsDir(), '/var/lib/kubelet/pods');
    assert.throws(() => new KubeletLayout('var/lib/kubelet'), /absolute/);
  });
  it('contains() tells paths under the root from siblings with the same prefix', () => {
    assert.ok(L.contains('/var/lib/kubelet/pods'));
    assert.ok(L.contains('/var/lib/kubelet'));
    assert.ok(!L.contains('/var/lib/kubelet-evil/x'));
  });
});
