/**
 * One pass over the cluster dir's manifests merged into one view: files in name order, the first
 * object of a name (or pod UID) winning, each later one reported as a problem naming its file,
 * document and line. Pure bookkeeping: the view (clusterDir.ts) reads the files.
 */
import type { CSIDriverInfo, PersistentVolumeClaim, Pod, SecretData, VolumeAttachmentInfo } from '../../api/core.js';
import type { PersistentVolume } from '../../api/core.js';
import { objectProblem, type ManifestProblem, type ParsedFile } from './clusterManifests.js';

/** What one pass read: the merged objects and every problem met. */
export interface Snapshot {
  readonly pods: readonly Pod[];
  readonly pvcs: ReadonlyMap<string, PersistentVolumeClaim>;
  readonly pvs: ReadonlyMap<string, PersistentVolume>;
  readonly drivers: ReadonlyMap<string, CSIDriverInfo>;
  /** By "namespace/name". */
  readonly secrets: ReadonlyMap<string, SecretData>;
  readonly volumeAttachments: ReadonlyMap<string, VolumeAttachmentInfo>;
  readonly problems: readonly ManifestProblem[];
}

/** Collects the objects of one pass, first one of a name winning. */
export class SnapshotBuilder {
  readonly pods: Pod[] = [];
  readonly podKeys = new Set<string>();
  readonly podUIDs = new Map<string, string>();
  readonly pvcs = new Map<string, PersistentVolumeClaim>();
  readonly pvs = new Map<string, PersistentVolume>();
  readonly drivers = new Map<string, CSIDriverInfo>();
  readonly secrets = new Map<string, SecretData>();
  readonly volumeAttachments = new Map<string, VolumeAttachmentInfo>();
  readonly problems: ManifestProblem[] = [];
  documents = 0;

  add(file: string, parsed: ParsedFile): void {
    this.documents += parsed.documents;
    for (const o of parsed.objects) {
      const dup = (message: string, field: 'name' | 'uid', line: number | undefined): void => {
        this.problems.push(objectProblem(file, o.document, undefined, undefined, o.what, message, ['metadata', field], line));
      };
      switch (o.kind) {
        case 'Pod': {
          const pod = o.pod;
          const key = `${pod.namespace}/${pod.name}`;
          const other = this.podUIDs.get(pod.uid);
          if (this.podKeys.has(key)) dup(`a Pod ${key} was already read from an earlier file or document`, 'name', o.nameLine);
          else if (other !== undefined) dup(`metadata.uid ${pod.uid} is already the UID of Pod ${other}`, 'uid', o.uidLine);
          else {
            this.podKeys.add(key);
            this.podUIDs.set(pod.uid, key);
            this.pods.push(pod);
          }
          break;
        }
        case 'PersistentVolumeClaim': {
          const key = `${o.pvc.namespace}/${o.pvc.name}`;
          if (this.pvcs.has(key)) dup(`a PersistentVolumeClaim ${key} was already read from an earlier file or document`, 'name', o.nameLine);
          else this.pvcs.set(key, o.pvc);
          break;
        }
        case 'PersistentVolume':
          if (this.pvs.has(o.pv.name)) dup(`a PersistentVolume ${o.pv.name} was already read from an earlier file or document`, 'name', o.nameLine);
          else this.pvs.set(o.pv.name, o.pv);
          break;
        case 'CSIDriver':
          if (this.drivers.has(o.driver.name)) dup(`a CSIDriver ${o.driver.name} was already read from an earlier file or document`, 'name', o.nameLine);
          else this.drivers.set(o.driver.name, o.driver);
          break;
        case 'Secret': {
          const key = `${o.namespace}/${o.name}`;
          if (this.secrets.has(key)) dup(`a Secret ${key} was already read from an earlier file or document`, 'name', o.nameLine);
          else this.secrets.set(key, o.data);
          break;
        }
        case 'VolumeAttachment':
          if (this.volumeAttachments.has(o.attachment.name)) dup(`a VolumeAttachment ${o.attachment.name} was already read from an earlier file or document`, 'name', o.nameLine);
          else this.volumeAttachments.set(o.attachment.name, o.attachment);
          break;
      }
    }
  }

  /**
   * The cluster dir plays the PV controller for a pre-bound claim: a PV without spec.claimRef that
   * exactly one PVC names in spec.volumeName is bound to that claim (its namespace, name and uid).
   * A PV two claims name, or none, stays unbound; an explicit claimRef is kept as written.
   */
  private bindPreBoundClaims(): Map<string, PersistentVolume> {
    const claimsOf = new Map<string, PersistentVolumeClaim[]>();
    for (const pvc of this.pvcs.values()) {
      if (pvc.volumeName === '') continue;
      const list = claimsOf.get(pvc.volumeName);
      if (list === undefined) claimsOf.set(pvc.volumeName, [pvc]);
      else list.push(pvc);
    }
    const out = new Map<string, PersistentVolume>();
    for (const [name, pv] of this.pvs) {
      const claims = claimsOf.get(name);
      const only = claims?.length === 1 ? claims[0] : undefined;
      out.set(name, pv.claimRef === undefined && only !== undefined ? { ...pv, claimRef: { namespace: only.namespace, name: only.name, uid: only.uid } } : pv);
    }
    return out;
  }

  build(): Snapshot {
    return { pods: this.pods, pvcs: this.pvcs, pvs: this.bindPreBoundClaims(), drivers: this.drivers, secrets: this.secrets, volumeAttachments: this.volumeAttachments, problems: this.problems };
  }
}
