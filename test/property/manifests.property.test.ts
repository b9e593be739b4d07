// Property tests for the cluster dir's manifests (untrusted input: YAML files an operator or a
// tool writes). Names from these files end up in paths under the kubelet root dir, so besides
// "no crash" and "round-trips", a property checks that every accepted name stays one path segment.
import assert from 'node:assert/strict';
import * as posix from 'node:path/posix';
import { describe, it } from 'node:test';

import fc from 'fast-check';
import { stringify } from 'yaml';

import { parseManifestFile, type ParsedFile } from '../../src/adapters/node/clusterManifests.js';
import { bound, runs } from './runs.js';

const FILE = '/cluster/manifests/objects.yaml';
const ROOT = '/var/lib/kubelet';
const MAX_ALIASES = 100;
const utf8 = new TextEncoder();

const label = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?$/);
const subdomain = fc.array(label, { minLength: 1, maxLength: 3 }).map((p) => p.join('.')).filter((s) => s.length <= 63);
/** Names an attacker would try, next to good ones. */
const hostileName = fc.oneof(
  fc.constantFrom('..', '.', '../..', 'a/b', '/etc', 'a/../../x', '', ' ', 'A', '-a', 'a-', 'a..b', '\u0000', 'x\ny', '~', 'kubernetes.io~csi'),
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  subdomain,
);
const name = fc.oneof({ weight: 3, arbitrary: subdomain }, { weight: 1, arbitrary: hostileName });
const uid = fc.oneof(fc.uuid(), hostileName, fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,20}$/));

const podVolume = fc.oneof(
  fc.record({ name: fc.oneof(label, hostileName), persistentVolumeClaim: fc.record({ claimName: name }) }),
  fc.record({ name: fc.oneof(label, hostileName), csi: fc.record({ driver: name, volumeAttributes: fc.dictionary(fc.string({ maxLength: 6 }), fc.string({ maxLength: 6 }), { maxKeys: 2 }) }) }),
);
const pod = fc.record({
  apiVersion: fc.constant('v1'),
  kind: fc.constant('Pod'),
  metadata: fc.record({ name, namespace: fc.oneof(label, hostileName), uid }, { requiredKeys: ['name'] }),
  spec: fc.record({ nodeName: fc.constantFrom('node-1', 'node-2', ''), volumes: fc.array(podVolume, { maxLength: 3 }) }, { requiredKeys: [] }),
});
const pvc = fc.record({
  apiVersion: fc.constant('v1'),
  kind: fc.constant('PersistentVolumeClaim'),
  metadata: fc.record({ name, namespace: label }),
  spec: fc.record({ volumeName: name, volumeMode: fc.constantFrom('Filesystem', 'Block') }, { requiredKeys: [] }),
});
const pv = fc.record({
  apiVersion: fc.constant('v1'),
  kind: fc.constant('PersistentVolume'),
  metadata: fc.record({ name }),
  spec: fc.record({ csi: fc.record({ driver: name, volumeHandle: fc.string({ minLength: 1, maxLength: 20 }) }), volumeMode: fc.constantFrom('Filesystem', 'Block') }, { requiredKeys: [] }),
});
const driver = fc.record({
  apiVersion: fc.constantFrom('storage.k8s.io/v1', 'storage.k8s.io/v1beta1'),
  kind: fc.constant('CSIDriver'),
  metadata: fc.record({ name }),
  spec: fc.record(
    {
      attachRequired: fc.boolean(),
      podInfoOnMount: fc.boolean(),
      volumeLifecycleModes: fc.subarray(['Persistent', 'Ephemeral']),
      tokenRequests: fc.uniqueArray(fc.record({ audience: fc.string({ maxLength: 8 }), expirationSeconds: fc.integer({ min: 600, max: 86400 }) }, { requiredKeys: ['audience'] }), { maxLength: 2, selector: (t) => t.audience }),
      requiresRepublish: fc.boolean(),
    },
    { requiredKeys: [] },
  ),
});
/** A Secret whose values carry a marker, so that no problem message may ever show one. */
const SECRET_MARK = 'SECRETVALUE';
const secretValue = fc.string({ maxLength: 12 }).map((t) => `${SECRET_MARK}${t}`);
const secret = fc.record({
  apiVersion: fc.constant('v1'),
  kind: fc.constant('Secret'),
  metadata: fc.record({ name, namespace: label }),
  data: fc.dictionary(fc.stringMatching(/^[a-z._-]{1,8}$/), fc.oneof(secretValue.map((v) => Buffer.from(v, 'utf8').toString('base64')), secretValue)),
  stringData: fc.dictionary(fc.stringMatching(/^[a-z._-]{1,8}$/), secretValue),
});
const volumeAttachment = fc.record({
  apiVersion: fc.constant('storage.k8s.io/v1'),
  kind: fc.constant('VolumeAttachment'),
  metadata: fc.record({ name }),
  spec: fc.record({ attacher: name, nodeName: name, source: fc.record({ persistentVolumeName: name }) }),
  status: fc.record({ attached: fc.boolean(), attachmentMetadata: fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 })) }, { requiredKeys: [] }),
});
const object = fc.oneof(pod, pvc, pv, driver, secret, volumeAttachment, fc.jsonValue({ maxDepth: 3 }));
const documents = fc.array(object, { maxLength: 5 });

function render(objects: readonly unknown[]): Uint8Array {
  return utf8.encode(objects.map((o) => stringify(o)).join('---\n'));
}

