/**
 * A small renderer of the kustomize features deploy/ uses, for tests that must run without the
 * kustomize binary (CI has no network but the npm registry and Debian's packages, and neither
 * ships kustomize). test/unit/deploy/manifests.test.ts checks its output against `kubectl
 * kustomize` wherever kubectl is installed.
 *
 * Supported (anything else in a kustomization.yaml is an error, so a new field cannot be
 * silently ignored): `resources` (files of YAML documents, and directories holding a
 * kustomization), `namespace` (namespaced objects, the Namespace object's own name, and the
 * ServiceAccount subjects of (Cluster)RoleBindings that name no namespace or one this renderer
 * set), `labels` (pairs, added to metadata.labels; includeSelectors and includeTemplates false),
 * `images` (newName, newTag, digest, on containers and initContainers of pod templates),
 * `patches` (strategic merge patches from a file, merged by kind, name and namespace, with
 * Kubernetes' merge keys for containers, env, volumes, volumeMounts, ports),
 * `configMapGenerator` (files and literals, disableNameSuffixHash: true, behavior create,
 * replace or merge), and `components` (directories holding a `kind: Component` kustomization:
 * applied, as kustomize does, after the resources and before the kustomization's own
 * generators and transformers, their patches and resources acting on everything accumulated).
 */
import { readFileSync, statSync } from 'node:fs';
import * as path from 'node:path';

import { parse, parseAllDocuments } from 'yaml';

export type KubeObject = Record<string, unknown> & { apiVersion: string; kind: string; metadata: Record<string, unknown> & { name: string; namespace?: string } };

const CLUSTER_SCOPED = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'PriorityClass', 'PersistentVolume', 'StorageClass', 'CSIDriver', 'CustomResourceDefinition', 'Node', 'VolumeAttachment']);
const KNOWN_FIELDS = new Set(['apiVersion', 'kind', 'namespace', 'labels', 'resources', 'components', 'images', 'patches', 'configMapGenerator']);
/** patchMergeKey of the lists deploy/ patches (k8s.io/api's struct tags). */
const MERGE_KEYS: Readonly<Record<string, string>> = { containers: 'name', initContainers: 'name', env: 'name', volumes: 'name', volumeMounts: 'mountPath', ports: 'containerPort' };

/** Subjects whose namespace this renderer set (kustomize tracks the same, so an overlay may move them). */
const setByUs = new WeakSet<object>();

type Json = Record<string, unknown>;
const isMap = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const asList = (v: unknown): unknown[] => (Array.isArray(v) ? (v as unknown[]) : []);

function isKubeObject(v: unknown): v is KubeObject {
  return isMap(v) && typeof v['kind'] === 'string' && typeof v['apiVersion'] === 'string' && isMap(v['metadata']) && typeof v['metadata']['name'] === 'string';
}

function loadDocs(file: string): KubeObject[] {
  return parseAllDocuments(readFileSync(file, 'utf8')).flatMap((d) => {
    if (d.errors.length > 0) throw new Error(`${file}: ${d.errors[0]?.message ?? 'YAML error'}`);
    const v: unknown = d.toJS();
    if (v === null || v === undefined) return [];
    if (!isKubeObject(v)) throw new Error(`${file}: a document without apiVersion, kind or metadata.name`);
    return [v];
  });
}

const key = (o: KubeObject): string => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;

function smp(target: unknown, patch: unknown, field?: string): unknown {
  if (isMap(target) && isMap(patch)) {
    const out: Json = { ...target };
    for (const [k, v] of Object.entries(patch)) out[k] = k in target ? smp(target[k], v, k) : v;
    return out;
  }
  const mergeKey = field === undefined ? undefined : MERGE_KEYS[field];
  if (Array.isArray(target) && Array.isArray(patch) && mergeKey !== undefined) {
    const patchItems = asList(patch);
    const targetItems = asList(target);
    // As kustomize orders them: the patch's items (merged with their originals) in the patch's
    // order, then the originals the patch does not name.
    const named = (t: unknown, p: Json): boolean => isMap(t) && t[mergeKey] === p[mergeKey];
    const merged = patchItems.map((p) => {
      const original = isMap(p) ? targetItems.find((t) => named(t, p)) : undefined;
      return original === undefined ? p : smp(original, p);
    });
    const rest = targetItems.filter((t) => !patchItems.some((p) => isMap(p) && named(t, p)));
    return [...merged, ...rest];
  }
  return patch;
}

