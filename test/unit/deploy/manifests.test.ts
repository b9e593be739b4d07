// deploy/: the kustomize base (audit DaemonSet, RBAC, PriorityClass, Service), the
// node-problem-detector base, the microk8s overlay, the prometheus-operator component (PodMonitor,
// PrometheusRule) through its example overlay, and the overlay docs/operating.md ("Deploying
// it") tells an operator to write. Each is rendered (test/support/kustomize.ts; checked
// against `kubectl kustomize` where kubectl is installed) and every object is validated
// kubeconform-style: against the Kubernetes JSON schemas (kubernetes-models: types, enums,
// required fields, quantities) and strictly (a round trip through @kubernetes/client-node's
// typed models: a misspelt or misplaced field fails; PodMonitor and PrometheusRule, which
// kubernetes-models does not know, against strict schemas of the operator's fields:
// test/support/prometheusOperator.ts). Then what the manifests promise is
// asserted (least privilege, HostToContainer, every node, the parameters), and their commands
// are run: the DaemonSet's args start the long-running audit, the NPD rule prints one line.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';

import * as k8s from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';

import { CliProcess, NODEVOL_BIN } from '../../support/cliProcess.js';
import { byKey, renderKustomization, type KubeObject } from '../../support/kustomize.js';
import { NodeFixture } from '../../support/nodeFixture.js';
import { prometheusOperatorSchema } from '../../support/prometheusOperator.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..', '..');
const DEPLOY = path.join(REPO_ROOT, 'deploy');
const MICROK8S_ROOT = '/var/snap/microk8s/common/var/lib/kubelet';
const DOC_DIGEST = 'sha256:' + 'e'.repeat(64);

/** The overlay docs/operating.md shows, written where it says, beside deploy/. */
function docOverlay(): { dir: string; cleanup: () => void } {
  const doc = readFileSync(path.join(REPO_ROOT, 'docs', 'operating.md'), 'utf8');
  const m = /```yaml\n# my-cluster\/kustomization\.yaml\n([\s\S]*?)```/.exec(doc);
  assert.ok(m !== null, 'docs/operating.md: no ```yaml block starting with "# my-cluster/kustomization.yaml"');
  const base = mkdtempSync(path.join(tmpdir(), 'nodevol-overlay-'));
  mkdirSync(path.join(base, 'my-cluster'));
  symlinkSync(DEPLOY, path.join(base, 'deploy'));
  writeFileSync(path.join(base, 'my-cluster', 'kustomization.yaml'), m[1]!.replace('sha256:<digest>', DOC_DIGEST));
  return { dir: path.join(base, 'my-cluster'), cleanup: () => rmSync(base, { recursive: true, force: true }) };
}

const RENDERED: Record<string, () => KubeObject[]> = {
  'deploy/base': () => renderKustomization(path.join(DEPLOY, 'base')),
  'deploy/npd': () => renderKustomization(path.join(DEPLOY, 'npd')),
  'deploy/overlays/microk8s': () => renderKustomization(path.join(DEPLOY, 'overlays', 'microk8s')),
  'deploy/overlays/prometheus-operator': () => renderKustomization(path.join(DEPLOY, 'overlays', 'prometheus-operator')),
  'deploy/explore-job.yaml': () => parseAllDocuments(readFileSync(path.join(DEPLOY, 'explore-job.yaml'), 'utf8')).map((d) => d.toJS() as KubeObject),
  'deploy/mutate-job.yaml': () => parseAllDocuments(readFileSync(path.join(DEPLOY, 'mutate-job.yaml'), 'utf8')).map((d) => d.toJS() as KubeObject),
  "docs/operating.md's my-cluster overlay": () => {
    const o = docOverlay();
    try {
      return renderKustomization(o.dir);
    } finally {
      o.cleanup();
    }
  },
};

const find = (objects: readonly KubeObject[], kind: string, name: string): KubeObject => {
  const o = objects.find((x) => x.kind === kind && x.metadata.name === name);
  assert.ok(o !== undefined, `no ${kind} ${name}`);
  return o;
};
/** The object through client-node's typed model (a class instance with its known fields only). */
function typed<T>(o: KubeObject, ctor: abstract new () => T): T {
  const model: unknown = k8s.loadYaml(k8s.dumpYaml(o));
  assert.ok(model instanceof ctor, `${o.kind} ${o.metadata.name}: not a ${ctor.name}`);
  return model;
}
const podSpec = (ds: KubeObject): k8s.V1PodSpec => {
  const spec = typed(ds, k8s.V1DaemonSet).spec?.template.spec;
  assert.ok(spec !== undefined);
  return spec;
};

