// deploy/: the DaemonSet, its RBAC, the Dockerfile and the node-problem-detector plugin config.
// The manifests are parsed and type-checked against the Kubernetes API types of
// @kubernetes/client-node (every field must survive a round trip through the typed models, so a
// misspelt or misplaced field fails), checked for least privilege, and their commands are run:
// the DaemonSet's container args start the long-running audit, the NPD rule's args print one
// line and exit 0 / 1.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import * as k8s from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { CliProcess, NODEVOL_BIN } from '../../support/cliProcess.js';
import { NodeFixture } from '../../support/nodeFixture.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..', '..');
const DEPLOY = path.join(REPO_ROOT, 'deploy');
const MANIFEST = path.join(DEPLOY, 'nodevol-audit.yaml');

const rawDocs = (): Record<string, unknown>[] =>
  parseAllDocuments(readFileSync(MANIFEST, 'utf8')).map((d) => {
    assert.deepEqual(d.errors, [], `YAML errors in ${MANIFEST}`);
    return d.toJS() as Record<string, unknown>;
  });

function typed<T>(kind: string, ctor: abstract new () => T): T {
  const docs = k8s.loadAllYaml(readFileSync(MANIFEST, 'utf8')) as unknown[];
  const found = docs.find((d): d is T => d instanceof ctor);
  assert.ok(found !== undefined, `no ${kind} in ${MANIFEST}`);
  return found;
}

