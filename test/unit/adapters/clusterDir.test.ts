import assert from 'node:assert/strict';
import { getAttachmentName } from '../../../src/layout/names.js';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { MemFs } from '../../../src/adapters/memory/memFs.js';
import { ClusterDirView, derivedPodUID, formatFieldPath } from '../../../src/adapters/node/clusterDir.js';
import type { Pod } from '../../../src/api/core.js';
import { FaultyFs } from '../../support/faultyFs.js';
import { RecordingLogger } from '../../support/hosts.js';

const DIR = '/etc/nodevol/cluster';
const MANIFESTS = `${DIR}/manifests`;
const STATUS = `${DIR}/node-status.json`;
const enc = new TextEncoder();

/**
 * A cluster dir with `files` as manifests and a node-status.json (`null`: none at all), where
 * an agent ran before (its last good store exists, empty).
 */
async function clusterFs(files: Record<string, string> = {}, status: unknown = { volumesAttached: [], volumesInUse: [] }): Promise<MemFs> {
  const fs = MemFs.create();
  await fs.mkdir(MANIFESTS, { recursive: true, mode: 0o755 });
  await fs.mkdir(`${DIR}/.nodevol-last-good`, { recursive: true, mode: 0o700 });
  for (const [name, text] of Object.entries(files)) await fs.writeFile(`${MANIFESTS}/${name}`, enc.encode(text));
  if (status !== null) await fs.writeFile(STATUS, enc.encode(typeof status === 'string' ? status : JSON.stringify(status)));
  return fs;
}

function view(fs: MemFs | FaultyFs, logger?: RecordingLogger, limits?: ConstructorParameters<typeof ClusterDirView>[0]['limits']): ClusterDirView {
  return new ClusterDirView({ dir: DIR, nodeName: 'node-1', fs, ...(logger !== undefined ? { logger } : {}), ...(limits !== undefined ? { limits } : {}) });
}

async function readJson(fs: MemFs, path: string): Promise<unknown> {
  return JSON.parse(new TextDecoder().decode(await fs.readFile(path, 1 << 20)));
}

const POD_WEB = `
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: shop
  uid: 6f1c0000-4e5f-4a1b-9c2d-000000000001
  labels: {app: web}
spec:
  nodeName: node-1
  securityContext:
    fsGroup: 2000
    runAsUser: 1000
  containers:
    - name: app
      image: nginx
      volumeMounts:
        - {name: data, mountPath: /data}
      volumeDevices:
        - name: raw
          devicePath: /dev/xvda
    - name: sidecar
      image: busybox
      volumeMounts:
        - {name: scratch, mountPath: /scratch}
        - {name: data, mountPath: /data, readOnly: true}
  volumes:
    - name: data
      persistentVolumeClaim:
        claimName: data-claim
    - name: raw
      persistentVolumeClaim: {claimName: raw-claim, readOnly: true}
    - name: scratch
      csi:
        driver: inline.csi.example.com
        fsType: ext4
        readOnly: true
        volumeAttributes: {size: "1Gi", "example.com/tier": gold}
    - name: cache
      emptyDir: {}
`;

const STORAGE = `
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data-claim, namespace: shop}
spec:
  volumeName: pv-data
  accessModes: [ReadWriteOnce]
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-data}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  mountOptions: [noatime, discard]
  volumeMode: Filesystem
  csi:
    driver: ebs.csi.example.com
    volumeHandle: vol-0123456789
    fsType: xfs
    readOnly: false
    volumeAttributes: {zone: eu-1a}
    nodeStageSecretRef: {name: stage-secret, namespace: kube-system}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: raw-claim, namespace: shop}
spec: {volumeName: pv-raw, volumeMode: Block}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-raw}
spec:
  volumeMode: Block
  csi: {driver: ebs.csi.example.com, volumeHandle: vol-raw}
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: ebs.csi.example.com}
spec: {podInfoOnMount: false}
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: inline.csi.example.com}
spec: {attachRequired: false, volumeLifecycleModes: [Ephemeral]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: ignored}
spec: {replicas: 3}
---
`;

function pod(name: string, nodeName: string, extra = ''): string {
  return `apiVersion: v1\nkind: Pod\nmetadata: {name: ${name}, namespace: default, uid: uid-${name}}\nspec:\n  nodeName: ${nodeName}\n  containers: [{name: c, image: busybox}]\n${extra}`;
}

