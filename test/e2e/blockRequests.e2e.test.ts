// What the real agent sends a real driver on the raw block path, read from the mock
// driver's journal. One pod uses two raw block PVs through volumeDevices: pv-rwo (ReadWriteOnce,
// a VolumeAttachment with attachmentMetadata, stage and publish Secrets) and pv-rwop
// (ReadWriteOncePod, attached through node-status.json only). The driver reports
// SINGLE_NODE_MULTI_WRITER (as csi-driver-host-path does) and its CSIDriver has podInfoOnMount.
// Each test checks one change against kubelet's csi_block.go over csi_client.go:
//  - the access mode mapper (getNodeV1AccessModeMapper) in NodeStageVolume and NodePublishVolume;
//  - the pod information of publishVolumeForBlock;
//  - publish_context from the VolumeAttachment and secrets from the PV's Secret refs.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { killAll } from '../support/e2e/nodeNamespace.js';
import type { JournalEntry, WrittenPod } from '../support/e2e/nodeDisk.js';
import { E2E_DRIVER, rootOnlySkip, TestNode, type TestVolume } from '../support/e2e/testNode.js';

interface BlockRequest {
  readonly volumeCapability?: { readonly block?: unknown; readonly mount?: unknown; readonly accessMode?: { readonly mode?: string } };
  readonly publishContext?: Record<string, string>;
  readonly secrets?: Record<string, string>;
  readonly volumeContext?: Record<string, string>;
  readonly stagingTargetPath?: string;
  readonly targetPath?: string;
}

const nodes: TestNode[] = [];

describe('raw block: what the driver receives (journal)', { skip: rootOnlySkip() }, () => {
  let node: TestNode;
  let rwo: TestVolume;
  let rwop: TestVolume;
  let pod: WrittenPod;
  let journal: JournalEntry[];
  const request = (method: string, vol: TestVolume): BlockRequest => {
    const e = journal.find((j) => j.method === method && j.phase === undefined && j.error === null && j.volumeId === vol.volumeHandle);
    assert.ok(e, `${method} OK for ${vol.pvName} in the journal`);
    return e.request as BlockRequest;
  };

  before(async () => {
    node = await TestNode.create('block-requests');
    nodes.push(node);
    await node.startDriver({ extra: ['--single-node-multi-writer'] });
    await node.disk.writeSecret('kube-system', 'stage-creds', { user: 'stager', password: 'st4ge' });
    await node.disk.writeSecret('default', 'publish-creds', { token: 'pub1ish' });
    rwo = await node.createVolume('pv-rwo', 'Block', {
      accessModes: ['ReadWriteOnce'],
      nodeStageSecretRef: { name: 'stage-creds', namespace: 'kube-system' },
      nodePublishSecretRef: { name: 'publish-creds', namespace: 'default' },
    });
    await node.disk.writeVolumeAttachment({ driver: E2E_DRIVER, volumeHandle: rwo.volumeHandle, pvName: rwo.pvName, attachmentMetadata: { devicePath: '/dev/mock-rwo' } });
    rwop = await node.createVolume('pv-rwop', 'Block', { accessModes: ['ReadWriteOncePod'] });
    pod = await node.disk.writePod({
      name: 'app',
      serviceAccountName: 'builder',
      volumes: [
        { name: 'a', claimName: rwo.claimName },
        { name: 'b', claimName: rwop.claimName },
      ],
      blockVolumes: ['a', 'b'],
    });
    const mark = await node.journalMark();
    await node.startAgent({ gate: false });
    for (const vol of [rwo, rwop]) {
      await node.waitForCall(mark, (e) => e.method === 'NodePublishVolume' && e.volumeId === vol.volumeHandle && e.error === null, `NodePublishVolume OK for ${vol.pvName}`);
    }
    journal = await node.journalSince(mark);
  });

  after(async () => {
    await killAll();
    for (const n of nodes) await n.disk.cleanup();
  });

  it('access mode: ReadWriteOnce -> SINGLE_NODE_MULTI_WRITER, ReadWriteOncePod -> SINGLE_NODE_SINGLE_WRITER, in NodeStageVolume and NodePublishVolume', () => {
    for (const [vol, mode] of [
      [rwo, 'SINGLE_NODE_MULTI_WRITER'],
      [rwop, 'SINGLE_NODE_SINGLE_WRITER'],
    ] as const) {
      for (const method of ['NodeStageVolume', 'NodePublishVolume']) {
        const cap = request(method, vol).volumeCapability;
        assert.ok(cap?.block !== undefined && cap.mount === undefined, `${method} ${vol.pvName}: a block capability`);
        assert.equal(cap.accessMode?.mode, mode, `${method} ${vol.pvName}`);
      }
    }
  });

  it('pod information: NodePublishVolume gets the pod keys (service account builder, ephemeral false); NodeStageVolume does not', () => {
    for (const vol of [rwo, rwop]) {
      assert.deepEqual(request('NodePublishVolume', vol).volumeContext, {
        'csi.storage.k8s.io/pod.name': 'app',
        'csi.storage.k8s.io/pod.namespace': 'default',
        'csi.storage.k8s.io/pod.uid': pod.uid,
        'csi.storage.k8s.io/serviceAccount.name': 'builder',
        'csi.storage.k8s.io/ephemeral': 'false',
      });
      assert.deepEqual(request('NodeStageVolume', vol).volumeContext ?? {}, {});
    }
  });

  it('publish_context from the VolumeAttachment (none without attachmentMetadata), secrets from the Secret refs (the journal strips their values)', () => {
    assert.deepEqual(request('NodeStageVolume', rwo).publishContext, { devicePath: '/dev/mock-rwo' });
    assert.deepEqual(request('NodePublishVolume', rwo).publishContext, { devicePath: '/dev/mock-rwo' });
    assert.deepEqual(request('NodeStageVolume', rwop).publishContext ?? {}, {});
    assert.deepEqual(request('NodeStageVolume', rwo).secrets, { user: '***stripped***', password: '***stripped***' });
    assert.deepEqual(request('NodePublishVolume', rwo).secrets, { token: '***stripped***' });
    assert.deepEqual(request('NodeStageVolume', rwop).secrets ?? {}, {});
  });

  it('no Secret value appears in the agent\'s log', async () => {
    const text = JSON.stringify(await node.log('agent'));
    for (const value of ['stager', 'st4ge', 'pub1ish']) assert.ok(!text.includes(value), `the agent log shows ${value}`);
  });
});