/** Kubernetes' $(VAR) expansion of a container's args from its literal and fieldRef env. */
function expandArgs(c: k8s.V1Container, values: Record<string, string>): string[] {
  const env = new Map((c.env ?? []).map((e) => [e.name, e.value ?? values[e.name] ?? `$(${e.name})`]));
  return (c.args ?? []).map((a) => a.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (all, name: string) => env.get(name) ?? all));
}

describe('deploy/: every rendered manifest validates against the Kubernetes schemas', () => {
  for (const [name, render] of Object.entries(RENDERED)) {
    it(`${name}: each object passes its JSON schema and survives a round trip through its typed model unchanged`, async () => {
      const objects = render();
      assert.ok(objects.length > 0);
      for (const o of objects) {
        const crd = prometheusOperatorSchema(o.kind);
        if (crd !== undefined) {
          const r = crd.safeParse(o);
          assert.ok(r.success, `${name}: ${o.kind} ${o.metadata.name}: ${r.success ? '' : r.error.message}`);
          continue;
        }
        const models = (await import(`kubernetes-models/${o.apiVersion}`)) as Record<string, unknown>;
        const Model = models[o.kind] as (new (data: unknown) => { validate(): void }) | undefined;
        assert.ok(Model !== undefined, `${name}: ${o.apiVersion} ${o.kind}: no schema`);
        assert.doesNotThrow(() => new Model(o).validate(), `${name}: ${o.kind} ${o.metadata.name}`);
        const back = parseAllDocuments(k8s.dumpYaml(k8s.loadYaml(k8s.dumpYaml(o))))[0]?.toJS() as unknown;
        assert.deepEqual(back, o, `${name}: ${o.kind} ${o.metadata.name} has fields the Kubernetes API types do not know, or of the wrong type`);
      }
    });
  }

  it('the schema check fails on a wrong value (it can fail)', async () => {
    const ds = structuredClone(find(renderKustomization(path.join(DEPLOY, 'base')), 'DaemonSet', 'nodevol-audit'));
    const spec = ((ds['spec'] as { template: { spec: { containers: { volumeMounts: { mountPropagation: string }[] }[] } } }).template.spec);
    spec.containers[0]!.volumeMounts[0]!.mountPropagation = 'Sideways';
    const { DaemonSet } = (await import('kubernetes-models/apps/v1')) as { DaemonSet: new (d: unknown) => { validate(): void } };
    assert.throws(() => new DaemonSet(ds).validate(), /mountPropagation/);
  });

  it('the prometheus-operator schemas fail on a misspelt field and a wrong duration (they can fail)', () => {
    const objects = renderKustomization(path.join(DEPLOY, 'overlays', 'prometheus-operator'));
    const pm = structuredClone(find(objects, 'PodMonitor', 'nodevol-audit'));
    (pm['spec'] as Record<string, unknown>)['podMetricEndpoints'] = [];
    assert.equal(prometheusOperatorSchema('PodMonitor')?.safeParse(pm).success, false);
    const pr = structuredClone(find(objects, 'PrometheusRule', 'nodevol-audit'));
    (pr['spec'] as { groups: { rules: { for?: string }[] }[] }).groups[0]!.rules[0]!.for = '15 minutes';
    assert.equal(prometheusOperatorSchema('PrometheusRule')?.safeParse(pr).success, false);
  });

  const kubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' });
  const noKubectl = kubectl.status === 0 ? undefined : 'kubectl is not installed: the renderer is not compared with kubectl kustomize here';
  for (const [name, render] of Object.entries(RENDERED)) {
    if (name.endsWith('.yaml')) continue;
    it(`${name}: the test renderer gives what kubectl kustomize gives`, { skip: noKubectl }, () => {
      let dir = path.join(REPO_ROOT, name);
      let cleanup = (): void => undefined;
      if (name.startsWith('docs/operating.md')) ({ dir, cleanup } = docOverlay());
      try {
        const theirs = parseAllDocuments(execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8' })).map((d) => d.toJS() as KubeObject);
        const mine = byKey(render());
        const want = byKey(theirs);
        assert.deepEqual([...mine.keys()].sort(), [...want.keys()].sort());
        for (const [k, v] of want) assert.deepEqual(mine.get(k), v, k);
      } finally {
        cleanup();
      }
    });
  }
});

describe('deploy/base', () => {
  const objects = renderKustomization(path.join(DEPLOY, 'base'));

  it('holds the Namespace, the RBAC, the PriorityClass, the DaemonSet and the metrics Service', () => {
    assert.deepEqual(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort(), [
      'ClusterRole/nodevol-audit',
      'ClusterRoleBinding/nodevol-audit',
      'DaemonSet/nodevol-audit',
      'Namespace/nodevol-system',
      'PriorityClass/nodevol-audit',
      'Service/nodevol-audit-metrics',
      'ServiceAccount/nodevol-audit',
    ]);
  });

  it('the ClusterRole grants get/list only, on exactly what the audit reads, to the DaemonSet\'s service account', () => {
    const role = typed(find(objects, 'ClusterRole', 'nodevol-audit'), k8s.V1ClusterRole);
    const grants = (role.rules ?? []).flatMap((r) => (r.resources ?? []).flatMap((res) => r.verbs.map((v) => `${(r.apiGroups ?? [''])[0] ?? ''}/${res}:${v}`))).sort();
    assert.deepEqual(grants, [
      '/nodes:get',
      '/persistentvolumeclaims:get',
      '/persistentvolumes:get',
      '/persistentvolumes:list',
      '/pods:list',
      'storage.k8s.io/csidrivers:get',
      'storage.k8s.io/volumeattachments:get',
      'storage.k8s.io/volumeattachments:list',
    ]);
    const binding = typed(find(objects, 'ClusterRoleBinding', 'nodevol-audit'), k8s.V1ClusterRoleBinding);
    assert.equal(binding.roleRef.name, 'nodevol-audit');
    assert.deepEqual(binding.subjects?.map((s) => [s.kind, s.name, s.namespace]), [['ServiceAccount', 'nodevol-audit', 'nodevol-system']]);
    assert.equal(podSpec(find(objects, 'DaemonSet', 'nodevol-audit')).serviceAccountName, 'nodevol-audit');
  });

  it('the DaemonSet runs on every node, read-only, HostToContainer, with no privilege, requests, limits and its PriorityClass', () => {
    const pod = podSpec(find(objects, 'DaemonSet', 'nodevol-audit'));
    assert.deepEqual(pod.tolerations?.map((t) => [t.key, t.operator, t.effect]), [[undefined, 'Exists', undefined]], 'one toleration matching every taint');
    assert.equal(pod.priorityClassName, find(objects, 'PriorityClass', 'nodevol-audit').metadata.name);
    assert.notEqual(pod.hostPID, true);
    assert.notEqual(pod.hostNetwork, true);
    assert.notEqual(pod.hostIPC, true);
    assert.equal(pod.containers.length, 1);
    const c = pod.containers[0]!;
    assert.equal(c.image, 'nodevol:0.1.0');
    const sc = c.securityContext;
    assert.equal(sc?.privileged, false);
    assert.equal(sc?.allowPrivilegeEscalation, false);
    assert.equal(sc?.readOnlyRootFilesystem, true);
    assert.deepEqual(sc?.capabilities?.drop, ['ALL']);
    assert.equal(sc?.capabilities?.add, undefined);
    assert.ok(c.resources?.requests?.['cpu'] !== undefined && c.resources.requests['memory'] !== undefined, 'requests');
    assert.ok(c.resources?.limits?.['cpu'] !== undefined && c.resources.limits['memory'] !== undefined, 'limits');
    const hostPaths = new Map((pod.volumes ?? []).filter((v) => v.hostPath !== undefined).map((v) => [v.name, v.hostPath?.path]));
    assert.deepEqual([...hostPaths.values()].sort(), ['/proc', '/var/lib/kubelet']);
    for (const m of c.volumeMounts ?? []) {
      if (hostPaths.has(m.name)) assert.equal(m.readOnly, true, `${m.name} must be mounted read-only`);
    }
    const kubeletMount = c.volumeMounts?.find((m) => m.name === 'kubelet-root');
    // A reader of kubelet's mounts must see them come and go: None would pin every global mount
    // that existed when the pod started (device busy on NodeUnstageVolume, stale after detach).
    assert.equal(kubeletMount?.mountPropagation, 'HostToContainer');
    assert.equal(kubeletMount?.mountPath, '/var/lib/kubelet');
    assert.equal(c.env?.find((e) => e.name === 'NODE_NAME')?.valueFrom?.fieldRef?.fieldPath, 'spec.nodeName');
    assert.equal(c.env?.find((e) => e.name === 'KUBELET_ROOT_DIR')?.value, '/var/lib/kubelet');
    assert.ok(c.args?.some((a) => a.startsWith('--metrics-bind-address=$(POD_IP):')), 'metrics on the pod IP only');
    assert.equal(c.livenessProbe?.httpGet?.path, '/healthz');
  });

  it('the Service selects the DaemonSet\'s pods and is headless; the pods alone carry the scrape annotations (one scrape path)', () => {
    const svc = typed(find(objects, 'Service', 'nodevol-audit-metrics'), k8s.V1Service);
    const ds = typed(find(objects, 'DaemonSet', 'nodevol-audit'), k8s.V1DaemonSet);
    const podLabels = ds.spec?.template.metadata?.labels ?? {};
    assert.ok(Object.entries(svc.spec?.selector ?? {}).every(([k, v]) => podLabels[k] === v), 'selector matches the pod template');
    assert.equal(svc.spec?.clusterIP, 'None');
    // A Prometheus that honours both (the community chart's kubernetes-pods and
    // kubernetes-service-endpoints jobs) would scrape each pod twice.
    assert.equal(svc.metadata?.annotations, undefined);
    assert.deepEqual(ds.spec?.template.metadata?.annotations, { 'prometheus.io/scrape': 'true', 'prometheus.io/port': '10263', 'prometheus.io/path': '/metrics' });
    const scrapeTrue = objects.filter((o) => JSON.stringify(o).includes('"prometheus.io/scrape":"true"'));
    assert.deepEqual(scrapeTrue.map((o) => `${o.kind}/${o.metadata.name}`), ['DaemonSet/nodevol-audit']);
    assert.equal(svc.spec?.ports?.[0]?.port, 10263);
    assert.ok(ds.spec?.template.spec?.containers[0]?.ports?.some((p) => p.name === svc.spec?.ports?.[0]?.targetPort && p.containerPort === 10263));
  });

  describe('its container args start the long-running audit', () => {
    let fx: NodeFixture;
    beforeEach(async () => {
      fx = await NodeFixture.create();
    });
    afterEach(async () => {
      await fx.cleanup();
    });

    it('serves the findings on /metrics and stops on SIGTERM (exit 0)', async () => {
      await fx.stage({ driver: 'ebs.csi.example.com', handle: 'vol-1', specVolID: 'pv-1' });
      const mountinfo = await fx.writeMountInfo();
      const c = podSpec(find(objects, 'DaemonSet', 'nodevol-audit')).containers[0]!;
      const args = expandArgs(c, { POD_IP: '127.0.0.1' }).map((a) =>
        a
          .replace('--root-dir=/var/lib/kubelet', `--root-dir=${fx.root}`)
          .replace('--mountinfo-root-dir=/var/lib/kubelet', `--mountinfo-root-dir=${fx.root}`)
          .replace('--mountinfo=/host/proc/1/mountinfo', `--mountinfo=${mountinfo}`)
          .replace(/127\.0\.0\.1:\d+$/, '127.0.0.1:0'),
      );
      const env: NodeJS.ProcessEnv = { ...process.env, NODE_NAME: 'node-1' };
      delete env['KUBERNETES_SERVICE_HOST'];
      const p = CliProcess.start(args, env);
      try {
        const serving = await p.logged('Audit serving metrics');
        await p.logged('Audit finished');
        const text = await (await fetch(`http://${String(serving['address'])}/metrics`)).text();
        assert.ok(text.split('\n').includes('nodevol_audit_driver_volumes{driver="ebs.csi.example.com",verdict="orphaned"} 1'), text);
        assert.ok(text.split('\n').includes('nodevol_audit_last_run_success 1'), text);
        assert.equal((await fetch(`http://${String(serving['address'])}/healthz`)).status, 200);
      } finally {
        const exit = await p.stop();
        assert.deepEqual(exit, { code: 0, signal: null });
      }
    });
  });
});

interface NpdConfig {
  plugin: string;
  pluginConfig: { max_output_length: number };
  conditions: { type: string; reason: string }[];
  rules: { type: string; condition: string; reason: string; path: string; args: string[] }[];
}

describe('deploy/npd (node-problem-detector with the audit as a custom plugin)', () => {
  const objects = renderKustomization(path.join(DEPLOY, 'npd'));
  const configFile = (): NpdConfig => JSON.parse(readFileSync(path.join(DEPLOY, 'npd', 'nodevol-audit-plugin.json'), 'utf8')) as NpdConfig;
  let fx: NodeFixture;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await fx.cleanup();
  });

  it('NPD reads the plugin config from the ConfigMap it mounts, and the rule runs what the init container copies', () => {
    const pod = podSpec(find(objects, 'DaemonSet', 'nodevol-npd'));
    const npd = pod.containers.find((c) => c.name === 'node-problem-detector');
    assert.ok(npd !== undefined);
    const flag = npd.command?.find((a) => a.startsWith('--config.custom-plugin-monitor='))?.split('=')[1] ?? '';
    const configMount = npd.volumeMounts?.find((m) => flag.startsWith(`${m.mountPath}/`));
    const configVolume = pod.volumes?.find((v) => v.name === configMount?.name);
    const cm = typed(find(objects, 'ConfigMap', configVolume?.configMap?.name ?? ''), k8s.V1ConfigMap);
    assert.deepEqual(JSON.parse(cm.data?.[path.basename(flag)] ?? '{}'), configFile(), 'the ConfigMap holds deploy/npd/nodevol-audit-plugin.json');
    // The init container copies the image's /opt/nodevol into the volume NPD mounts where the rule looks.
    const init = pod.initContainers?.[0];
    assert.equal(init?.image, 'nodevol:0.1.0');
    const copyTo = init?.volumeMounts?.[0];
    assert.match(init?.command?.join(' ') ?? '', new RegExp(`cpSync\\('/opt/nodevol', '${copyTo?.mountPath ?? '?'}'`));
    const npdMount = npd.volumeMounts?.find((m) => m.name === copyTo?.name);
    assert.equal(npdMount?.readOnly, true);
    const rule = configFile().rules[0]!;
    for (const p of [rule.path, ...rule.args.filter((a) => a.startsWith('/'))]) assert.ok(p.startsWith(`${npdMount?.mountPath ?? '?'}/`), `${p} is outside the copied tree`);
    assert.equal(npd.volumeMounts?.find((m) => m.name === 'kubelet-root')?.mountPropagation, 'HostToContainer');
    for (const m of npd.volumeMounts ?? []) assert.equal(m.readOnly, true, m.name);
    assert.equal(npd.securityContext?.privileged, false);
    assert.deepEqual(npd.securityContext?.capabilities?.drop, ['ALL']);
    assert.deepEqual(pod.tolerations?.map((t) => t.operator), ['Exists']);
  });

  it('NPD\'s service account can set node conditions and read what the audit reads', () => {
    const bindings = objects.filter((o) => o.kind === 'ClusterRoleBinding').map((o) => typed(o, k8s.V1ClusterRoleBinding));
    assert.deepEqual(bindings.map((b) => [b.roleRef.name, b.subjects?.[0]?.name, b.subjects?.[0]?.namespace]).sort(), [
      ['nodevol-audit', 'nodevol-npd', 'nodevol-system'],
      ['system:node-problem-detector', 'nodevol-npd', 'nodevol-system'],
    ]);
  });

  it('is a custom plugin whose permanent rule sets the condition it declares', () => {
    const c = configFile();
    assert.equal(c.plugin, 'custom');
    assert.equal(c.rules.length, 1);
    assert.equal(c.rules[0]?.type, 'permanent');
    assert.equal(c.rules[0]?.condition, c.conditions[0]?.type);
    assert.notEqual(c.rules[0]?.reason, c.conditions[0]?.reason);
  });

  /** The rule's command here: this node for the copied node binary, this checkout for the copied tree. */
  const runRule = (rootDir: string, mountinfo: string): { status: number | null; stdout: string } => {
    const rule = configFile().rules[0]!;
    assert.equal(rule.path, '/nodevol/runtime/lib/ld-linux-x86-64.so.2');
    assert.deepEqual(rule.args.slice(0, 4), ['--library-path', '/nodevol/runtime/lib', '/nodevol/runtime/node', '/nodevol/bin/nodevol.js']);
    const args = rule.args.slice(4).map((a) =>
      a
        .replace('--root-dir=/var/lib/kubelet', `--root-dir=${rootDir}`)
        .replace('--mountinfo-root-dir=/var/lib/kubelet', `--mountinfo-root-dir=${rootDir}`)
        .replace('--mountinfo=/host/proc/1/mountinfo', `--mountinfo=${mountinfo}`),
    );
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env['KUBERNETES_SERVICE_HOST'];
    const r = spawnSync(process.execPath, [NODEVOL_BIN, ...args], { encoding: 'utf8', timeout: 60_000, env });
    return { status: r.status, stdout: r.stdout };
  };

  it('its command prints one line within max_output_length and exits 1 on a problem, 0 when clean', async () => {
    const clean = runRule(fx.root, await fx.writeMountInfo());
    assert.deepEqual(clean, { status: 0, stdout: 'OK: 0 CSI volume(s), none orphaned\n' });
    await fx.stage({ driver: 'ebs.csi.example.com', handle: 'vol-1', specVolID: 'pv-1' });
    const bad = runRule(fx.root, await fx.writeMountInfo());
    assert.equal(bad.status, 1);
    assert.equal(bad.stdout, 'PROBLEM: 1 orphaned (ebs.csi.example.com^vol-1)\n');
    assert.ok(bad.stdout.length <= configFile().pluginConfig.max_output_length);
  });

  it('its command prints its one-line reason on stdout on exit 2 (NPD reads stdout only: the condition gets a message)', async () => {
    const mountinfo = await fx.writeMountInfo();
    const missing = runRule(path.join(fx.root, 'nope'), mountinfo);
    assert.equal(missing.status, 2);
    assert.match(missing.stdout, /^UNKNOWN: --root-dir \S+nope does not exist\n$/);
    const noTable = runRule(fx.root, path.join(fx.root, 'no-mountinfo'));
    assert.equal(noTable.status, 2);
    assert.match(noTable.stdout, /^UNKNOWN: --mountinfo \S+no-mountinfo: [^\n]*ENOENT[^\n]*\n$/);
    // Neither the pods dir nor the CSI plugin dir readable: not "OK: 0 CSI volume(s)".
    const outside = path.join(fx.base, 'outside');
    const hostile = path.join(fx.base, 'hostile-root');
    mkdirSync(outside);
    mkdirSync(path.join(hostile, 'plugins', 'kubernetes.io'), { recursive: true });
    symlinkSync(outside, path.join(hostile, 'pods'));
    symlinkSync(outside, path.join(hostile, 'plugins', 'kubernetes.io', 'csi'));
    const nothing = runRule(hostile, mountinfo);
    assert.equal(nothing.status, 2);
    assert.match(nothing.stdout, /^UNKNOWN: could read neither \S+ nor \S+: nothing was audited[^\n]*\n$/);
  });
});