describe('ClusterDirView manifests', () => {
  it('reads several objects per file, unknown kinds and fields ignored, into the ClusterView types', async () => {
    const v = view(await clusterFs({ '10-pod.yaml': POD_WEB, '20-storage.yml': STORAGE, 'README.md': 'not a manifest' }));
    const pods = await v.listPods();
    const expected: Pod = {
      uid: '6f1c0000-4e5f-4a1b-9c2d-000000000001',
      namespace: 'shop',
      name: 'web',
      nodeName: 'node-1',
      volumes: [
        { name: 'data', persistentVolumeClaim: { claimName: 'data-claim' } },
        { name: 'raw', persistentVolumeClaim: { claimName: 'raw-claim', readOnly: true } },
        { name: 'scratch', csi: { driver: 'inline.csi.example.com', readOnly: true, fsType: 'ext4', volumeAttributes: { size: '1Gi', 'example.com/tier': 'gold' } } },
        { name: 'cache' },
      ],
      volumeMounts: ['data', 'scratch'],
      volumeDevices: ['raw'],
      serviceAccountName: 'default',
      fsGroup: 2000,
    };
    assert.deepEqual(pods, [expected]);
    assert.deepEqual(v.problems(), []);
  });

  it('resolves PVC -> PV with the fields the volume manager uses', async () => {
    const v = view(await clusterFs({ 'storage.yaml': STORAGE }));
    const dataUid = derivedPodUID('shop', 'data-claim');
    const rawUid = derivedPodUID('shop', 'raw-claim');
    assert.deepEqual(await v.getPersistentVolumeClaim('shop', 'data-claim'), { namespace: 'shop', name: 'data-claim', uid: dataUid, volumeName: 'pv-data', phase: 'Bound' });
    assert.deepEqual(await v.getPersistentVolumeClaim('shop', 'raw-claim'), { namespace: 'shop', name: 'raw-claim', uid: rawUid, volumeName: 'pv-raw', volumeMode: 'Block', phase: 'Bound' });
    assert.equal(await v.getPersistentVolumeClaim('default', 'data-claim'), undefined, 'claims are namespaced');
    assert.deepEqual(await v.getPersistentVolume('pv-data'), {
      name: 'pv-data',
      csi: {
        driver: 'ebs.csi.example.com',
        volumeHandle: 'vol-0123456789',
        readOnly: false,
        fsType: 'xfs',
        volumeAttributes: { zone: 'eu-1a' },
        nodeStageSecretRef: { name: 'stage-secret', namespace: 'kube-system' },
      },
      volumeMode: 'Filesystem',
      accessModes: ['ReadWriteOnce'],
      mountOptions: ['noatime', 'discard'],
      claimRef: { namespace: 'shop', name: 'data-claim', uid: dataUid },
    });
    assert.deepEqual(await v.getPersistentVolume('pv-raw'), { name: 'pv-raw', csi: { driver: 'ebs.csi.example.com', volumeHandle: 'vol-raw' }, volumeMode: 'Block', claimRef: { namespace: 'shop', name: 'raw-claim', uid: rawUid } });
    assert.equal(await v.getPersistentVolume('pv-missing'), undefined);
  });

  it('claims and PVs as the PV controller leaves them (fidelity review item 10): phase, uid and claimRef defaults; explicit values kept', async () => {
    const pv = (name: string, claimRef = ''): string => `apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: ${name}}\nspec: {csi: {driver: d.example.com, volumeHandle: h-${name}}${claimRef}}\n---\n`;
    const pvc = (name: string, rest: string): string => `apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: ${name}, namespace: ns${rest}\n---\n`;
    const text = [
      pv('pv-a'),
      pvc('a', '}\nspec: {volumeName: pv-a}'),
      pvc('pending', '}\nspec: {}'),
      pvc('lost', ', uid: u-lost, deletionTimestamp: "2026-01-01T00:00:00Z"}\nspec: {volumeName: pv-lost}\nstatus: {phase: Lost}'),
      pv('pv-lost', ', claimRef: {namespace: ns, name: lost}'),
      pv('pv-other', ', claimRef: {namespace: ns, name: a}'),
      pv('pv-two'),
      pvc('two-1', '}\nspec: {volumeName: pv-two}'),
      pvc('two-2', '}\nspec: {volumeName: pv-two}'),
    ].join('');
    const v = view(await clusterFs({ 's.yaml': text }));
    assert.deepEqual(await v.getPersistentVolumeClaim('ns', 'a'), { namespace: 'ns', name: 'a', uid: derivedPodUID('ns', 'a'), volumeName: 'pv-a', phase: 'Bound' });
    assert.equal((await v.getPersistentVolumeClaim('ns', 'pending'))?.phase, 'Pending');
    assert.deepEqual(await v.getPersistentVolumeClaim('ns', 'lost'), { namespace: 'ns', name: 'lost', uid: 'u-lost', volumeName: 'pv-lost', phase: 'Lost', deletionTimestamp: '2026-01-01T00:00:00Z' });
    assert.deepEqual((await v.getPersistentVolume('pv-a'))?.claimRef, { namespace: 'ns', name: 'a', uid: derivedPodUID('ns', 'a') }, 'bound to the one claim naming it');
    assert.deepEqual((await v.getPersistentVolume('pv-lost'))?.claimRef, { namespace: 'ns', name: 'lost', uid: derivedPodUID('ns', 'lost') }, 'a claimRef without uid gets the derived one, not the claim\'s explicit uid');
    assert.deepEqual((await v.getPersistentVolume('pv-other'))?.claimRef?.name, 'a', 'an explicit claimRef is kept');
    assert.equal((await v.getPersistentVolume('pv-two'))?.claimRef, undefined, 'two claims name it: unbound');
    assert.deepEqual(v.problems(), []);
    const bad = view(await clusterFs({ 'b.yaml': pvc('x', '}\nspec: {}\nstatus: {phase: Done}') }));
    assert.equal(await bad.getPersistentVolumeClaim('ns', 'x'), undefined);
    assert.deepEqual(bad.problems().map((p) => p.field), ['status.phase']);
  });

  it('CSIDriver defaults as the API server sets them: attachRequired true, podInfoOnMount false, volumeLifecycleModes [Persistent], requiresRepublish false; an unknown driver is undefined', async () => {
    const v = view(await clusterFs({ 'storage.yaml': STORAGE, 'bare.yaml': 'apiVersion: storage.k8s.io/v1\nkind: CSIDriver\nmetadata:\n  name: bare.csi.example.com\n' }));
    const defaults = { podInfoOnMount: false, volumeLifecycleModes: ['Persistent'], requiresRepublish: false, serviceAccountTokenInSecrets: false };
    assert.deepEqual(await v.getCSIDriver('ebs.csi.example.com'), { name: 'ebs.csi.example.com', attachRequired: true, ...defaults });
    assert.deepEqual(await v.getCSIDriver('inline.csi.example.com'), { name: 'inline.csi.example.com', attachRequired: false, ...defaults, volumeLifecycleModes: ['Ephemeral'] });
    assert.deepEqual(await v.getCSIDriver('bare.csi.example.com'), { name: 'bare.csi.example.com', attachRequired: true, ...defaults });
    assert.equal(await v.getCSIDriver('nope.csi.example.com'), undefined);
  });

  it('CSIDriver tokenRequests and requiresRepublish are read; a bad lifecycle mode, a duplicate audience or a token under 10 minutes is refused naming the field', async () => {
    const driver = (name: string, spec: string): string => `apiVersion: storage.k8s.io/v1\nkind: CSIDriver\nmetadata:\n  name: ${name}\nspec: ${spec}\n`;
    const v = view(
      await clusterFs({
        'a.yaml': driver('tokens.csi.example.com', '{tokenRequests: [{audience: vault}, {audience: "", expirationSeconds: 3600}], requiresRepublish: true}'),
        'b.yaml': driver('badmode.csi.example.com', '{volumeLifecycleModes: [Persistent, Inline]}'),
        'c.yaml': driver('dup.csi.example.com', '{tokenRequests: [{audience: a}, {audience: a}]}'),
        'd.yaml': driver('short.csi.example.com', '{tokenRequests: [{audience: a, expirationSeconds: 60}]}'),
      }),
    );
    await v.listPods();
    assert.deepEqual(await v.getCSIDriver('tokens.csi.example.com'), {
      name: 'tokens.csi.example.com',
      attachRequired: true,
      podInfoOnMount: false,
      volumeLifecycleModes: ['Persistent'],
      tokenRequests: [{ audience: 'vault' }, { audience: '', expirationSeconds: 3600 }],
      requiresRepublish: true,
      serviceAccountTokenInSecrets: false,
    });
    for (const name of ['badmode', 'dup', 'short']) assert.equal(await v.getCSIDriver(`${name}.csi.example.com`), undefined);
    const fields = v.problems().map((p) => p.field);
    assert.ok(fields.includes('spec.volumeLifecycleModes[1]'), JSON.stringify(fields));
    assert.ok(fields.includes('spec.tokenRequests[1].audience'), JSON.stringify(fields));
    assert.ok(fields.includes('spec.tokenRequests[0].expirationSeconds'), JSON.stringify(fields));
  });

  it('a pod\'s spec.serviceAccountName is read; without one it is "default", as the API server\'s ServiceAccount admission sets it', async () => {
    const v = view(
      await clusterFs({
        'pods.yaml': [pod('named', 'node-1', '  serviceAccountName: builder\n'), pod('plain', 'node-1')].join('---\n'),
      }),
    );
    const pods = await v.listPods();
    assert.deepEqual(
      pods.map((p) => [p.name, p.serviceAccountName]),
      [
        ['named', 'builder'],
        ['plain', 'default'],
      ],
    );
  });

  it('a cluster dir cannot issue service account tokens: the request rejects naming the account, the pod and why', async () => {
    const v = view(await clusterFs());
    await assert.rejects(
      v.requestServiceAccountToken({ namespace: 'shop', serviceAccountName: 'builder', audiences: ['vault'], boundPod: { name: 'web', uid: 'u-1' } }),
      /^Error: cluster dir: cannot issue a token for service account shop\/builder \(audience "vault"\) for pod shop\/web: a cluster dir has no API server to issue service account tokens \(TokenRequest\)/,
    );
  });

  it('Secrets: data decoded from base64 with stringData over it, by namespace and name; a bad value is refused naming the key, never the value', async () => {
    const b64 = (t: string): string => Buffer.from(t, 'utf8').toString('base64');
    const v = view(
      await clusterFs({
        's.yaml': [
          `apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: kube-system}\ntype: Opaque\ndata: {user: ${b64('admin')}, password: ${b64('old')}}\nstringData: {password: hunter2}\n`,
          'apiVersion: v1\nkind: Secret\nmetadata: {name: broken, namespace: kube-system}\ndata: {password: "not base64!!sekrit"}\n',
        ].join('---\n'),
      }),
    );
    await v.listPods();
    assert.deepEqual(await v.getSecret('kube-system', 'creds'), { user: 'admin', password: 'hunter2' });
    assert.equal(await v.getSecret('default', 'creds'), undefined, 'Secrets are namespaced');
    assert.equal(await v.getSecret('kube-system', 'broken'), undefined);
    const problems = v.problems();
    assert.deepEqual(problems.map((p) => p.field), ['data.password']);
    assert.ok(!JSON.stringify(problems).includes('sekrit'), JSON.stringify(problems));
  });

  it('VolumeAttachments: a manifest gives its attachmentMetadata; a volume in volumesAttached without one has an attached one with none; anything else is not found', async () => {
    const name = getAttachmentName('vol-0123456789', 'ebs.csi.example.com', 'node-1');
    const other = getAttachmentName('vol-raw', 'ebs.csi.example.com', 'node-1');
    const v = view(
      await clusterFs(
        {
          'va.yaml': `apiVersion: storage.k8s.io/v1\nkind: VolumeAttachment\nmetadata: {name: ${name}}\nspec: {attacher: ebs.csi.example.com, nodeName: node-1, source: {persistentVolumeName: pv-data}}\nstatus: {attached: true, attachmentMetadata: {devicePath: /dev/xvdf}}\n`,
        },
        { volumesAttached: [{ name: 'kubernetes.io/csi/ebs.csi.example.com^vol-raw', devicePath: '' }], volumesInUse: [] },
      ),
    );
    assert.deepEqual(await v.getVolumeAttachment(name), { name, attached: true, attachmentMetadata: { devicePath: '/dev/xvdf' } });
    assert.deepEqual(await v.getVolumeAttachment(other), { name: other, attached: true, attachmentMetadata: {} });
    assert.equal(await v.getVolumeAttachment(getAttachmentName('vol-raw', 'ebs.csi.example.com', 'node-2')), undefined);
  });

  it('an inline CSI volume\'s nodePublishSecretRef is read', async () => {
    const v = view(await clusterFs({ 'p.yaml': pod('p', 'node-1', '  volumes: [{name: s, csi: {driver: inline.csi.example.com, nodePublishSecretRef: {name: creds}}}]\n') }));
    const [p] = await v.listPods();
    assert.deepEqual(p?.volumes, [{ name: 's', csi: { driver: 'inline.csi.example.com', nodePublishSecretRef: { name: 'creds' } } }]);
  });

  it('lists only the pods bound to this node', async () => {
    const v = view(await clusterFs({ 'pods.yaml': [pod('here', 'node-1'), pod('there', 'node-2'), pod('pending', '""')].join('---\n') }));
    assert.deepEqual((await v.listPods()).map((p) => p.name), ['here']);
    const other = new ClusterDirView({ dir: DIR, nodeName: 'node-2', fs: await clusterFs({ 'pods.yaml': [pod('here', 'node-1'), pod('there', 'node-2')].join('---\n') }) });
    assert.deepEqual((await other.listPods()).map((p) => p.name), ['there']);
  });

  it('a deleted manifest deletes its pods on the next call; a new one adds them', async () => {
    const fs = await clusterFs({ 'a.yaml': pod('a', 'node-1'), 'b.yaml': pod('b', 'node-1') });
    const v = view(fs);
    assert.deepEqual((await v.listPods()).map((p) => p.name), ['a', 'b']);
    await fs.unlink(`${MANIFESTS}/a.yaml`);
    assert.deepEqual((await v.listPods()).map((p) => p.name), ['b']);
    await fs.writeFile(`${MANIFESTS}/c.yml`, enc.encode(pod('c', 'node-1')));
    assert.deepEqual((await v.listPods()).map((p) => p.name), ['b', 'c']);
  });

  it('a Pod without metadata.uid gets a stable UID derived from namespace/name, in UUID form', async () => {
    const v = view(await clusterFs({ 'p.yaml': 'apiVersion: v1\nkind: Pod\nmetadata: {name: nouid}\nspec: {nodeName: node-1}\n' }));
    const [p] = await v.listPods();
    assert.equal(p?.namespace, 'default');
    assert.equal(p?.uid, derivedPodUID('default', 'nouid'));
    assert.match(p?.uid ?? '', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    assert.equal((await v.listPods())[0]?.uid, p?.uid, 'stable across reads');
    assert.notEqual(derivedPodUID('default', 'nouid'), derivedPodUID('other', 'nouid'));
  });

  it('null fields count as absent; init and ephemeral containers contribute block volumes', async () => {
    const text = `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ~, uid: u-1}
spec:
  nodeName: node-1
  securityContext: null
  volumes:
    - name: blk
      persistentVolumeClaim: {claimName: c, readOnly: null}
  initContainers:
    - {name: init, volumeDevices: [{name: blk, devicePath: /dev/b}]}
`;
    const [p] = await view(await clusterFs({ 'p.yaml': text })).listPods();
    assert.deepEqual(p, {
      uid: 'u-1',
      namespace: 'default',
      name: 'p',
      nodeName: 'node-1',
      volumes: [{ name: 'blk', persistentVolumeClaim: { claimName: 'c' } }],
      volumeMounts: [],
      volumeDevices: ['blk'],
      serviceAccountName: 'default',
    });
  });
});

describe('ClusterDirView pod state (fidelity review item 9)', () => {
  it('reads status.phase and metadata.deletionTimestamp; a bad phase or time is a problem naming the field', async () => {
    const podWith = (meta: string, status: string): string =>
      `apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, uid: u-1${meta}}\nspec: {nodeName: node-1}\n${status}`;
    const [p] = await view(await clusterFs({ 'p.yaml': podWith(', deletionTimestamp: "2026-01-01T00:00:00Z"', 'status: {phase: Succeeded}\n') })).listPods();
    assert.equal(p?.phase, 'Succeeded');
    assert.equal(p?.deletionTimestamp, '2026-01-01T00:00:00Z');
    const [plain] = await view(await clusterFs({ 'p.yaml': podWith('', '') })).listPods();
    assert.ok(plain !== undefined && !('phase' in plain) && !('deletionTimestamp' in plain), JSON.stringify(plain));
    for (const [meta, status, field] of [
      ['', 'status: {phase: Done}\n', 'status.phase'],
      [', deletionTimestamp: yesterday', '', 'metadata.deletionTimestamp'],
    ] as const) {
      const v = view(await clusterFs({ 'p.yaml': podWith(meta, status) }));
      assert.deepEqual(await v.listPods(), []);
      assert.deepEqual(v.problems().map((x) => x.field), [field]);
    }
  });
});

describe('ClusterDirView bad input', () => {
  it('a container volume use the API server refuses is a problem naming the field (fidelity review item 8)', async () => {
    const bad = (containers: string): string => `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default, uid: u-1}
spec:
  nodeName: node-1
  volumes:
    - {name: data, persistentVolumeClaim: {claimName: c}}
    - {name: scratch, csi: {driver: inline.csi.example.com}}
${containers}`;
    const cases: [string, string, RegExp][] = [
      ['  containers: [{name: a, volumeMounts: [{name: nope, mountPath: /x}]}]\n', 'spec.containers[0].volumeMounts[0].name', /no volume "nope" in spec\.volumes/],
      ['  initContainers: [{name: a}, {name: b, volumeDevices: [{name: gone, devicePath: /dev/x}]}]\n', 'spec.initContainers[1].volumeDevices[0].name', /no volume "gone"/],
      ['  containers: [{name: a, volumeDevices: [{name: scratch, devicePath: /dev/x}]}]\n', 'spec.containers[0].volumeDevices[0].name', /PersistentVolumeClaim for block mode/],
      ['  ephemeralContainers: [{name: a, volumeMounts: [{name: data, mountPath: /d}], volumeDevices: [{name: data, devicePath: /dev/x}]}]\n', 'spec.ephemeralContainers[0].volumeDevices[0].name', /both volumeMounts and volumeDevices/],
    ];
    for (const [containers, field, message] of cases) {
      const v = view(await clusterFs({ 'p.yaml': bad(containers) }));
      assert.deepEqual(await v.listPods(), [], field);
      const [problem, ...rest] = v.problems();
      assert.equal(rest.length, 0, JSON.stringify(v.problems()));
      assert.equal(problem?.field, field);
      assert.match(problem?.message ?? '', message);
    }
  });

  it('a file that does not parse is skipped with a problem naming it; other files are still read; logged once', async () => {
    const logger = new RecordingLogger();
    const fs = await clusterFs({ 'a-good.yaml': pod('good', 'node-1'), 'b-bad.yaml': `${pod('lost', 'node-1')}---\nkind: Pod\n  metadata: [unclosed\n`, 'c-good.yaml': pod('also', 'node-1') });
    const v = view(fs, logger);
    assert.deepEqual((await v.listPods()).map((p) => p.name), ['good', 'also']);
    const [problem, ...rest] = v.problems();
    assert.equal(rest.length, 0);
    assert.equal(problem?.file, `${MANIFESTS}/b-bad.yaml`);
    assert.ok(problem?.message.includes(`${MANIFESTS}/b-bad.yaml`), problem?.message);
    assert.match(problem?.message ?? '', /YAML does not parse \(document 1\)/);
    assert.equal(typeof problem?.line, 'number');
    await v.listPods();
    const errors = logger.lines.filter((l) => l.severity === 'E');
    assert.equal(errors.length, 1, 'a problem is logged when it appears, not on every read');
    assert.ok(errors[0]?.values.file === `${MANIFESTS}/b-bad.yaml`);
    await fs.writeFile(`${MANIFESTS}/b-bad.yaml`, enc.encode(pod('lost', 'node-1')));
    assert.deepEqual((await v.listPods()).map((p) => p.name), ['good', 'lost', 'also']);
    assert.deepEqual(v.problems(), []);
  });

  it('an object failing its schema is skipped with the file, document index, line and field path; the rest of the file is read', async () => {
    const text = `${pod('first', 'node-1')}---
apiVersion: v1
kind: Pod
metadata: {name: broken, uid: u-broken}
spec:
  nodeName: node-1
  volumes:
    - persistentVolumeClaim: {claimName: c}
---
${pod('third', 'node-1')}`;
    const v = view(await clusterFs({ 'pods.yaml': text }));
    assert.deepEqual((await v.listPods()).map((p) => p.name), ['first', 'third']);
    const [problem] = v.problems();
    assert.equal(problem?.file, `${MANIFESTS}/pods.yaml`);
    assert.equal(problem?.document, 1);
    assert.equal(problem?.field, 'spec.volumes[0].name');
    assert.equal(problem?.line, 14, 'the line of the volume missing its name');
    assert.ok(problem?.message.startsWith(`${MANIFESTS}/pods.yaml:14: document 1 (Pod default/broken): field spec.volumes[0].name: Required`), problem?.message);
  });

  it('reports wrong types, bad names and unsafe UIDs by field', async () => {
    const cases: [string, string][] = [
      ['apiVersion: v1\nkind: Pod\nmetadata: {name: p, uid: "../../etc"}\nspec: {nodeName: node-1}\n', 'metadata.uid'],
      ['apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeName: node-1, volumes: [{name: Data_1}]}\n', 'spec.volumes[0].name'],
      ['apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {volumes: [{name: a, csi: {driver: d, volumeAttributes: {n: 1}}}]}\n', 'spec.volumes[0].csi.volumeAttributes.n'],
      ['apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {volumes: [{name: a}, {name: a}]}\n', 'spec.volumes[1].name'],
      ['apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {securityContext: {fsGroup: -1}}\n', 'spec.securityContext.fsGroup'],
      ['apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv}\nspec: {csi: {driver: "a/b", volumeHandle: h}}\n', 'spec.csi.driver'],
      ['apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv}\nspec: {csi: {driver: d}}\n', 'spec.csi.volumeHandle'],
      ['apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c}\nspec: {volumeMode: Raw}\n', 'spec.volumeMode'],
      ['apiVersion: v1\nkind: CSIDriver\nmetadata: {name: d}\n', 'apiVersion'],
      ['apiVersion: storage.k8s.io/v1\nkind: CSIDriver\nmetadata: {name: d}\nspec: {attachRequired: "yes"}\n', 'spec.attachRequired'],
      ['apiVersion: v1\nmetadata: {name: x}\n', 'kind'],
      ['- just\n- a list\n', undefined as unknown as string],
    ];
    for (const [text, field] of cases) {
      const v = view(await clusterFs({ 'x.yaml': text }));
      await v.listPods();
      const [problem, ...rest] = v.problems();
      assert.equal(rest.length, 0, text);
      assert.equal(problem?.field, field, `${text} -> ${problem?.message}`);
      assert.equal(problem?.document, 0);
      if (field !== undefined) assert.ok(problem?.message.includes(`field ${field}:`), problem?.message);
    }
  });

  it('duplicate objects: the first in file order wins, the other is reported', async () => {
    const v = view(
      await clusterFs({
        'a.yaml': pod('dup', 'node-1'),
        'b.yaml': `${pod('dup', 'node-2')}---\napiVersion: v1\nkind: Pod\nmetadata: {name: other, uid: uid-dup}\nspec: {nodeName: node-1}\n`,
      }),
    );
    const pods = await v.listPods();
    assert.deepEqual(pods.map((p) => [p.name, p.nodeName]), [['dup', 'node-1']]);
    assert.deepEqual(v.problems().map((p) => [p.document, p.field]), [[0, 'metadata.name'], [1, 'metadata.uid']]);
  });

  it('a manifest that breaks after it was read keeps its last good contents, so its pods do not look deleted', async () => {
    const fs = await clusterFs({ 'web.yaml': POD_WEB });
    const v = view(fs);
    assert.deepEqual((await v.listPods()).map((p) => p.name), ['web']);
    await fs.writeFile(`${MANIFESTS}/web.yaml`, enc.encode('kind: Pod\nmetadata: [unclosed\n'));
    assert.deepEqual((await v.listPods()).map((p) => p.name), ['web'], 'still running: not deleted by a typo');
    assert.ok(v.problems().some((p) => p.file.endsWith('web.yaml') && p.message.includes('using its last good contents')), JSON.stringify(v.problems()));
    await fs.unlink(`${MANIFESTS}/web.yaml`);
    assert.deepEqual(await v.listPods(), [], 'removing the manifest still deletes the pod');
  });

  it('refuses a file over the size limit; other files are still read', async () => {
    const big = `${pod('big', 'node-1')}# ${'x'.repeat(1024 * 1024)}\n`;
    const v = view(await clusterFs({ 'big.yaml': big, 'small.yaml': pod('small', 'node-1') }), undefined, { maxFileBytes: 1024 * 1024 });
    assert.deepEqual((await v.listPods()).map((p) => p.name), ['small']);
    const [problem] = v.problems();
    assert.equal(problem?.file, `${MANIFESTS}/big.yaml`);
    assert.match(problem?.message ?? '', /refused: larger than the limit of 1048576 bytes/);
  });

  it('bounds the number of files and of documents', async () => {
    const files = await clusterFs({ 'a.yaml': pod('a', 'node-1'), 'b.yaml': pod('b', 'node-1'), 'c.yaml': pod('c', 'node-1') });
    const v1 = view(files, undefined, { maxFiles: 2 });
    assert.deepEqual((await v1.listPods()).map((p) => p.name), ['a', 'b']);
    assert.match(v1.problems()[0]?.message ?? '', /3 manifest files, more than the limit of 2/);
    assert.match(v1.problems()[1]?.message ?? '', /c\.yaml: not read: the limit of 2 manifest files was reached; file skipped/);

    const docs = await clusterFs({ 'a.yaml': [pod('a1', 'node-1'), pod('a2', 'node-1')].join('---\n'), 'b.yaml': pod('b', 'node-1') });
    const v2 = view(docs, undefined, { maxDocuments: 1 });
    assert.deepEqual((await v2.listPods()).map((p) => p.name), ['b'], 'a file is read whole or not at all');
    assert.deepEqual(v2.problems().map((p) => [p.file.slice(MANIFESTS.length + 1), p.message.includes('limit of 1 YAML documents')]), [['a.yaml', true]]);
  });

  it('refuses YAML alias bombs and non-UTF-8 files', async () => {
    const bomb = ['a: &a [x, x, x, x, x, x, x, x, x]', ...Array.from({ length: 8 }, (_, i) => `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [*${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}]`), 'kind: Pod'].join('\n');
    const fs = await clusterFs({ 'bomb.yaml': bomb, 'ok.yaml': pod('ok', 'node-1') });
    await fs.writeFile(`${MANIFESTS}/latin1.yaml`, Uint8Array.from([0x6b, 0x69, 0x6e, 0x64, 0x3a, 0x20, 0xe9, 0x0a]));
    const v = view(fs);
    assert.deepEqual((await v.listPods()).map((p) => p.name), ['ok']);
    assert.deepEqual(v.problems().map((p) => p.file.slice(MANIFESTS.length + 1)), ['bomb.yaml', 'latin1.yaml']);
    assert.match(v.problems()[0]?.message ?? '', /cannot be loaded/);
    assert.match(v.problems()[1]?.message ?? '', /not UTF-8/);
  });

  it('an unreadable manifests directory rejects every call instead of reporting no pods', async () => {
    const fs = MemFs.create();
    fs.writeRaw(STATUS, JSON.stringify({ volumesAttached: [], volumesInUse: [] }));
    const v = view(fs);
    await assert.rejects(v.listPods(), /cannot list the manifests in \/etc\/nodevol\/cluster\/manifests/);
    await assert.rejects(v.getCSIDriver('d'), /cannot list the manifests/);
  });
});

describe('ClusterDirView node status', () => {
  const status = {
    volumesAttached: [{ name: 'kubernetes.io/csi/ebs.csi.example.com^vol-1', devicePath: '' }, { name: 'kubernetes.io/csi/ebs.csi.example.com^vol-2' }],
    volumesInUse: ['kubernetes.io/csi/ebs.csi.example.com^vol-0'],
    nodeInfo: { kubeletVersion: 'v1.34.0', big: 12345678901234 },
    conditions: [{ type: 'Ready', status: 'True' }],
  };

  it('getNodeStatus reads volumesAttached (devicePath defaulting to "") and volumesInUse', async () => {
    const v = view(await clusterFs({}, status));
    assert.deepEqual(await v.getNodeStatus(), {
      volumesAttached: [
        { name: 'kubernetes.io/csi/ebs.csi.example.com^vol-1', devicePath: '' },
        { name: 'kubernetes.io/csi/ebs.csi.example.com^vol-2', devicePath: '' },
      ],
      volumesInUse: ['kubernetes.io/csi/ebs.csi.example.com^vol-0'],
    });
    assert.deepEqual(await view(await clusterFs({}, {})).getNodeStatus(), { volumesAttached: [], volumesInUse: [] });
  });

  it('a missing, unparsable or invalid node-status.json rejects (an unreachable API server), and is never created', async () => {
    const missing = await clusterFs({ 'web.yaml': POD_WEB }, null);
    await assert.rejects(view(missing).listPods(), /cannot read the node status/, 'no pods rather than an empty node');
    await assert.rejects(view(missing).getNodeStatus(), /cannot read the node status \/etc\/nodevol\/cluster\/node-status\.json/);
    await assert.rejects(view(missing).setVolumesInUse(['x']), /cannot read the node status/);
    await assert.rejects(missing.stat(STATUS), { code: 'ENOENT' });
    await assert.rejects(view(await clusterFs({}, '{"volumesAttached": [')).getNodeStatus(), /not valid JSON/);
    await assert.rejects(view(await clusterFs({}, '[]')).getNodeStatus(), /must be a JSON object/);
    await assert.rejects(view(await clusterFs({}, { volumesAttached: [{ devicePath: '/dev/x' }] })).getNodeStatus(), /field volumesAttached\[0\]\.name/);
    const invalid = await clusterFs({}, { volumesInUse: 'vol' });
    await assert.rejects(view(invalid).setVolumesInUse(['x']), /field volumesInUse/);
    assert.deepEqual(await readJson(invalid, STATUS), { volumesInUse: 'vol' }, 'an invalid file is left alone');
  });

  it('setVolumesInUse replaces only volumesInUse, atomically: temp file in the same dir, fsync, rename, fsync dir', async () => {
    const mem = await clusterFs({}, status);
    const fs = new FaultyFs(mem);
    const v = view(fs);
    await v.setVolumesInUse(['kubernetes.io/csi/ebs.csi.example.com^vol-1', 'kubernetes.io/csi/ebs.csi.example.com^vol-2']);
    assert.deepEqual(await readJson(mem, STATUS), { ...status, volumesInUse: ['kubernetes.io/csi/ebs.csi.example.com^vol-1', 'kubernetes.io/csi/ebs.csi.example.com^vol-2'] });
    const writes = fs.calls.filter((c) => /^(writeFile|rename|fsyncDir|unlink) /.test(c));
    assert.equal(writes.length, 3, writes.join('\n'));
    const tmp = writes[0]?.slice('writeFile '.length) ?? '';
    assert.equal(tmp, `/etc/nodevol/cluster/node-status.json.${process.pid}.tmp`);
    assert.deepEqual(writes, [`writeFile ${tmp}`, `rename ${tmp}`, `fsyncDir ${DIR}`]);
    assert.deepEqual(mem.syncLog, [`fsync ${tmp}`, `fsyncDir ${DIR}`]);
    assert.deepEqual((await mem.readdir(DIR)).map((e) => e.name).sort(), ['.nodevol-last-good', 'manifests', 'node-status.json'], 'no temp file left');
    assert.deepEqual((await v.getNodeStatus()).volumesInUse, ['kubernetes.io/csi/ebs.csi.example.com^vol-1', 'kubernetes.io/csi/ebs.csi.example.com^vol-2']);
  });

  it('a failed rename leaves the old file intact and removes the temp file', async () => {
    const mem = await clusterFs({}, status);
    const fs = new FaultyFs(mem);
    const v = view(fs);
    // Fail the rename of whatever temp file gets written.
    const origRename = mem.rename.bind(mem);
    mem.rename = () => Promise.reject(Object.assign(new Error('EIO on purpose'), { code: 'EIO' }));
    await assert.rejects(v.setVolumesInUse(['x']), /cannot write the node status.*EIO on purpose/);
    mem.rename = origRename;
    assert.deepEqual(await readJson(mem, STATUS), status);
    assert.deepEqual((await mem.readdir(DIR)).map((e) => e.name).sort(), ['.nodevol-last-good', 'manifests', 'node-status.json']);
    // Writes are serialised and a failed one does not block the next.
    await Promise.all([v.setVolumesInUse(['a']), v.setVolumesInUse(['b'])]);
    assert.deepEqual((await v.getNodeStatus()).volumesInUse, ['b']);
  });

  it('a symlinked node-status.json is refused: nothing outside the cluster dir is read or written', async () => {
    const mem = await clusterFs({}, null);
    await mem.mkdir('/var/state', { recursive: true, mode: 0o755 });
    await mem.writeFile('/var/state/status.json', enc.encode(JSON.stringify(status)));
    await mem.symlink('/var/state/status.json', STATUS);
    await assert.rejects(view(mem).setVolumesInUse([]), /node-status\.json is a symlink; refusing to follow it/);
    await assert.rejects(view(mem).listPods(), /is a symlink/);
    assert.equal((await mem.lstat(STATUS)).type, 'symlink');
    assert.deepEqual(await readJson(mem, '/var/state/status.json'), status, 'the target is untouched');
  });

  it('works on the real filesystem and keeps the file mode', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nodevol-clusterdir-'));
    try {
      mkdirSync(join(dir, 'manifests'));
      writeFileSync(join(dir, 'manifests', 'p.yaml'), pod('real', 'node-1'));
      writeFileSync(join(dir, 'node-status.json'), JSON.stringify(status), { mode: 0o640 });
      const v = new ClusterDirView({ dir, nodeName: 'node-1' });
      assert.deepEqual((await v.listPods()).map((p) => p.name), ['real']);
      await v.setVolumesInUse(['kubernetes.io/csi/ebs.csi.example.com^vol-1']);
      assert.deepEqual(JSON.parse(readFileSync(join(dir, 'node-status.json'), 'utf8')), { ...status, volumesInUse: ['kubernetes.io/csi/ebs.csi.example.com^vol-1'] });
      assert.equal(statSync(join(dir, 'node-status.json')).mode & 0o777, 0o640);
      assert.deepEqual(readdirSync(dir).sort(), ['.nodevol-last-good', 'manifests', 'node-status.json']);
      assert.deepEqual(readdirSync(join(dir, '.nodevol-last-good')), ['p.yaml'], 'the last good copy of the one manifest');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('formatFieldPath', () => {
  it('formats zod issue paths', () => {
    assert.equal(formatFieldPath(['spec', 'volumes', 0, 'name']), 'spec.volumes[0].name');
    assert.equal(formatFieldPath(['spec', 'csi', 'volumeAttributes', 'example.com/tier']), 'spec.csi.volumeAttributes["example.com/tier"]');
    assert.equal(formatFieldPath([]), '(document)');
  });
});
