// Service account tokens for drivers whose CSIDriver lists tokenRequests
// (csi_mounter.go SetUpAt -> podServiceAccountTokenAttrs). For each token request kubelet asks the
// API server for a token of the pod's service account (TokenRequest, audiences [audience] or none
// for "", expirationSeconds, bound to the pod) and sends the statuses, json.Marshal'ed by audience,
// under csi.storage.k8s.io/serviceAccount.tokens: in volume_context, or in the publish secrets when
// the CSIDriver has serviceAccountTokenInSecrets (Kubernetes 1.35). Whatever podInfoOnMount says.
// A failure is a transient failure of SetUp. The raw block path sends no tokens.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CSIDriverInfo, Pod } from '../../../src/api/core.js';
import type { NodePublishVolumeRequest } from '../../../src/ports/csi.js';
import { DRIVER, InMemoryNode, NODE } from '../../support/inMemoryNode.js';

const TOKENS_KEY = 'csi.storage.k8s.io/serviceAccount.tokens';
const publishes = (node: InMemoryNode): NodePublishVolumeRequest[] =>
  node.driver.callsOf('NodePublishVolume').map((c) => c.request as NodePublishVolumeRequest);

function driverWith(node: InMemoryNode, extra: Partial<CSIDriverInfo>): void {
  const d = node.cluster.drivers.get(DRIVER);
  assert.ok(d);
  node.cluster.drivers.set(DRIVER, { ...d, ...extra });
}

/** A pod whose container mounts every volume, or uses `extra.volumeDevices` as devices. */
function podOf(volumes: Pod['volumes'], extra: Partial<Pod> = {}): Pod {
  const devices = extra.volumeDevices ?? [];
  return { uid: 'pod-a', namespace: 'ns-1', name: 'pod-a', nodeName: NODE, serviceAccountName: 'sa-1', volumes, volumeMounts: volumes.map((v) => v.name).filter((n) => !devices.includes(n)), volumeDevices: devices, ...extra };
}

/** A pod with one PV (claim in ns-1), mounted through the volume manager; steps until published or `steps` ran. */
async function mountPv(node: InMemoryNode, o: { block?: boolean; steps?: number } = {}): Promise<void> {
  node.addVolume('pv-1', 'vol-1', o.block === true ? { mode: 'Block' } : {});
  node.cluster.pvcs.set('ns-1/claim', { namespace: 'ns-1', name: 'claim', uid: node.cluster.pvs.get('pv-1')?.claimRef?.uid ?? '', volumeName: 'pv-1', phase: 'Bound' });
  node.cluster.addPod(podOf([{ name: 'data', persistentVolumeClaim: { claimName: 'claim' } }], o.block === true ? { volumeDevices: ['data'] } : {}));
  const vm = await node.startKubelet(false);
  if (o.steps !== undefined) {
    await node.steps(o.steps);
    await vm.waitForOperations();
    return;
  }
  await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
}

describe('podServiceAccountTokenAttrs: tokens from CSIDriver tokenRequests', () => {
  it('two token requests: one TokenRequest each (audience "" asks for no audience), bound to the pod; the statuses by audience in volume_context', async () => {
    const node = new InMemoryNode({ podInfoOnMount: false });
    driverWith(node, { tokenRequests: [{ audience: 'vault', expirationSeconds: 3600 }, { audience: '' }] });
    await mountPv(node);
    assert.deepEqual(node.cluster.tokenRequests, [
      { namespace: 'ns-1', serviceAccountName: 'sa-1', audiences: ['vault'], expirationSeconds: 3600, boundPod: { name: 'pod-a', uid: 'pod-a' } },
      { namespace: 'ns-1', serviceAccountName: 'sa-1', audiences: [], boundPod: { name: 'pod-a', uid: 'pod-a' } },
    ]);
    const [req] = publishes(node);
    assert.ok(req);
    const vault = node.cluster.mintedToken('ns-1', 'sa-1', ['vault']);
    const plain = node.cluster.mintedToken('ns-1', 'sa-1', []);
    // Go's json.Marshal of map[string]TokenRequestStatus: keys sorted, token then expirationTimestamp.
    assert.equal(
      req.volumeContext[TOKENS_KEY],
      `{"":{"token":"${plain.token}","expirationTimestamp":"${plain.expirationTimestamp}"},"vault":{"token":"${vault.token}","expirationTimestamp":"${vault.expirationTimestamp}"}}`,
    );
    assert.deepEqual(Object.keys(req.volumeContext), [TOKENS_KEY], 'podInfoOnMount false: no pod keys, the tokens all the same');
    assert.deepEqual(req.secrets, {});
  });

  it('serviceAccountTokenInSecrets: the same key in the publish secrets, not in volume_context', async () => {
    const node = new InMemoryNode({ podInfoOnMount: false });
    driverWith(node, { tokenRequests: [{ audience: 'vault' }], serviceAccountTokenInSecrets: true });
    await mountPv(node);
    const [req] = publishes(node);
    assert.ok(req);
    assert.equal(req.volumeContext[TOKENS_KEY], undefined);
    assert.match(req.secrets[TOKENS_KEY] ?? '', /^\{"vault":\{"token":"[^"]+","expirationTimestamp":"[^"]+"\}\}$/);
  });

  it('an inline volume gets them too, with the pod keys when podInfoOnMount', async () => {
    const node = new InMemoryNode({ podInfoOnMount: true });
    driverWith(node, { tokenRequests: [{ audience: 'vault' }] });
    node.cluster.addPod(podOf([{ name: 'scratch', csi: { driver: DRIVER } }]));
    const vm = await node.startKubelet(false);
    await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
    const [req] = publishes(node);
    assert.equal(req?.volumeContext['csi.storage.k8s.io/serviceAccount.name'], 'sa-1');
    assert.match(req?.volumeContext[TOKENS_KEY] ?? '', /^\{"vault":/);
  });

  it('no tokenRequests, or no CSIDriver: no key and no TokenRequest', async () => {
    const node = new InMemoryNode();
    await mountPv(node);
    assert.equal(publishes(node)[0]?.volumeContext[TOKENS_KEY], undefined);
    assert.deepEqual(node.cluster.tokenRequests, []);
  });

  it('a view that cannot issue tokens: SetUp fails as a transient failure with kubelet\'s text, retried, nothing published', async () => {
    const node = new InMemoryNode();
    driverWith(node, { tokenRequests: [{ audience: 'vault' }] });
    node.cluster.tokensRefused = 'the cluster dir has no API server to issue service account tokens';
    await mountPv(node, { steps: 10 });
    assert.deepEqual(publishes(node), []);
    const errors = node.logger.lines.filter((l) => l.severity === 'E' && l.values['operation'] === 'volume_mount').map((l) => l.msg);
    assert.ok(errors.length >= 2, JSON.stringify(errors));
    assert.ok(
      errors.every((e) => e.includes('kubernetes.io/csi: mounter.SetUpAt failed to get service accoount token attributes: the cluster dir has no API server to issue service account tokens')),
      JSON.stringify(errors),
    );
  });

  it('raw block: publishVolumeForBlock sends no tokens', async () => {
    const node = new InMemoryNode();
    driverWith(node, { tokenRequests: [{ audience: 'vault' }] });
    await mountPv(node, { block: true });
    assert.equal(publishes(node)[0]?.volumeContext[TOKENS_KEY], undefined);
    assert.deepEqual(node.cluster.tokenRequests, []);
  });
});