describe('the kubelet root dir, namespace and image as parameters', () => {
  it('deploy/overlays/microk8s: every host-side kubelet path is MicroK8s\', the container side is unchanged', () => {
    const objects = renderKustomization(path.join(DEPLOY, 'overlays', 'microk8s'));
    const audit = podSpec(find(objects, 'DaemonSet', 'nodevol-audit'));
    const npd = podSpec(find(objects, 'DaemonSet', 'nodevol-npd'));
    for (const pod of [audit, npd]) assert.equal(pod.volumes?.find((v) => v.name === 'kubelet-root')?.hostPath?.path, MICROK8S_ROOT);
    const args = expandArgs(audit.containers[0]!, { POD_IP: '10.0.0.1' });
    assert.ok(args.includes(`--mountinfo-root-dir=${MICROK8S_ROOT}`), args.join(' '));
    assert.ok(args.includes('--root-dir=/var/lib/kubelet'));
    const cm = typed(find(objects, 'ConfigMap', 'nodevol-npd-config'), k8s.V1ConfigMap);
    const rule = (JSON.parse(cm.data?.['nodevol-audit-plugin.json'] ?? '{}') as NpdConfig).rules[0]!;
    assert.ok(rule.args.includes(`--mountinfo-root-dir=${MICROK8S_ROOT}`), rule.args.join(' '));
    // Nothing else differs from the base's plugin config.
    const base = readFileSync(path.join(DEPLOY, 'npd', 'nodevol-audit-plugin.json'), 'utf8');
    assert.equal(cm.data?.['nodevol-audit-plugin.json'], base.replace('"--mountinfo-root-dir=/var/lib/kubelet"', `"--mountinfo-root-dir=${MICROK8S_ROOT}"`));
    // No host-side /var/lib/kubelet left anywhere (a hostPath, an env value, a config).
    const text = JSON.stringify(objects);
    const hostSide = [...text.matchAll(/"path":"\/var\/lib\/kubelet"|"value":"\/var\/lib\/kubelet"|--mountinfo-root-dir=\/var\/lib\/kubelet/g)];
    assert.deepEqual(hostSide, []);
  });

  it("docs/operating.md's my-cluster overlay: the image pinned by digest everywhere, the namespace everywhere", () => {
    const objects = RENDERED["docs/operating.md's my-cluster overlay"]!();
    const images = objects.flatMap((o) => (o.kind === 'DaemonSet' ? [...(podSpec(o).initContainers ?? []), ...podSpec(o).containers] : [])).map((c) => c.image);
    assert.deepEqual(images.filter((i) => i?.includes('nodevol')), [`registry.example.com/nodevol@${DOC_DIGEST}`, `registry.example.com/nodevol@${DOC_DIGEST}`]);
    for (const o of objects) {
      if (o.kind === 'Namespace') assert.equal(o.metadata.name, 'storage-audit');
      else if (!['ClusterRole', 'ClusterRoleBinding', 'PriorityClass'].includes(o.kind)) assert.equal(o.metadata.namespace, 'storage-audit', `${o.kind} ${o.metadata.name}`);
      if (o.kind === 'ClusterRoleBinding') assert.deepEqual(typed(o, k8s.V1ClusterRoleBinding).subjects?.map((s) => s.namespace), ['storage-audit']);
    }
  });
});

