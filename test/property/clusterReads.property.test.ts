// Property: what the audit reads of the API server by name (src/audit/clusterReads.ts) gives the
// same findings (at-risk, attached-elsewhere, pod-gone, wantedBy) as the whole view it read
// before (its node and pods, their claims, and every PV, VolumeAttachment and CSIDriver), for any
// cluster the attach/detach controller can make: a volume whose PV allows one node only is
// attached (has a VolumeAttachment) to one node at most, and a driver whose CSIDriver says
// attachRequired: false has none. Anything else is random: which volumes are staged here and with
// what verdict, volumesInUse and volumesAttached, VolumeAttachments that say attached or not, to
// this node or others, PVs that are gone, claims missing or unbound, pods of other nodes, drivers
// without a CSIDriver. And the reads stay bounded by the node: without the cluster-wide lists, at
// most 2 + claims + their PVs + drivers + 2 × staged volumes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import fc from 'fast-check';

import { parseClusterList, type ClusterObjects } from '../../src/api/clusterObjects.js';
import { clusterAudit } from '../../src/audit/clusterFindings.js';
import { multiAttachForbidden, readClusterObjects, stagedVolumes } from '../../src/audit/clusterReads.js';
import { clusterStateFor } from '../../src/audit/clusterState.js';
import type { Verdict } from '../../src/audit/report.js';
import { reportOf } from '../support/auditReports.js';
import { claim, csiDriver, list, node, persistentVolume, pod, volumeAttachment, type KubeObject } from '../support/clusterObjects.js';
import { memoryClusterReader } from '../support/memoryClusterReader.js';
import { bound, runs } from './runs.js';

const HERE = 'node-1';
const NODES = [HERE, 'node-2', 'node-3'] as const;
/** A driver that attaches (CSIDriver says so), one that does not, one without a CSIDriver object (attaches). */
const DRIVERS = ['attach.csi.example.com', 'noattach.csi.example.com', 'bare.csi.example.com'] as const;
const ACCESS_MODES = [['ReadWriteOnce'], ['ReadWriteOncePod'], ['ReadWriteMany'], ['ReadOnlyMany'], [], ['ReadWriteOnce', 'ReadOnlyMany']] as const;

interface VolumeCase {
  readonly driver: (typeof DRIVERS)[number];
  readonly accessModes: readonly string[];
  readonly pvExists: boolean;
  /** Nodes with a VolumeAttachment of it, and whether it says attached. */
  readonly attachments: readonly { readonly node: string; readonly attached: boolean }[];
  readonly staged: false | { readonly verdict: Verdict; readonly podDir: 'mine' | 'gone' | 'none' };
  readonly inUse: boolean;
  readonly inAttached: boolean;
  /** A pod on this node with a claim on it (bound, unbound, or naming a claim that is missing). */
  readonly wanted: 'no' | 'bound' | 'unbound' | 'missing-claim' | 'other-node';
}

const volumeCase: fc.Arbitrary<VolumeCase> = fc
  .record({
    driver: fc.constantFrom(...DRIVERS),
    accessModes: fc.constantFrom(...ACCESS_MODES),
    pvExists: fc.boolean(),
    attachments: fc.uniqueArray(fc.record({ node: fc.constantFrom(...NODES), attached: fc.boolean() }), { selector: (a) => a.node, maxLength: 3 }),
    staged: fc.oneof(fc.constant(false as const), fc.record({ verdict: fc.constantFrom<Verdict>('tracked', 'recovered', 'orphaned'), podDir: fc.constantFrom('mine' as const, 'gone' as const, 'none' as const) })),
    inUse: fc.boolean(),
    inAttached: fc.boolean(),
    wanted: fc.constantFrom('no' as const, 'bound' as const, 'unbound' as const, 'missing-claim' as const, 'other-node' as const),
  })
  .map((v) => {
    // The attach/detach controller's rules: no VolumeAttachment for a driver that does not attach;
    // a second node only for a PV that allows several.
    if (v.driver === 'noattach.csi.example.com') return { ...v, attachments: [] };
    const single = v.pvExists && multiAttachForbidden({ metadata: { name: 'x' }, spec: { accessModes: [...v.accessModes] } });
    return single ? { ...v, attachments: v.attachments.slice(0, 1) } : v;
  });

/** Noise: VolumeAttachments of volumes staged nowhere here, to any node. */
const noise = fc.array(fc.record({ node: fc.constantFrom(...NODES), attached: fc.boolean() }), { maxLength: 3 });

