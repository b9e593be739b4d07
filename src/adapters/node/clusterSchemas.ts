/**
 * The schemas of the Kubernetes objects nodevol reads from a cluster dir (Pod,
 * PersistentVolumeClaim, PersistentVolume, CSIDriver, node-status.json), with the API server's
 * rules for the fields nodevol uses (names end up in paths under the kubelet root dir), and
 * their conversion to the ClusterView types. Pure: no I/O, no YAML (clusterManifests.ts reads
 * the files and reports the problems).
 */
import { createHash } from 'node:crypto';

import { z } from 'zod';

import type { CSIDriverInfo, PersistentVolumeClaim, Pod, PodVolumeSource, SecretData, VolumeAttachmentInfo } from '../../api/core.js';
import type { CSIPersistentVolumeSource, CSIVolumeSource, PersistentVolume } from '../../api/core.js';

// The fields nodevol uses; unknown fields are stripped, unknown kinds ignored.

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** Pod UIDs become directory names under <root>/pods: one safe path segment. */
const POD_UID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

const dnsLabel = z
  .string()
  .max(63, 'must be at most 63 characters')
  .regex(DNS1123_LABEL, 'must be a DNS-1123 label (lowercase letters, digits and "-", starting and ending with a letter or digit)');
const dnsSubdomain = z
  .string()
  .max(253, 'must be at most 253 characters')
  .regex(DNS1123_SUBDOMAIN, 'must be a DNS-1123 subdomain (lowercase letters, digits, "-" and ".", starting and ending with a letter or digit)');
/** ValidateCSIDriverName: at most 63 characters, a DNS-1123 subdomain once lowercased. */
const csiDriverName = z
  .string()
  .min(1, 'must not be empty')
  .max(63, 'must be at most 63 characters')
  .refine((s) => DNS1123_SUBDOMAIN.test(s.toLowerCase()), 'must be a CSI driver name (letters, digits, "-" and ".", starting and ending with a letter or digit)');
const podUID = z.string().regex(POD_UID, 'must be letters, digits, ".", "_" and "-" (at most 128, starting with a letter or digit)');
const stringMap = z.record(z.string());
const volumeMode = z.enum(['Filesystem', 'Block']);
const secretRef = z.object({ name: z.string().min(1), namespace: z.string().min(1) });

const csiInline = z.object({
  driver: csiDriverName,
  readOnly: z.boolean().optional(),
  fsType: z.string().optional(),
  volumeAttributes: stringMap.optional(),
  nodePublishSecretRef: z.object({ name: z.string().min(1, 'must not be empty') }).optional(),
});

const podVolume = z
  .object({
    name: dnsLabel,
    persistentVolumeClaim: z.object({ claimName: z.string().min(1, 'must not be empty'), readOnly: z.boolean().optional() }).optional(),
    csi: csiInline.optional(),
  })
  .refine((v) => v.persistentVolumeClaim === undefined || v.csi === undefined, {
    message: 'may not specify both persistentVolumeClaim and csi',
    path: ['csi'],
  });

/** metav1.Time as JSON carries it: RFC 3339 ("2026-01-01T00:00:00Z"). */
const rfc3339 = z.string().regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/, 'must be an RFC 3339 time (2026-01-01T00:00:00Z)');
const volumeRef = z.object({ name: z.string().min(1, 'must not be empty') });
/** A container's volume use: the names kubelet's populator reads (GetPodVolumeNames). */
const container = z.object({ volumeMounts: z.array(volumeRef).optional(), volumeDevices: z.array(volumeRef).optional() });
const CONTAINER_LISTS = ['containers', 'initContainers', 'ephemeralContainers'] as const;

