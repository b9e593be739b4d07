/**
 * The simulated cluster of the API cost bench (bench/apiCost.ts) and of its test
 * (test/cli/apiCost.cli.test.ts): `nodes` nodes, each with `pods` pods, each pod with its own
 * claim, a ReadWriteOnce CSI PersistentVolume and a VolumeAttachment to its node (attached), and
 * one CSIDriver; and the disk of the audited node, node-00001, whose `pods` volumes are staged and
 * published. Three states of node 1:
 *   healthy             every volume tracked, in use, attached here;
 *   at-risk             one volume's pod was deleted (drain) while the volume stays staged: no pod
 *                       dir, still attached here, gone from volumesInUse (KEP-6058 story 1);
 *   attached-elsewhere  the same, after the attach/detach controller detached it from
 *                       node-00001 and attached it to node-00002, where its pod now runs.
 *
 * Not named *.test.ts: npm test runs only *.test.js files.
 */
import { claim, csiDriver, node, persistentVolume, pod, volumeAttachment, type KubeObject } from './clusterObjects.js';
import { NodeFixture } from './nodeFixture.js';

export const DRIVER = 'ebs.csi.example.com';
export const AUDITED = 'node-00001';
export const OTHER = 'node-00002';

export const nodeName = (i: number): string => `node-${String(i).padStart(5, '0')}`;
const handle = (n: number, j: number): string => `vol-${n}-${j}`;
const uniqueName = (h: string): string => `kubernetes.io/csi/${DRIVER}^${h}`;

export type State = 'healthy' | 'at-risk' | 'attached-elsewhere';
export const STATES: readonly State[] = ['healthy', 'at-risk', 'attached-elsewhere'];

/**
 * The cluster of `nodes` nodes × `pods` pods (see the header) in `state`. Node 1's last volume is
 * the one story 1 happens to. The objects of the other nodes are shared between states.
 */
export function benchCluster(nodes: number, pods: number): (state: State) => KubeObject[] {
  const shared: KubeObject[] = [csiDriver(DRIVER)];
  for (let n = 2; n <= nodes; n++) {
    const name = nodeName(n);
    const names: string[] = [];
    for (let j = 1; j <= pods; j++) {
      const h = handle(n, j);
      names.push(uniqueName(h));
      shared.push(
        pod(`app-${n}-${j}`, { nodeName: name, claims: [`data-${n}-${j}`], uid: `uid-${n}-${j}` }),
        claim(`data-${n}-${j}`, `pv-${n}-${j}`),
        persistentVolume(`pv-${n}-${j}`, DRIVER, h, { namespace: 'default', name: `data-${n}-${j}` }),
        volumeAttachment(DRIVER, h, `pv-${n}-${j}`, name),
      );
    }
    if (n !== 2) shared.push(node(name, { volumesInUse: names, volumesAttached: names }));
  }
  return (state) => {
    const own: KubeObject[] = [];
    const all: string[] = [];
    for (let j = 1; j <= pods; j++) {
      const h = handle(1, j);
      all.push(uniqueName(h));
      const lost = j === pods && state !== 'healthy';
      own.push(claim(`data-1-${j}`, `pv-1-${j}`), persistentVolume(`pv-1-${j}`, DRIVER, h, { namespace: 'default', name: `data-1-${j}` }));
      if (!lost) own.push(pod(`app-1-${j}`, { nodeName: AUDITED, claims: [`data-1-${j}`], uid: `uid-1-${j}` }));
      if (lost && state === 'attached-elsewhere') {
        own.push(pod(`app-1-${j}`, { nodeName: OTHER, claims: [`data-1-${j}`], uid: `uid-1-${j}-moved` }), volumeAttachment(DRIVER, h, `pv-1-${j}`, OTHER));
      } else {
        own.push(volumeAttachment(DRIVER, h, `pv-1-${j}`, AUDITED));
      }
    }
    const lostName = all[all.length - 1] ?? '';
    const inUse = state === 'healthy' ? all : all.filter((v) => v !== lostName);
    const attached = state === 'attached-elsewhere' ? inUse : all;
    const other = Array.from({ length: pods }, (_, j) => uniqueName(handle(2, j + 1)));
    const otherAttached = state === 'attached-elsewhere' ? [...other, lostName] : other;
    return [node(AUDITED, { volumesInUse: inUse, volumesAttached: attached }), node(OTHER, { volumesInUse: otherAttached, volumesAttached: otherAttached }), ...own, ...shared];
  };
}

/** Node 1's disk in `state`: every volume staged; published to its pod but for the lost one. */
export async function benchNode(pods: number, state: State): Promise<{ fx: NodeFixture; mountinfo: string }> {
  const fx = await NodeFixture.create();
  for (let j = 1; j <= pods; j++) {
    const h = handle(1, j);
    const gm = await fx.stage({ driver: DRIVER, handle: h, specVolID: `pv-1-${j}` });
    if (j === pods && state !== 'healthy') continue;
    await fx.podVolume({ uid: `uid-1-${j}`, specName: `pv-1-${j}`, driver: DRIVER, handle: h, nodeName: AUDITED, boundFrom: gm });
  }
  return { fx, mountinfo: await fx.writeMountInfo() };
}

