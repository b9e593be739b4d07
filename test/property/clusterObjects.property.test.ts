// Property tests for the cluster objects (untrusted input: the `--cluster-state` file, what
// `kubectl get … -o json` prints, and the API server's answers, which go through the same
// schemas). Whatever the text, parsing either gives objects or one ClusterStateError whose message
// starts with the source and names the item and field; a wrongly typed field is always caught;
// the reduction to one node's view keeps exactly that node's pods.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import fc from 'fast-check';

import { ClusterStateError, parseClusterList, parseObject, schemas, type ClusterObjects } from '../../src/api/clusterObjects.js';
import { clusterStateFor, wantedVolumes, type ClusterState } from '../../src/audit/clusterState.js';
import { claim, csiDriver, list, node, persistentVolume, pod, typedList, volumeAttachment, type KubeObject } from '../support/clusterObjects.js';
import { bound, runs } from './runs.js';

const SOURCE = '/tmp/cluster.json';
const NODES = ['node-1', 'node-2'] as const;

const label = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?$/);
/** Names as they come: good ones, and anything a hostile or broken tool could write. */
const name = fc.oneof({ weight: 3, arbitrary: label }, { weight: 1, arbitrary: fc.string({ maxLength: 12 }) });
const nodeName = fc.constantFrom(...NODES);