const podSchema = z.object({
  apiVersion: z.literal('v1'),
  kind: z.literal('Pod'),
  metadata: z.object({ name: dnsSubdomain, namespace: dnsLabel.default('default'), uid: podUID.optional(), deletionTimestamp: rfc3339.optional() }),
  status: z.object({ phase: z.enum(['Pending', 'Running', 'Succeeded', 'Failed', 'Unknown']).optional() }).default({}),
  spec: z
    .object({
      nodeName: z.string().default(''),
      // What the API server's ServiceAccount admission plugin gives a pod that names none.
      serviceAccountName: dnsSubdomain.default('default'),
      volumes: z.array(podVolume).default([]),
      securityContext: z.object({ fsGroup: z.number().int().min(0).max(2147483647).optional() }).optional(),
      containers: z.array(container).default([]),
      initContainers: z.array(container).default([]),
      ephemeralContainers: z.array(container).default([]),
    })
    .superRefine((spec, ctx) => {
      const seen = new Set<string>();
      spec.volumes.forEach((v, i) => {
        if (seen.has(v.name)) ctx.addIssue({ code: z.ZodIssueCode.custom, message: `duplicate volume name ${JSON.stringify(v.name)}`, path: ['volumes', i, 'name'] });
        seen.add(v.name);
      });
      // The API server's rules for a container's volume use (validateVolumeMounts, validateVolumeDevices).
      const byName = new Map(spec.volumes.map((v) => [v.name, v]));
      for (const list of CONTAINER_LISTS) {
        spec[list].forEach((c, ci) => {
          const mounted = new Set((c.volumeMounts ?? []).map((m) => m.name));
          (c.volumeMounts ?? []).forEach((m, mi) => {
            if (!byName.has(m.name)) ctx.addIssue({ code: z.ZodIssueCode.custom, message: `not found: no volume ${JSON.stringify(m.name)} in spec.volumes`, path: [list, ci, 'volumeMounts', mi, 'name'] });
          });
          (c.volumeDevices ?? []).forEach((d, di) => {
            const path = [list, ci, 'volumeDevices', di, 'name'];
            const v = byName.get(d.name);
            if (v === undefined) ctx.addIssue({ code: z.ZodIssueCode.custom, message: `not found: no volume ${JSON.stringify(d.name)} in spec.volumes`, path });
            else if (v.persistentVolumeClaim === undefined) ctx.addIssue({ code: z.ZodIssueCode.custom, message: `can only use volume source type of PersistentVolumeClaim for block mode`, path });
            else if (mounted.has(d.name)) ctx.addIssue({ code: z.ZodIssueCode.custom, message: `${JSON.stringify(d.name)} is in both volumeMounts and volumeDevices of this container`, path });
          });
        });
      }
    }),
});

const pvcSchema = z.object({
  apiVersion: z.literal('v1'),
  kind: z.literal('PersistentVolumeClaim'),
  metadata: z.object({ name: dnsSubdomain, namespace: dnsLabel.default('default'), uid: podUID.optional(), deletionTimestamp: rfc3339.optional() }),
  spec: z.object({ volumeName: z.string().default(''), volumeMode: volumeMode.optional() }).default({}),
  status: z.object({ phase: z.enum(['Pending', 'Bound', 'Lost']).optional() }).default({}),
});

const pvSchema = z.object({
  apiVersion: z.literal('v1'),
  kind: z.literal('PersistentVolume'),
  metadata: z.object({ name: dnsSubdomain }),
  spec: z
    .object({
      csi: z
        .object({
          driver: csiDriverName,
          volumeHandle: z.string().min(1, 'must not be empty'),
          readOnly: z.boolean().optional(),
          fsType: z.string().optional(),
          volumeAttributes: stringMap.optional(),
          nodeStageSecretRef: secretRef.optional(),
          nodePublishSecretRef: secretRef.optional(),
        })
        .optional(),
      volumeMode: volumeMode.optional(),
      accessModes: z.array(z.string()).optional(),
      mountOptions: z.array(z.string()).optional(),
      claimRef: z.object({ namespace: dnsLabel.default('default'), name: dnsSubdomain, uid: podUID.optional() }).optional(),
    })
    .default({}),
});

/** storage/v1 TokenRequest, with the API server's rules (ValidateCSIDriver): an audience once, 10 minutes to 2^32 s. */
const tokenRequest = z.object({
  audience: z.string().default(''),
  expirationSeconds: z.number().int().min(600, 'may not specify a duration less than 10 minutes').max(2 ** 32 - 1, 'may not specify a duration larger than 2^32 seconds').optional(),
});

const csiDriverSchema = z.object({
  apiVersion: z.enum(['storage.k8s.io/v1', 'storage.k8s.io/v1beta1']),
  kind: z.literal('CSIDriver'),
  metadata: z.object({ name: csiDriverName }),
  spec: z
    .object({
      attachRequired: z.boolean().default(true),
      podInfoOnMount: z.boolean().default(false),
      // The API server's default: Persistent only.
      volumeLifecycleModes: z.array(z.enum(['Persistent', 'Ephemeral'])).default(['Persistent']),
      tokenRequests: z.array(tokenRequest).optional(),
      requiresRepublish: z.boolean().default(false),
      serviceAccountTokenInSecrets: z.boolean().default(false),
    })
    .superRefine((spec, ctx) => {
      const seen = new Set<string>();
      (spec.tokenRequests ?? []).forEach((t, i) => {
        if (seen.has(t.audience)) ctx.addIssue({ code: z.ZodIssueCode.custom, message: `duplicate audience ${JSON.stringify(t.audience)}`, path: ['tokenRequests', i, 'audience'] });
        seen.add(t.audience);
      });
    })
    .default({}),
});

/** A Secret key (IsConfigMapKey): letters, digits, "-", "_" and ".", at most 253. */
const secretKey = z
  .string()
  .max(253, 'must be at most 253 characters')
  .regex(/^[-._a-zA-Z0-9]+$/, 'must be a valid Secret key (letters, digits, "-", "_" and ".")');