describe('deploy/components/prometheus-operator (through deploy/overlays/prometheus-operator)', () => {
  const objects = renderKustomization(path.join(DEPLOY, 'overlays', 'prometheus-operator'));

  it('adds a PodMonitor and a PrometheusRule in the pods\' namespace, and turns the annotation scrape off: one scrape path', () => {
    const pm = find(objects, 'PodMonitor', 'nodevol-audit');
    const pr = find(objects, 'PrometheusRule', 'nodevol-audit');
    assert.equal(pm.metadata.namespace, 'nodevol-system');
    assert.equal(pr.metadata.namespace, 'nodevol-system');
    const ds = typed(find(objects, 'DaemonSet', 'nodevol-audit'), k8s.V1DaemonSet);
    assert.equal(ds.metadata?.namespace, pm.metadata.namespace);
    assert.equal(ds.spec?.template.metadata?.annotations?.['prometheus.io/scrape'], 'false');
    assert.ok(!JSON.stringify(objects).includes('"prometheus.io/scrape":"true"'));
    // The PodMonitor selects exactly the audit pods, on the container port they serve /metrics on.
    const spec = pm['spec'] as { selector: { matchLabels: Record<string, string> }; podMetricsEndpoints: { port: string; path: string; relabelings: { sourceLabels: string[]; targetLabel: string }[] }[] };
    const podLabels = ds.spec?.template.metadata?.labels ?? {};
    assert.ok(Object.entries(spec.selector.matchLabels).every(([k, v]) => podLabels[k] === v));
    const npd = renderKustomization(path.join(DEPLOY, 'npd'));
    const npdLabels = typed(find(npd, 'DaemonSet', 'nodevol-npd'), k8s.V1DaemonSet).spec?.template.metadata?.labels ?? {};
    assert.ok(!Object.entries(spec.selector.matchLabels).every(([k, v]) => npdLabels[k] === v), 'the NPD pods serve no /metrics of ours');
    const port = ds.spec?.template.spec?.containers[0]?.ports?.find((p) => p.name === spec.podMetricsEndpoints[0]?.port);
    assert.equal(port?.containerPort, 10263);
    assert.equal(spec.podMetricsEndpoints[0]?.path, '/metrics');
    assert.deepEqual(spec.podMetricsEndpoints[0]?.relabelings, [{ sourceLabels: ['__meta_kubernetes_pod_node_name'], targetLabel: 'node' }]);
  });

  it('the renderer refuses a Component named as a resource', () => {
    assert.throws(() => renderKustomization(path.join(DEPLOY, 'components', 'prometheus-operator')), /used through components:/);
  });
});