function setImage(image: string, rule: Json): string {
  const at = image.indexOf('@');
  const noDigest = at >= 0 ? image.slice(0, at) : image;
  const colon = noDigest.lastIndexOf(':');
  const slash = noDigest.lastIndexOf('/');
  const name = colon > slash ? noDigest.slice(0, colon) : noDigest;
  let tag = colon > slash ? noDigest.slice(colon + 1) : undefined;
  let digest = at >= 0 ? image.slice(at + 1) : undefined;
  if (name !== rule['name']) return image;
  const newName = typeof rule['newName'] === 'string' ? rule['newName'] : name;
  if (typeof rule['newTag'] === 'string') {
    tag = rule['newTag'];
    digest = undefined;
  }
  if (typeof rule['digest'] === 'string') {
    digest = rule['digest'];
    tag = undefined;
  }
  return `${newName}${tag !== undefined ? `:${tag}` : ''}${digest !== undefined ? `@${digest}` : ''}`;
}

function podSpecs(o: KubeObject): Json[] {
  const spec = o['spec'];
  if (!isMap(spec)) return [];
  if (o.kind === 'Pod') return [spec];
  const template = spec['template'];
  return isMap(template) && isMap(template['spec']) ? [template['spec']] : [];
}

/**
 * Renders the kustomization in `dir`: the objects, in the order of their resources. A component
 * (`accumulated` given) acts on the objects accumulated so far by the kustomization naming it.
 */