/**
 * core/v1 Secret: `data` values in base64 (standard, padded, as the API server's JSON), and
 * `stringData`, merged over `data` as the API server does on write. A value is a protobuf string
 * once it reaches a driver, so it must be UTF-8. No message ever quotes a value.
 */
const secretSchema = z
  .object({
    apiVersion: z.literal('v1'),
    kind: z.literal('Secret'),
    metadata: z.object({ name: dnsSubdomain, namespace: dnsLabel.default('default') }),
    type: z.string().optional(),
    data: z.record(secretKey, z.string()).optional(),
    stringData: z.record(secretKey, z.string()).optional(),
  })
  .superRefine((secret, ctx) => {
    for (const [key, value] of Object.entries(secret.data ?? {})) {
      if (decodeSecretValue(value) === undefined) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'must be base64 of UTF-8 text (the value is not shown)', path: ['data', key] });
      }
    }
  });

/** A base64 (standard alphabet, padded) value decoded as UTF-8; undefined when it is not both. */
function decodeSecretValue(value: string): string | undefined {
  if (value.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(value)) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(value, 'base64'));
  } catch {
    return undefined;
  }
}

/** storage/v1 VolumeAttachment: the fields kubelet's CSI plugin reads (status.attachmentMetadata). */
const volumeAttachmentSchema = z.object({
  apiVersion: z.enum(['storage.k8s.io/v1', 'storage.k8s.io/v1beta1']),
  kind: z.literal('VolumeAttachment'),
  metadata: z.object({ name: dnsSubdomain }),
  spec: z.object({
    attacher: csiDriverName,
    nodeName: z.string().min(1, 'must not be empty'),
    source: z.object({ persistentVolumeName: z.string().optional() }).default({}),
  }),
  status: z.object({ attached: z.boolean().default(false), attachmentMetadata: stringMap.optional() }).default({}),
});

export const KIND_SCHEMAS = {
  Pod: podSchema,
  PersistentVolumeClaim: pvcSchema,
  PersistentVolume: pvSchema,
  CSIDriver: csiDriverSchema,
  Secret: secretSchema,
  VolumeAttachment: volumeAttachmentSchema,
} as const;
export type KnownKind = keyof typeof KIND_SCHEMAS;

export function isKnownKind(kind: string): kind is KnownKind {
  return Object.hasOwn(KIND_SCHEMAS, kind);
}

export const nodeStatusSchema = z.object({
  volumesAttached: z.array(z.object({ name: z.string().min(1, 'must not be empty'), devicePath: z.string().default('') })).default([]),
  volumesInUse: z.array(z.string()).default([]),
});

/**
 * The UID given to a Pod manifest without metadata.uid: the first 32 hex digits of
 * sha256("<namespace>/<name>") in UUID form (8-4-4-4-12, 36 characters). Stable across reads
 * and restarts, distinct per namespace/name.
 */
export function derivedPodUID(namespace: string, name: string): string {
  return derivedUID(namespace, name);
}

/**
 * The UID given to a namespaced object (Pod, PersistentVolumeClaim) whose manifest has no
 * metadata.uid, and to a PV's claimRef without uid: {@link derivedPodUID}'s rule, so a claimRef
 * naming a claim gets that claim's derived UID.
 */