function build(volumes: readonly VolumeCase[], extra: readonly { node: string; attached: boolean }[], csiDriverObjects: boolean) {
  const items: KubeObject[] = [];
  if (csiDriverObjects) items.push(csiDriver(DRIVERS[0], true), csiDriver(DRIVERS[1], false));
  const inUse: string[] = [];
  const attached: string[] = [];
  const staged: { driver: string; handle: string; verdict: Verdict; pods: string[] }[] = [];
  volumes.forEach((v, i) => {
    const handle = `h${i}`;
    const pvName = `pv-${i}`;
    const unique = `kubernetes.io/csi/${v.driver}^${handle}`;
    if (v.pvExists) {
      const pv = persistentVolume(pvName, v.driver, handle, { namespace: 'default', name: `c-${i}` });
      items.push({ ...pv, spec: { ...(pv['spec'] as Record<string, unknown>), accessModes: [...v.accessModes] } });
    }
    for (const a of v.attachments) items.push(volumeAttachment(v.driver, handle, pvName, a.node, a.attached));
    if (v.inUse) inUse.push(unique);
    if (v.inAttached) attached.push(unique);
    if (v.wanted !== 'no') {
      items.push(pod(`app-${i}`, { nodeName: v.wanted === 'other-node' ? 'node-2' : HERE, claims: [`c-${i}`], uid: `uid-${i}` }));
      if (v.wanted !== 'missing-claim') items.push(claim(`c-${i}`, v.wanted === 'unbound' ? '' : pvName));
    }
    if (v.staged !== false) staged.push({ driver: v.driver, handle, verdict: v.staged.verdict, pods: v.staged.podDir === 'mine' ? [`uid-${i}`] : v.staged.podDir === 'gone' ? [`gone-${i}`] : [] });
  });
  extra.forEach((a, i) => items.push(volumeAttachment(DRIVERS[0], `noise-${i}`, `pv-noise-${i}`, a.node, a.attached)));
  items.push(node(HERE, { volumesInUse: inUse, volumesAttached: attached }), node('node-2'), node('node-3'));
  return { objects: parseClusterList(JSON.stringify(list(items)), 'cluster.json'), report: reportOf(staged) };
}

/** The view the audit read before: its node and pods, their claims, and every PV, VolumeAttachment and CSIDriver. */
function wholeView(o: ClusterObjects): ClusterObjects {
  const pods = o.pods.filter((p) => p.spec.nodeName === HERE);
  const keys = new Set(pods.flatMap((p) => (p.spec.volumes ?? []).flatMap((v) => (v.persistentVolumeClaim ? [`${p.metadata.namespace}/${v.persistentVolumeClaim.claimName}`] : []))));
  return { ...o, nodes: o.nodes.filter((n) => n.metadata.name === HERE), pods, claims: o.claims.filter((c) => keys.has(`${c.metadata.namespace}/${c.metadata.name}`)) };
}

describe('the audit\'s reads by name give the findings of the whole view', () => {
  it('for any cluster the attach/detach controller can make', bound(), async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(volumeCase, { maxLength: 6 }), noise, fc.boolean(), fc.boolean(), async (volumes, extra, csiDriverObjects, everyPersistentVolume) => {
        const { objects, report } = build(volumes, extra, csiDriverObjects);
        const reader = memoryClusterReader(objects);
        const staged = stagedVolumes(report);
        const read = await readClusterObjects(reader, { nodeName: HERE, staged, everyPersistentVolume });
        const byName = clusterAudit(report, clusterStateFor(read.objects, HERE, 'src'));
        const whole = clusterAudit(report, clusterStateFor(wholeView(objects), HERE, 'src'));
        assert.deepEqual(byName, whole);
        if (everyPersistentVolume) assert.deepEqual(read.objects.persistentVolumes, objects.persistentVolumes);
        if (read.listedBecause === undefined && !everyPersistentVolume) {
          assert.ok(!reader.calls.some((c) => c === 'listVolumeAttachments' || c === 'listPersistentVolumes'), reader.calls.join('\n'));
          const pods = reader.calls.filter((c) => c.startsWith('getPersistentVolumeClaim')).length;
          const drivers = new Set(staged.map((v) => v.driver)).size;
          assert.ok(reader.calls.length <= 2 + 2 * pods + drivers + 2 * staged.length, reader.calls.join('\n'));
        }
      }),
      runs(),
    );
  });
});