describe('deploy/: no stale file', () => {
  let files: string[] = [];
  before(() => {
    files = execFileSync('find', [DEPLOY, '-type', 'f'], { encoding: 'utf8' }).trim().split('\n').map((f) => path.relative(DEPLOY, f)).sort();
  });
  after(() => undefined);

  it('every file is a kustomization, a resource, a patch or a config one of them names (or the explore and mutate Jobs, the rules file and the dashboard, loaded on their own)', () => {
    const named = new Set<string>(['explore-job.yaml', 'mutate-job.yaml']);
    for (const dir of ['base', 'npd', 'overlays/microk8s', 'overlays/prometheus-operator', 'components/prometheus-operator']) {
      const k = readFileSync(path.join(DEPLOY, dir, 'kustomization.yaml'), 'utf8');
      named.add(`${dir}/kustomization.yaml`);
      for (const m of k.matchAll(/^\s+- (?:path: )?([\w./-]+\.(?:yaml|json))$/gm)) named.add(path.normalize(`${dir}/${m[1] ?? ''}`));
    }
    // Loaded on their own by Prometheus and Grafana (test/unit/deploy/monitoring.test.ts).
    for (const f of ['monitoring/nodevol-audit.rules.yaml', 'monitoring/nodevol-audit.dashboard.json']) named.add(f);
    assert.deepEqual(files.filter((f) => !named.has(f)), []);
  });
});