export function derivedUID(namespace: string, name: string): string {
  const h = createHash('sha256').update(`${namespace}/${name}`, 'utf8').digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

export function toPod(obj: z.infer<typeof podSchema>): Pod {
  const { metadata, spec, status } = obj;
  const volumes: PodVolumeSource[] = spec.volumes.map((v) => {
    const pvc = v.persistentVolumeClaim;
    return {
      name: v.name,
      ...(pvc !== undefined ? { persistentVolumeClaim: { claimName: pvc.claimName, ...(pvc.readOnly !== undefined ? { readOnly: pvc.readOnly } : {}) } } : {}),
      ...(v.csi !== undefined ? { csi: toCsiInline(v.csi) } : {}),
    };
  });
  const containers = [...spec.containers, ...spec.initContainers, ...spec.ephemeralContainers];
  const volumeMounts = [...new Set(containers.flatMap((c) => (c.volumeMounts ?? []).map((m) => m.name)))].sort();
  const volumeDevices = [...new Set(containers.flatMap((c) => (c.volumeDevices ?? []).map((d) => d.name)))].sort();
  const fsGroup = spec.securityContext?.fsGroup;
  return {
    uid: metadata.uid ?? derivedUID(metadata.namespace, metadata.name),
    namespace: metadata.namespace,
    name: metadata.name,
    nodeName: spec.nodeName,
    volumes,
    volumeMounts,
    volumeDevices,
    serviceAccountName: spec.serviceAccountName,
    ...(status.phase !== undefined ? { phase: status.phase } : {}),
    ...(metadata.deletionTimestamp !== undefined ? { deletionTimestamp: metadata.deletionTimestamp } : {}),
    ...(fsGroup !== undefined ? { fsGroup } : {}),
  };
}

function toCsiInline(c: z.infer<typeof csiInline>): CSIVolumeSource {
  return {
    driver: c.driver,
    ...(c.readOnly !== undefined ? { readOnly: c.readOnly } : {}),
    ...(c.fsType !== undefined ? { fsType: c.fsType } : {}),
    ...(c.volumeAttributes !== undefined ? { volumeAttributes: c.volumeAttributes } : {}),
    ...(c.nodePublishSecretRef !== undefined ? { nodePublishSecretRef: { name: c.nodePublishSecretRef.name } } : {}),
  };
}

export function toCSIDriver(obj: z.infer<typeof csiDriverSchema>): CSIDriverInfo {
  const { spec } = obj;
  return {
    name: obj.metadata.name,
    attachRequired: spec.attachRequired,
    podInfoOnMount: spec.podInfoOnMount,
    volumeLifecycleModes: spec.volumeLifecycleModes,
    ...(spec.tokenRequests !== undefined && spec.tokenRequests.length > 0
      ? { tokenRequests: spec.tokenRequests.map((t) => ({ audience: t.audience, ...(t.expirationSeconds !== undefined ? { expirationSeconds: t.expirationSeconds } : {}) })) }
      : {}),
    requiresRepublish: spec.requiresRepublish,
    serviceAccountTokenInSecrets: spec.serviceAccountTokenInSecrets,
  };
}

/** The Secret's data as kubelet hands it to a driver: `data` decoded, `stringData` over it. */
export function toSecretData(obj: z.infer<typeof secretSchema>): SecretData {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(obj.data ?? {})) out[key] = decodeSecretValue(value) ?? '';
  for (const [key, value] of Object.entries(obj.stringData ?? {})) out[key] = value;
  return out;
}

export function toVolumeAttachment(obj: z.infer<typeof volumeAttachmentSchema>): VolumeAttachmentInfo {
  return { name: obj.metadata.name, attached: obj.status.attached, attachmentMetadata: { ...(obj.status.attachmentMetadata ?? {}) } };
}

export function toPV(obj: z.infer<typeof pvSchema>): PersistentVolume {
  const { csi, volumeMode: mode, accessModes, mountOptions, claimRef } = obj.spec;
  let source: CSIPersistentVolumeSource | undefined;
  if (csi !== undefined) {
    source = {
      driver: csi.driver,
      volumeHandle: csi.volumeHandle,
      ...(csi.readOnly !== undefined ? { readOnly: csi.readOnly } : {}),
      ...(csi.fsType !== undefined ? { fsType: csi.fsType } : {}),
      ...(csi.volumeAttributes !== undefined ? { volumeAttributes: csi.volumeAttributes } : {}),
      ...(csi.nodeStageSecretRef !== undefined ? { nodeStageSecretRef: csi.nodeStageSecretRef } : {}),
      ...(csi.nodePublishSecretRef !== undefined ? { nodePublishSecretRef: csi.nodePublishSecretRef } : {}),
    };
  }
  return {
    name: obj.metadata.name,
    ...(source !== undefined ? { csi: source } : {}),
    ...(mode !== undefined ? { volumeMode: mode } : {}),
    ...(accessModes !== undefined ? { accessModes } : {}),
    ...(mountOptions !== undefined ? { mountOptions } : {}),
    ...(claimRef !== undefined ? { claimRef: { namespace: claimRef.namespace, name: claimRef.name, uid: claimRef.uid ?? derivedUID(claimRef.namespace, claimRef.name) } } : {}),
  };
}

/**
 * core/v1 PersistentVolumeClaim. A manifest without metadata.uid gets {@link derivedUID}'s; one
 * without status.phase is Bound when it names a PV, else Pending: the cluster dir plays the PV
 * controller, whose result that is for a pre-bound claim.
 */
export function toPVC(obj: z.infer<typeof pvcSchema>): PersistentVolumeClaim {
  const { metadata, spec, status } = obj;
  return {
    namespace: metadata.namespace,
    name: metadata.name,
    uid: metadata.uid ?? derivedUID(metadata.namespace, metadata.name),
    volumeName: spec.volumeName,
    ...(spec.volumeMode !== undefined ? { volumeMode: spec.volumeMode } : {}),
    phase: status.phase ?? (spec.volumeName !== '' ? 'Bound' : 'Pending'),
    ...(metadata.deletionTimestamp !== undefined ? { deletionTimestamp: metadata.deletionTimestamp } : {}),
  };
}