describe('deploy/nodevol-audit.yaml', () => {
  it('every document is a known Kubernetes type and survives a round trip through its typed model unchanged', () => {
    const raw = rawDocs();
    const docs = k8s.loadAllYaml(readFileSync(MANIFEST, 'utf8')) as object[];
    const ctors = [k8s.V1Namespace, k8s.V1ServiceAccount, k8s.V1ClusterRole, k8s.V1ClusterRoleBinding, k8s.V1DaemonSet];
    assert.deepEqual(docs.map((d) => ctors.findIndex((c) => d instanceof c)), [0, 1, 2, 3, 4]);
    docs.forEach((d, i) => {
      const back = parseAllDocuments(k8s.dumpYaml(d))[0]?.toJS() as unknown;
      assert.deepEqual(back, raw[i], `document ${i} (${String(raw[i]?.['kind'])}) has fields the Kubernetes API types do not know, or of the wrong type`);
    });
  });

  it('the ClusterRole grants get/list only, on exactly what the audit reads', () => {
    const role = typed('ClusterRole', k8s.V1ClusterRole);
    const grants = (role.rules ?? []).flatMap((r) => (r.resources ?? []).flatMap((res) => (r.verbs).map((v) => `${(r.apiGroups ?? [''])[0] ?? ''}/${res}:${v}`))).sort();
    assert.deepEqual(grants, [
      '/nodes:get',
      '/persistentvolumeclaims:get',
      '/persistentvolumes:list',
      '/pods:list',
      'storage.k8s.io/csidrivers:list',
      'storage.k8s.io/volumeattachments:list',
    ]);
    const binding = typed('ClusterRoleBinding', k8s.V1ClusterRoleBinding);
    const sa = typed('ServiceAccount', k8s.V1ServiceAccount);
    assert.equal(binding.roleRef.name, role.metadata?.name);
    assert.deepEqual(binding.subjects?.map((s) => [s.kind, s.name, s.namespace]), [['ServiceAccount', sa.metadata?.name, sa.metadata?.namespace]]);
  });

  it('the DaemonSet runs on every node with no privilege beyond reading the kubelet root and the host mount table', () => {
    const ds = typed('DaemonSet', k8s.V1DaemonSet);
    const pod = ds.spec?.template.spec;
    assert.ok(pod !== undefined);
    assert.deepEqual(pod.tolerations?.map((t) => [t.key, t.operator, t.effect]), [[undefined, 'Exists', undefined]], 'one toleration matching every taint');
    assert.equal(pod.serviceAccountName, typed('ServiceAccount', k8s.V1ServiceAccount).metadata?.name);
    assert.notEqual(pod.hostPID, true);
    assert.notEqual(pod.hostNetwork, true);
    assert.notEqual(pod.hostIPC, true);
    assert.equal(pod.containers.length, 1);
    const c = pod.containers[0]!;
    const sc = c.securityContext;
    assert.equal(sc?.privileged, false);
    assert.equal(sc?.allowPrivilegeEscalation, false);
    assert.equal(sc?.readOnlyRootFilesystem, true);
    assert.deepEqual(sc?.capabilities?.drop, ['ALL']);
    assert.equal(sc?.capabilities?.add, undefined);
    const hostPaths = new Map((pod.volumes ?? []).filter((v) => v.hostPath !== undefined).map((v) => [v.name, v.hostPath?.path]));
    assert.deepEqual([...hostPaths.values()].sort(), ['/proc', '/var/lib/kubelet']);
    for (const m of c.volumeMounts ?? []) {
      if (hostPaths.has(m.name)) assert.equal(m.readOnly, true, `${m.name} must be mounted read-only`);
      assert.notEqual(m.mountPropagation, 'Bidirectional');
    }
    const kubeletMount = c.volumeMounts?.find((m) => hostPaths.get(m.name) === '/var/lib/kubelet');
    assert.equal(kubeletMount?.mountPath, '/var/lib/kubelet', 'the same path as on the host, so the mount table paths match');
    assert.equal(c.env?.find((e) => e.name === 'NODE_NAME')?.valueFrom?.fieldRef?.fieldPath, 'spec.nodeName');
    assert.ok(c.args?.some((a) => a.startsWith('--metrics-bind-address=$(POD_IP):')), 'metrics on the pod IP only');
    assert.equal(c.livenessProbe?.httpGet?.path, '/healthz');
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
      const c = typed('DaemonSet', k8s.V1DaemonSet).spec?.template.spec?.containers[0];
      const args = (c?.args ?? []).map((a) =>
        a
          .replace('--root-dir=/var/lib/kubelet', `--root-dir=${fx.root}`)
          .replace('--mountinfo=/host/proc/1/mountinfo', `--mountinfo=${mountinfo}`)
          .replace(/\$\(POD_IP\):\d+/, '127.0.0.1:0'),
      );
      const env: NodeJS.ProcessEnv = { ...process.env, NODE_NAME: 'node-1' };
      delete env['KUBERNETES_SERVICE_HOST'];
      const p = CliProcess.start(args, env);
      try {
        const serving = await p.logged('Audit serving metrics');
        await p.logged('Audit finished');
        const res = await fetch(`http://${String(serving['address'])}/metrics`);
        const text = await res.text();
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

describe('deploy/npd/nodevol-audit-plugin.json', () => {
  let fx: NodeFixture;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await fx.cleanup();
  });

  interface NpdConfig {
    plugin: string;
    pluginConfig: { max_output_length: number };
    conditions: { type: string; reason: string }[];
    rules: { type: string; condition: string; reason: string; path: string; args: string[] }[];
  }
  const config = (): NpdConfig => JSON.parse(readFileSync(path.join(DEPLOY, 'npd', 'nodevol-audit-plugin.json'), 'utf8')) as NpdConfig;

  it('is a custom plugin whose permanent rule sets the condition it declares', () => {
    const c = config();
    assert.equal(c.plugin, 'custom');
    assert.equal(c.rules.length, 1);
    assert.equal(c.rules[0]?.type, 'permanent');
    assert.equal(c.rules[0]?.condition, c.conditions[0]?.type);
    assert.notEqual(c.rules[0]?.reason, c.conditions[0]?.reason);
  });

  it('its command prints one line within max_output_length and exits 1 on a problem, 0 when clean', async () => {
    const rule = config().rules[0]!;
    const run = (mountinfo: string): { status: number | null; stdout: string } => {
      const args = rule.args.map((a) => a.replace('--root-dir=/var/lib/kubelet', `--root-dir=${fx.root}`).replace('--mountinfo=/proc/1/mountinfo', `--mountinfo=${mountinfo}`));
      const r = spawnSync(process.execPath, [NODEVOL_BIN, ...args], { encoding: 'utf8', timeout: 60_000 });
      return { status: r.status, stdout: r.stdout };
    };
    const clean = run(await fx.writeMountInfo());
    assert.deepEqual(clean, { status: 0, stdout: 'OK: 0 CSI volume(s), none orphaned\n' });
    await fx.stage({ driver: 'ebs.csi.example.com', handle: 'vol-1', specVolID: 'pv-1' });
    const bad = run(await fx.writeMountInfo());
    assert.equal(bad.status, 1);
    assert.equal(bad.stdout, 'PROBLEM: 1 orphaned (ebs.csi.example.com^vol-1)\n');
    assert.ok(bad.stdout.length <= config().pluginConfig.max_output_length);
  });

  it('its command prints its one-line reason on stdout on exit 2 (NPD reads stdout only: the condition gets a message)', async () => {
    const rule = config().rules[0]!;
    const run = (rootDir: string, mountinfo: string): { status: number | null; stdout: string } => {
      const args = rule.args.map((a) => a.replace('--root-dir=/var/lib/kubelet', `--root-dir=${rootDir}`).replace('--mountinfo=/proc/1/mountinfo', `--mountinfo=${mountinfo}`));
      const r = spawnSync(process.execPath, [NODEVOL_BIN, ...args], { encoding: 'utf8', timeout: 60_000 });
      return { status: r.status, stdout: r.stdout };
    };
    const mountinfo = await fx.writeMountInfo();
    const missing = run(path.join(fx.root, 'nope'), mountinfo);
    assert.equal(missing.status, 2);
    assert.match(missing.stdout, /^UNKNOWN: --root-dir \S+nope does not exist: [^\n]+\n$/);
    const noTable = run(fx.root, path.join(fx.root, 'no-mountinfo'));
    assert.equal(noTable.status, 2);
    assert.match(noTable.stdout, /^UNKNOWN: --mountinfo \S+no-mountinfo: [^\n]*ENOENT[^\n]*\n$/);
    // Neither the pods dir nor the CSI plugin dir readable: not "OK: 0 CSI volume(s)".
    const outside = path.join(fx.base, 'outside');
    const hostile = path.join(fx.base, 'hostile-root');
    mkdirSync(outside);
    mkdirSync(path.join(hostile, 'plugins', 'kubernetes.io'), { recursive: true });
    symlinkSync(outside, path.join(hostile, 'pods'));
    symlinkSync(outside, path.join(hostile, 'plugins', 'kubernetes.io', 'csi'));
    const nothing = run(hostile, mountinfo);
    assert.equal(nothing.status, 2);
    assert.match(nothing.stdout, /^UNKNOWN: could read neither \S+ nor \S+: nothing was audited[^\n]*\n$/);
  });
});

describe('deploy/Dockerfile', () => {
  it('copies only what exists and starts the launcher it copies', () => {
    const text = readFileSync(path.join(DEPLOY, 'Dockerfile'), 'utf8');
    const copies = [...text.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((m) => (m[1] ?? '').split(' '));
    assert.ok(copies.length > 0);
    for (const c of copies) assert.ok(existsSync(path.join(REPO_ROOT, c)), `COPY ${c}: not in the repo`);
    assert.match(text, /^ENTRYPOINT \["node", "\/opt\/nodevol\/bin\/nodevol\.js"\]$/m);
    assert.match(text, /^COPY --from=build \/src\/bin \.\/bin$/m);
  });
});