describe('deploy/explore-job.yaml: a search bigger than one machine', () => {
  const [job] = RENDERED['deploy/explore-job.yaml']?.() ?? [];

  it('is an Indexed Job whose pods each run their shard: the shard count is the completion count', () => {
    assert.ok(job !== undefined);
    const j = typed(job, k8s.V1Job);
    assert.equal(j.spec?.completionMode, 'Indexed');
    const container = j.spec?.template.spec?.containers[0];
    assert.ok(container !== undefined);
    const args = container.args ?? [];
    assert.equal(args[args.indexOf('--shard') + 1], `$(JOB_COMPLETION_INDEX)/${j.spec?.completions}`);
    assert.equal(j.spec?.template.spec?.securityContext?.runAsNonRoot, true);
  });

  it("its args, with the index Kubernetes puts in JOB_COMPLETION_INDEX, run: one shard's report as JSON", () => {
    assert.ok(job !== undefined);
    const container = typed(job, k8s.V1Job).spec?.template.spec?.containers[0];
    assert.ok(container !== undefined);
    // Kubernetes sets JOB_COMPLETION_INDEX in an Indexed Job's pods; here shard 3.
    const args = (container.args ?? []).map((a) => a.replace('$(JOB_COMPLETION_INDEX)', '3'));
    // The same command on a few workloads: the Job's 10,000 would take this test an hour.
    const small = args.map((a, i) => (args[i - 1] === '--generate' ? '8' : args[i - 1] === '--shard' ? '3/4' : a));
    const out = mkdtempSync(path.join(tmpdir(), 'nodevol-explore-job-'));
    try {
      const run = spawnSync(process.execPath, [NODEVOL_BIN, ...small.map((a) => (a === '/tmp/cases' ? out : a)), '--max-crash-points', '1', '--size', 'small'], { encoding: 'utf8' });
      assert.equal(run.status, 0, run.stderr);
      const report = JSON.parse(run.stdout) as { shard: string; workloads: number; violations: unknown[] };
      assert.equal(report.shard, '3/4');
      assert.equal(report.workloads, 2);
      assert.deepEqual(report.violations, []);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});

describe('deploy/mutate-job.yaml: the full mutation run', () => {
  it('is an Indexed Job whose pods each run their shard of `npm run mutate`, writing only emptyDirs', () => {
    const [job] = RENDERED['deploy/mutate-job.yaml']?.() ?? [];
    assert.ok(job !== undefined);
    const j = typed(job, k8s.V1Job);
    assert.equal(j.spec?.completionMode, 'Indexed');
    const container = j.spec?.template.spec?.containers[0];
    assert.ok(container !== undefined);
    assert.deepEqual(container.command, ['npm', 'run', 'mutate', '--']);
    const args = container.args ?? [];
    assert.equal(args[args.indexOf('--shard') + 1], `$(JOB_COMPLETION_INDEX)/${j.spec?.completions}`);
    assert.ok(args.includes('--print-json'));
    assert.equal(j.spec?.template.spec?.securityContext?.runAsNonRoot, true);
    assert.equal(container.securityContext?.readOnlyRootFilesystem, true);
    const emptyDirs = new Set((j.spec?.template.spec?.volumes ?? []).filter((v) => v.emptyDir !== undefined).map((v) => v.name));
    assert.deepEqual((container.volumeMounts ?? []).filter((m) => !emptyDirs.has(m.name)), []);
  });
});