export function renderKustomization(dir: string, accumulated?: readonly KubeObject[]): KubeObject[] {
  const file = path.join(dir, 'kustomization.yaml');
  const k: unknown = parse(readFileSync(file, 'utf8'));
  if (!isMap(k)) throw new Error(`${file}: not a map`);
  for (const f of Object.keys(k)) if (!KNOWN_FIELDS.has(f)) throw new Error(`${file}: ${f}: not supported by this renderer`);
  const isComponent = k['kind'] === 'Component';
  if (isComponent && (accumulated === undefined || k['apiVersion'] !== 'kustomize.config.k8s.io/v1alpha1')) {
    throw new Error(`${file}: a Component (kustomize.config.k8s.io/v1alpha1) is used through components:, not resources:`);
  }
  if (!isComponent && (accumulated !== undefined || (k['kind'] ?? 'Kustomization') !== 'Kustomization')) throw new Error(`${file}: components: names a directory whose kind is not Component`);
  const list = (f: string): unknown[] => {
    const v = k[f];
    if (v === undefined) return [];
    if (!Array.isArray(v)) throw new Error(`${file}: ${f}: not a list`);
    return v;
  };

  let objects: KubeObject[] = [...(accumulated ?? [])];
  for (const r of list('resources')) {
    if (typeof r !== 'string') throw new Error(`${file}: resources: not a path`);
    const p = path.resolve(dir, r);
    objects.push(...(statSync(p).isDirectory() ? renderKustomization(p) : loadDocs(p)));
  }
  for (const c of list('components')) {
    if (typeof c !== 'string') throw new Error(`${file}: components: not a path`);
    objects = renderKustomization(path.resolve(dir, c), objects);
  }

  for (const g of list('configMapGenerator')) {
    if (!isMap(g) || typeof g['name'] !== 'string') throw new Error(`${file}: configMapGenerator: an entry without a name`);
    const options = isMap(g['options']) ? g['options'] : {};
    if (options['disableNameSuffixHash'] !== true) throw new Error(`${file}: configMapGenerator ${g['name']}: only disableNameSuffixHash: true is supported`);
    const data: Record<string, string> = {};
    for (const f of Array.isArray(g['files']) ? g['files'] : []) data[path.basename(String(f))] = readFileSync(path.resolve(dir, String(f)), 'utf8');
    for (const l of Array.isArray(g['literals']) ? g['literals'] : []) {
      const [lk = '', ...rest] = String(l).split('=');
      data[lk] = rest.join('=');
    }
    const behavior = typeof g['behavior'] === 'string' ? g['behavior'] : 'create';
    const existing = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === g['name'] && (g['namespace'] === undefined || o.metadata.namespace === g['namespace']));
    if (behavior === 'create') {
      if (existing !== undefined) throw new Error(`${file}: configMapGenerator ${g['name']}: exists already (use behavior: replace or merge)`);
      objects.push({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: g['name'], ...(typeof g['namespace'] === 'string' ? { namespace: g['namespace'] } : {}) }, data });
    } else if (behavior === 'replace' || behavior === 'merge') {
      if (existing === undefined) throw new Error(`${file}: configMapGenerator ${g['name']}: behavior ${behavior} but no such ConfigMap`);
      existing['data'] = behavior === 'replace' ? data : { ...(isMap(existing['data']) ? existing['data'] : {}), ...data };
    } else throw new Error(`${file}: configMapGenerator ${g['name']}: behavior ${behavior}`);
  }

  for (const p of list('patches')) {
    if (!isMap(p) || typeof p['path'] !== 'string' || Object.keys(p).length !== 1) throw new Error(`${file}: patches: only { path: FILE } (strategic merge) is supported`);
    for (const patch of loadDocs(path.resolve(dir, p['path']))) {
      const i = objects.findIndex((o) => o.kind === patch.kind && o.metadata.name === patch.metadata.name && (patch.metadata.namespace === undefined || o.metadata.namespace === patch.metadata.namespace));
      if (i < 0) throw new Error(`${file}: patch ${key(patch)}: no such object`);
      objects[i] = smp(objects[i], patch) as KubeObject;
    }
  }

  const ns = k['namespace'];
  if (ns !== undefined) {
    if (typeof ns !== 'string') throw new Error(`${file}: namespace: not a string`);
    objects = objects.map((o) => {
      const copy = structuredClone(o);
      if (o.kind === 'Namespace') copy.metadata.name = ns;
      else if (!CLUSTER_SCOPED.has(o.kind)) copy.metadata.namespace = ns;
      if (o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding') {
        copy['subjects'] = asList(copy['subjects']).map((s, i) => {
          const before = asList(o['subjects'])[i];
          if (!isMap(s) || s['kind'] !== 'ServiceAccount') return s;
          if (s['namespace'] !== undefined && !(isMap(before) && setByUs.has(before))) return s;
          const moved = { ...s, namespace: ns };
          setByUs.add(moved);
          return moved;
        });
      }
      return copy;
    });
  }

  for (const l of list('labels')) {
    if (!isMap(l) || !isMap(l['pairs']) || l['includeSelectors'] === true || l['includeTemplates'] === true) throw new Error(`${file}: labels: only pairs without includeSelectors/includeTemplates are supported`);
    for (const o of objects) o.metadata['labels'] = { ...(isMap(o.metadata['labels']) ? o.metadata['labels'] : {}), ...l['pairs'] };
  }

  for (const rule of list('images')) {
    if (!isMap(rule) || typeof rule['name'] !== 'string') throw new Error(`${file}: images: an entry without a name`);
    for (const spec of objects.flatMap(podSpecs)) {
      for (const c of [...asList(spec['containers']), ...asList(spec['initContainers'])]) {
        if (isMap(c) && typeof c['image'] === 'string') c['image'] = setImage(c['image'], rule);
      }
    }
  }
  return objects;
}

/** Every object by kind/namespace/name (for comparisons that ignore order). */
export function byKey(objects: readonly KubeObject[]): Map<string, KubeObject> {
  return new Map(objects.map((o) => [key(o), o]));
}
