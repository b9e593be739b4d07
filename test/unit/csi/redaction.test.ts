// No secret reaches a trace: the observer of CSI calls (the agent's --trace) sees every request
// with its secrets' values and a service account token in volume_context replaced, while the
// driver gets them as they are.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { observedRegistry, redactCsiRequest, STRIPPED, type ObservedCsiCall } from '../../../src/csi/instrumented.js';
import type { CsiNodeClient, NodePublishVolumeRequest } from '../../../src/ports/csi.js';
import { FakeClock } from '../../support/fakeClock.js';

const REQUEST: NodePublishVolumeRequest = {
  volumeId: 'vol-1',
  publishContext: { devicePath: '/dev/xvdf' },
  stagingTargetPath: '/s',
  targetPath: '/t',
  volumeCapability: { mount: { fsType: '', mountFlags: [], volumeMountGroup: '' }, accessMode: { mode: 'SINGLE_NODE_WRITER' } },
  readonly: false,
  secrets: { password: 'hunter2', user: 'admin' },
  volumeContext: { tier: 'gold', 'csi.storage.k8s.io/serviceAccount.tokens': '{"vault":{"token":"eyJ.secret","expirationTimestamp":"2026-01-01T00:00:00Z"}}' },
};

describe('CSI request redaction for observers', () => {
  it('secrets values and the service account tokens are stripped; keys and everything else stay', () => {
    assert.deepEqual(redactCsiRequest(REQUEST), {
      ...REQUEST,
      secrets: { password: STRIPPED, user: STRIPPED },
      volumeContext: { tier: 'gold', 'csi.storage.k8s.io/serviceAccount.tokens': STRIPPED },
    });
    assert.equal(REQUEST.secrets['password'], 'hunter2', 'the request itself is not changed');
  });

  it('observedRegistry: the driver gets the secrets, the observer never sees them', async () => {
    const got: NodePublishVolumeRequest[] = [];
    const client: CsiNodeClient = {
      nodeGetCapabilities: () => Promise.resolve([]),
      nodeStageVolume: () => Promise.resolve(),
      nodeUnstageVolume: () => Promise.resolve(),
      nodePublishVolume: (r) => {
        got.push(r);
        return Promise.resolve();
      },
      nodeUnpublishVolume: () => Promise.resolve(),
    };
    const seen: ObservedCsiCall[] = [];
    const registry = observedRegistry({ client: () => client }, new FakeClock(), (c) => seen.push(c));
    await registry.client('d')?.nodePublishVolume(REQUEST);
    assert.equal(got[0]?.secrets['password'], 'hunter2');
    assert.equal(seen.length, 1);
    const text = JSON.stringify(seen);
    assert.ok(!text.includes('hunter2') && !text.includes('eyJ.secret'), text);
  });
});