/** YAML-looking damage: cuts, stray indentation, tabs, anchors and aliases, odd bytes. */
const damaged = fc.oneof(
  documents.chain((docs) => {
    const bytes = render(docs);
    return fc.tuple(fc.nat({ max: bytes.length }), fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 3 })).map(([cut, flips]) => {
      const out = Uint8Array.from(bytes.subarray(0, Math.max(cut, bytes.length - cut)));
      for (const [at, b] of flips) if (out.length > 0) out[at % out.length] = b;
      return out;
    });
  }),
  fc.array(fc.constantFrom('a: &x [1, 2]\n', 'b: *x\n', 'c: *y\n', '---\n', '  - ', '\t', 'kind: Pod\n', 'metadata: {name: p}\n', '? : \n', '<<: *x\n', '"\\u', ']', '{', '%YAML 1.2\n', '!!binary ', '\n'), { maxLength: 16 }).map((parts) => utf8.encode(parts.join(''))),
  fc.uint8Array({ maxLength: 64 }),
);

/** Every name the parser hands on that becomes a path segment under the root dir stays one. */
function assertConfined(parsed: ParsedFile): void {
  const inside = (...segments: string[]): void => {
    for (const s of segments) {
      const p = posix.join(ROOT, 'pods', s);
      assert.ok(s !== '' && !s.includes('/') && s !== '.' && s !== '..', `segment ${JSON.stringify(s)} is not one path segment`);
      assert.ok(p.startsWith(`${ROOT}/pods/`), `${p} escapes ${ROOT}`);
    }
  };
  for (const o of parsed.objects) {
    switch (o.kind) {
      case 'Pod':
        inside(o.pod.uid, o.pod.namespace, o.pod.name, ...o.pod.volumes.map((v) => v.name), ...o.pod.volumes.flatMap((v) => (v.csi !== undefined ? [v.csi.driver] : [])));
        break;
      case 'PersistentVolumeClaim':
        inside(o.pvc.name, o.pvc.namespace);
        break;
      case 'PersistentVolume':
        inside(o.pv.name, ...(o.pv.csi !== undefined ? [o.pv.csi.driver] : []));
        break;
      case 'CSIDriver':
        inside(o.driver.name);
        break;
      case 'Secret':
      case 'VolumeAttachment':
        break; // never a path under the root dir
    }
  }
}

function assertWellFormed(parsed: ParsedFile): void {
  for (const p of parsed.problems) {
    assert.equal(p.file, FILE);
    assert.ok(p.message.startsWith(FILE), p.message);
    if (p.line !== undefined) assert.ok(Number.isInteger(p.line) && p.line >= 1);
  }
}

describe('manifests: properties', () => {
  it('rendered objects parse back: every valid object kept, every invalid one reported, names confined to one path segment', bound(), () => {
    fc.assert(
      fc.property(documents, (docs) => {
        const parsed = parseManifestFile(FILE, render(docs), MAX_ALIASES);
        assertWellFormed(parsed);
        assertConfined(parsed);
        // Each non-null document is either an object (known kind), a problem, or ignored (unknown kind).
        assert.ok(parsed.objects.length + parsed.problems.length <= docs.length);
        for (const o of parsed.objects) {
          const src = docs[o.document] as { metadata: { name: string } };
          if (o.kind === 'Pod') {
            assert.equal(o.pod.name, src.metadata.name);
            const meta = src.metadata as { uid?: string };
            if (meta.uid !== undefined) assert.equal(o.pod.uid, meta.uid);
          }
          if (o.kind === 'PersistentVolume') assert.equal(o.pv.name, src.metadata.name);
          if (o.kind === 'CSIDriver') assert.equal(o.driver.name, src.metadata.name);
          if (o.kind === 'VolumeAttachment') assert.equal(o.attachment.name, src.metadata.name);
          if (o.kind === 'Secret') {
            // stringData over data, the base64 decoded.
            const sec = src as unknown as { data: Record<string, string>; stringData: Record<string, string> };
            for (const [k, v] of Object.entries(sec.stringData)) assert.equal(o.data[k], v);
            for (const [k, v] of Object.entries(sec.data)) if (!Object.hasOwn(sec.stringData, k)) assert.equal(o.data[k], Buffer.from(v, 'base64').toString('utf8'));
          }
        }
        for (const p of parsed.problems) assert.ok(!p.message.includes(SECRET_MARK), `a problem shows a Secret value: ${p.message}`);
      }),
      runs(0.5),
    );
  });

  it('damaged or arbitrary bytes never throw: objects and problems, each problem naming the file', bound(), () => {
    fc.assert(
      fc.property(damaged, (bytes) => {
        const parsed = parseManifestFile(FILE, bytes, MAX_ALIASES);
        assertWellFormed(parsed);
        assertConfined(parsed);
      }),
      runs(0.5),
    );
  });

  it('alias bombs are refused as a problem, not expanded', bound(0.05), () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 12 }), fc.integer({ min: 2, max: 10 }), (levels, fanout) => {
        const lines = ['a0: &a0 [x]'];
        for (let i = 1; i <= levels; i++) lines.push(`a${i}: &a${i} [${Array.from({ length: fanout }, () => `*a${i - 1}`).join(', ')}]`);
        const parsed = parseManifestFile(FILE, utf8.encode(`${lines.join('\n')}\n`), MAX_ALIASES);
        assertWellFormed(parsed);
        assert.deepEqual(parsed.objects, []);
        // One problem: the alias bomb refused, or (small enough to load) the missing kind.
        assert.equal(parsed.problems.length, 1);
        if (fanout ** levels > 100_000) assert.match(parsed.problems[0]?.message ?? '', /alias count/);
      }),
      runs(0.05),
    );
  });
});