/** One valid object of each of the six kinds the audit reads, built like the API server's. */
const validObject: fc.Arbitrary<KubeObject> = fc.oneof(
  fc.tuple(nodeName, fc.array(name, { maxLength: 3 }), fc.array(name, { maxLength: 3 })).map(([n, inUse, attached]) => node(n, { volumesInUse: inUse, volumesAttached: attached })),
  fc.record({ n: name, ns: label, uid: fc.uuid(), node: nodeName, claims: fc.array(name, { maxLength: 3 }), phase: fc.constantFrom('Running', 'Pending', 'Succeeded', 'Failed') }).map((p) =>
    pod(p.n, { namespace: p.ns, uid: p.uid, nodeName: p.node, claims: p.claims, phase: p.phase }),
  ),
  fc.tuple(name, name, name).map(([n, d, h]) => persistentVolume(n, d, h)),
  fc.tuple(name, fc.oneof(name, fc.constant('')), label).map(([n, v, ns]) => claim(n, v, ns)),
  fc.tuple(name, name, name, nodeName, fc.boolean()).map(([d, h, pv, n, a]) => volumeAttachment(d, h, pv, n, a)),
  fc.tuple(name, fc.boolean()).map(([n, a]) => csiDriver(n, a)),
);
/** Objects of kinds the audit does not read (ignored), and kind-less JSON. */
const otherObject = fc.oneof(
  fc.record({ kind: fc.constantFrom('ConfigMap', 'Secret', 'Event', 'StorageClass'), apiVersion: fc.constant('v1'), metadata: fc.record({ name }) }),
  fc.dictionary(fc.string({ maxLength: 6 }).filter((k) => k !== 'kind'), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
);
const KINDS = ['Node', 'Pod', 'PersistentVolume', 'PersistentVolumeClaim', 'VolumeAttachment', 'CSIDriver'] as const;

function counts(objects: ClusterObjects): number[] {
  return [objects.nodes, objects.pods, objects.persistentVolumes, objects.claims, objects.volumeAttachments, objects.csiDrivers].map((a) => a.length);
}

/** A ClusterStateError that starts with the source: the only way parsing may fail. */
function isSourcedError(err: unknown): boolean {
  return err instanceof ClusterStateError && err.message.startsWith(SOURCE) && !err.message.includes('\n');
}

/** The JSON paths of the leaves of a value (objects and arrays walked), at most `max` of them. */
function leafPaths(value: unknown, max = 64): (string | number)[][] {
  const out: (string | number)[][] = [];
  const walk = (v: unknown, at: (string | number)[]): void => {
    if (out.length >= max) return;
    if (Array.isArray(v)) v.forEach((x, i) => walk(x, [...at, i]));
    else if (typeof v === 'object' && v !== null) for (const [k, x] of Object.entries(v)) walk(x, [...at, k]);
    else out.push(at);
  };
  walk(value, []);
  return out;
}

function setAt(value: unknown, path: readonly (string | number)[], leaf: unknown): unknown {
  const copy = structuredClone(value) as Record<string | number, unknown>;
  let o: Record<string | number, unknown> = copy;
  for (const k of path.slice(0, -1)) o = o[k] as Record<string | number, unknown>;
  const last = path.at(-1);
  if (last !== undefined) o[last] = leaf;
  return copy;
}

describe('cluster objects: properties', () => {
  it('a List of valid objects parses: every object of the six kinds kept, in order, other kinds ignored', bound(), () => {
    fc.assert(
      fc.property(fc.array(fc.oneof({ weight: 4, arbitrary: validObject }, { weight: 1, arbitrary: otherObject }), { maxLength: 12 }), (items) => {
        const objects = parseClusterList(JSON.stringify(list(items as KubeObject[])), SOURCE);
        const want = KINDS.map((k) => items.filter((i) => i['kind'] === k).length);
        assert.deepEqual(counts(objects), want);
        const names = (k: string): unknown[] => items.filter((i) => i['kind'] === k).map((i) => (i['metadata'] as { name: unknown }).name);
        assert.deepEqual(objects.pods.map((p) => p.metadata.name), names('Pod'));
        assert.deepEqual(objects.persistentVolumes.map((p) => p.metadata.name), names('PersistentVolume'));
      }),
      runs(),
    );
  });

  it('a typed List (PodList …) takes the kind of items that carry none', bound(), () => {
    fc.assert(
      fc.property(fc.array(validObject, { maxLength: 6 }), fc.constantFrom(...KINDS), (items, kind) => {
        const same = items.filter((i) => i['kind'] === kind).map((i) => Object.fromEntries(Object.entries(i).filter(([k]) => k !== 'kind')) as KubeObject);
        const objects = parseClusterList(JSON.stringify(typedList(`${kind}List`, 'v1', same)), SOURCE);
        assert.equal(counts(objects).reduce((a, b) => a + b, 0), same.length);
        assert.equal(counts(objects)[KINDS.indexOf(kind)], same.length);
      }),
      runs(),
    );
  });

  it('one wrongly typed field of a valid object is refused, naming the item and the field', bound(), () => {
    let broken = 0;
    fc.assert(
      fc.property(
        fc.array(validObject, { minLength: 1, maxLength: 4 }),
        fc.nat(),
        fc.nat(),
        fc.oneof(fc.constant(null), fc.integer(), fc.boolean(), fc.string({ maxLength: 4 }), fc.constant([]), fc.constant({})),
        (items, which, leaf, replacement) => {
          const i = which % items.length;
          const item = items[i];
          if (item === undefined) return;
          // The fields the schemas read, as a wrong type: a string field given a number and so on.
          const read = ['metadata.name', 'metadata.uid', 'metadata.namespace', 'spec.attacher', 'spec.nodeName', 'spec.csi.driver', 'spec.csi.volumeHandle', 'spec.attachRequired', 'status.attached', 'spec.volumeName'];
          const paths = leafPaths(item).filter((p) => read.includes(p.join('.')));
          const path = paths[leaf % Math.max(1, paths.length)];
          if (path === undefined) return;
          const before = path.reduce<unknown>((o, k) => (o as Record<string | number, unknown>)[k], item);
          // Fields that may be null (nullish in the schema) accept a null; the required ones do not.
          const required = ['metadata.name', 'Pod:metadata.uid', 'Pod:metadata.namespace', 'PersistentVolumeClaim:metadata.namespace', 'VolumeAttachment:spec.attacher', 'VolumeAttachment:spec.nodeName', 'PersistentVolume:spec.csi.driver', 'PersistentVolume:spec.csi.volumeHandle'];
          const field = path.join('.');
          const optional = replacement === null && !required.includes(field) && !required.includes(`${item.kind}:${field}`);
          if (typeof replacement === typeof before || optional) return; // not a type error
          const damaged = items.map((x, j) => (j === i ? setAt(x, path, replacement) : x));
          broken++;
          assert.throws(
            () => parseClusterList(JSON.stringify(list(damaged as KubeObject[])), SOURCE),
            (err: unknown) => isSourcedError(err) && (err as Error).message.startsWith(`${SOURCE}: items[${i}].${path.join('.')}: `),
          );
        },
      ),
      runs(),
    );
    // Not vacuous: most cases do break a field (the others drew a replacement of the same type).
    assert.ok(broken >= runs().numRuns! / 4, `only ${broken} cases broke a field`);
  });

  it('any text: objects or one ClusterStateError starting with the source, never another exception', bound(), () => {
    const text = fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
      fc.jsonValue({ maxDepth: 3 }).map((items) => JSON.stringify({ kind: 'List', items })),
      fc.array(fc.oneof(validObject, otherObject), { maxLength: 4 }).chain((items) => {
        const t = JSON.stringify(list(items as KubeObject[]));
        return fc.tuple(fc.nat({ max: t.length }), fc.string({ maxLength: 3 })).map(([cut, junk]) => t.slice(0, cut) + junk + t.slice(cut + junk.length));
      }),
    );
    fc.assert(
      fc.property(text, (t) => {
        try {
          const objects = parseClusterList(t, SOURCE);
          assert.ok(counts(objects).every((n) => Number.isInteger(n) && n >= 0));
        } catch (err) {
          assert.ok(isSourcedError(err), String(err));
        }
      }),
      runs(),
    );
  });

  it('every schema, given any JSON value: the object or a ClusterStateError naming `where`', bound(), () => {
    const kinds = Object.keys(schemas) as (keyof typeof schemas)[];
    fc.assert(
      fc.property(fc.constantFrom(...kinds), fc.oneof(fc.jsonValue({ maxDepth: 4 }), validObject), (kind, value) => {
        try {
          parseObject<unknown>(schemas[kind], value, `${SOURCE}: ${kind}`);
        } catch (err) {
          assert.ok(isSourcedError(err) && (err as Error).message.startsWith(`${SOURCE}: ${kind}`), String(err));
        }
      }),
      runs(),
    );
  });

  it("one node's view: exactly its pods, every pod UID known, wanted volumes computed without error", bound(), () => {
    fc.assert(
      fc.property(fc.array(validObject, { maxLength: 12 }), nodeName, (items, n) => {
        const objects = parseClusterList(JSON.stringify(list(items)), SOURCE);
        let state: ClusterState;
        try {
          state = clusterStateFor(objects, n, SOURCE);
        } catch (err) {
          assert.ok(isSourcedError(err), String(err));
          assert.ok(!objects.nodes.some((x) => x.metadata.name === n), 'only a missing node refuses the view');
          return;
        }
        assert.deepEqual(state.pods.map((p) => p.uid), objects.pods.filter((p) => p.spec.nodeName === n).map((p) => p.metadata.uid));
        for (const p of objects.pods) assert.ok(state.podUIDs.has(p.metadata.uid));
        const wanted = wantedVolumes(state);
        for (const pods of wanted.byVolume.values()) for (const p of pods) assert.ok(state.pods.some((x) => x.uid === p.uid && !x.terminated));
      }),
      runs(),
    );
  });
});
