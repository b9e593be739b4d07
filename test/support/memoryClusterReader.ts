/**
 * A ClusterObjectReader (src/ports/cluster.ts) over a set of objects in memory, answering as the
 * API server would (GET by name, 404 as undefined; pods by spec.nodeName; whole lists), and
 * recording every call: the audit's read plan (src/audit/clusterReads.ts) tested without HTTP.
 *
 * Not named *.test.ts: npm test runs only *.test.js files.
 */
import type { ClusterObjects } from '../../src/api/clusterObjects.js';
import type { ClusterObjectReader } from '../../src/ports/cluster.js';

export interface MemoryClusterReader extends ClusterObjectReader {
  /** Every call, as `getPersistentVolume pv-1`, `listVolumeAttachments` … */
  readonly calls: string[];
}

export function memoryClusterReader(objects: ClusterObjects, source = 'memory'): MemoryClusterReader {
  const calls: string[] = [];
  const named = <T extends { metadata: { name: string; namespace?: string | undefined } }>(items: readonly T[], name: string, namespace?: string): T | undefined =>
    items.find((o) => o.metadata.name === name && (namespace === undefined || o.metadata.namespace === namespace));
  return {
    source,
    calls,
    getNode(name) {
      calls.push(`getNode ${name}`);
      const n = named(objects.nodes, name);
      return n === undefined ? Promise.reject(new Error(`nodes "${name}" not found`)) : Promise.resolve(n);
    },
    listPodsOnNode(nodeName) {
      calls.push(`listPodsOnNode ${nodeName}`);
      return Promise.resolve(objects.pods.filter((p) => (p.spec.nodeName ?? '') === nodeName));
    },
    getPersistentVolumeClaim(namespace, name) {
      calls.push(`getPersistentVolumeClaim ${namespace}/${name}`);
      return Promise.resolve(named(objects.claims, name, namespace));
    },
    getPersistentVolume(name) {
      calls.push(`getPersistentVolume ${name}`);
      return Promise.resolve(named(objects.persistentVolumes, name));
    },
    getVolumeAttachment(name) {
      calls.push(`getVolumeAttachment ${name}`);
      return Promise.resolve(named(objects.volumeAttachments, name));
    },
    getCSIDriver(name) {
      calls.push(`getCSIDriver ${name}`);
      return Promise.resolve(named(objects.csiDrivers, name));
    },
    listPersistentVolumes() {
      calls.push('listPersistentVolumes');
      return Promise.resolve(objects.persistentVolumes);
    },
    listVolumeAttachments() {
      calls.push('listVolumeAttachments');
      return Promise.resolve(objects.volumeAttachments);
    },
  };
}
