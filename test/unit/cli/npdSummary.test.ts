// node-problem-detector within its limits: every line `nodevol audit -o summary` can print (the
// message of the Node condition CSIVolumesOrphaned, deploy/npd) is one line of at most 200 bytes
// (NPD's max_output_length there, which NPD cuts in bytes), names every count whole, and gives no
// advice meant for a terminal (no `nodevol demo` in a Node condition). Enumerated: OK with and
// without the cluster's view; PROBLEM for every combination of the seven counts, with small and
// huge counts and short, long, multi-byte and control-character names; UNKNOWN for every failure
// reason, with the real failure of each reason (collectAuditRun on a real directory) and with
// worst-case details.
import assert from 'node:assert/strict';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';

import type { ClusterAudit, ClusterFinding } from '../../../src/audit/clusterFindings.js';
import { CLUSTER_FINDING_KINDS } from '../../../src/audit/findingKinds.js';
import type { AuditFailed, AuditStuck, AuditUndescribed, AuditVolume } from '../../../src/audit/report.js';
import { AUDIT_FAILURE_REASONS, AuditRunFailure, type AuditFailureReason } from '../../../src/cli/auditFailure.js';
import { cutToBytes, renderSummary, renderSummaryUnknown, SUMMARY_MAX_BYTES, type FullAuditReport } from '../../../src/cli/auditOutput.js';
import { collectAuditRun } from '../../../src/cli/auditRun.js';
import { discardLogger } from '../../../src/ports/logger.js';
import { NodeFixture } from '../../support/nodeFixture.js';

const NPD_CONFIG = path.resolve(import.meta.dirname, '..', '..', '..', '..', 'deploy', 'npd', 'nodevol-audit-plugin.json');

/** What every NPD message must be; returns the line without its newline. */
function checkMessage(out: string, what: string): string {
  assert.ok(out.endsWith('\n'), `${what}: no final newline: ${JSON.stringify(out)}`);
  const line = out.slice(0, -1);
  assert.ok(!line.includes('\n'), `${what}: more than one line: ${JSON.stringify(out)}`);
  assert.ok(Buffer.byteLength(line) <= SUMMARY_MAX_BYTES, `${what}: ${Buffer.byteLength(line)} bytes: ${line}`);
  assert.match(line, /^(OK|PROBLEM|UNKNOWN): \S/, what);
  // eslint-disable-next-line no-control-regex
  assert.doesNotMatch(line, /[\u0000-\u001f\u007f-\u009f]/, `${what}: a control character`);
  assert.doesNotMatch(line, /nodevol (demo|audit|recover)|examples\//, `${what}: advice for a terminal in a Node condition: ${line}`);
  assert.doesNotMatch(line, /\uFFFD/, `${what}: a character cut in half`);
  return line;
}

const NAMES: Record<string, string> = {
  short: 'vol-1',
  long: `vol-${'x'.repeat(300)}`,
  multibyte: `卷-${'ü'.repeat(80)}-💾`,
  control: 'vol-\u001b[31m\nforged\u0007',
};

/** The report parts behind the seven counts, `n` each, every name `handle`-based. */
function report(kinds: ReadonlySet<string>, n: number, handle: string, withCluster: boolean): FullAuditReport {
  const driver = `ebs.csi.${'d'.repeat(40)}.example.com`;
  const volume: AuditVolume = {
    uniqueName: `kubernetes.io/csi/${driver}^${handle}`,
    driver,
    volumeHandle: handle,
    specName: 'pv-1',
    mode: 'Filesystem',
    lifecycle: 'Persistent',
    pods: [],
    global: { deviceMountPath: `/var/lib/kubelet/plugins/kubernetes.io/csi/${driver}/abc/globalmount`, mounted: true, hasSpecVolID: true },
    verdict: 'orphaned',
    verdictWithGate: 'recovered',
    reasons: [],
  };
  const failed: AuditFailed = { podUID: 'uid', specName: 'pv-1', path: '/p', error: 'e', recoverableWithGate: true };
  const undescribed: AuditUndescribed = { path: `/var/lib/kubelet/${handle}`, deviceMountPath: `/var/lib/kubelet/${handle}/globalmount`, mode: 'Filesystem', reason: 'unreadable-vol-data', detail: 'd' };
  const stuck: AuditStuck = {
    uniqueName: volume.uniqueName,
    driver,
    operation: 'unmount_device',
    podName: '',
    firstFailure: '',
    lastFailure: '',
    failures: 1,
    lastError: '',
    podDirs: [],
    reason: 'r',
  };
  const many = <T>(on: boolean, x: T): T[] => (on ? new Array<T>(n).fill(x) : []);
  const findings = ([] as ClusterFinding[]).concat(...CLUSTER_FINDING_KINDS.map((kind) => many(kinds.has(kind), { kind, uniqueName: volume.uniqueName, driver, reason: 'r' })));
  const cluster: ClusterAudit = { source: 'cluster.json', nodeName: 'node-1', volumesInUse: [], volumesAttached: [], pods: {}, wantedBy: {}, findings };
  const volumes = many(kinds.has('orphaned'), volume);
  return {
    rootDir: '/var/lib/kubelet',
    featureGates: { CSIGlobalMountReconstruction: false },
    volumes,
    failed: many(kinds.has('failed'), failed),
    skipped: [],
    undescribed: many(kinds.has('undescribed'), undescribed),
    summary: { volumes: volumes.length, tracked: 0, recovered: 0, orphaned: volumes.length, failed: 0, skipped: 0, undescribed: 0 },
    mountTableProblems: [],
    timestamp: '2026-12-01T00:00:00.000Z',
    ...(kinds.has('stuck') ? { stuckOperations: { source: 's', writtenAt: null, findings: many(true, stuck), stale: 0 } } : {}),
    ...(withCluster ? { cluster } : {}),
  };
}

const KINDS = ['orphaned', 'failed', 'undescribed', 'stuck', ...CLUSTER_FINDING_KINDS] as const;
const HEADS: Record<(typeof KINDS)[number], (n: number) => string> = {
  orphaned: (n) => `${n} orphaned`,
  failed: (n) => `${n} fail reconstruction`,
  undescribed: (n) => `${n} undescribed global mount(s)`,
  stuck: (n) => `${n} stuck`,
  'at-risk': (n) => `${n} at-risk`,
  'attached-elsewhere': (n) => `${n} attached-elsewhere`,
  'pod-gone': (n) => `${n} pod-gone`,
};

describe('nodevol audit -o summary: every node-problem-detector message fits a Node condition', () => {
  it('the limit is the max_output_length of deploy/npd', async () => {
    const { readFile } = await import('node:fs/promises');
    const config = JSON.parse(await readFile(NPD_CONFIG, 'utf8')) as { pluginConfig: { max_output_length: number } };
    assert.equal(config.pluginConfig.max_output_length, SUMMARY_MAX_BYTES);
  });

  it('OK: with and without the cluster\'s view', () => {
    for (const withCluster of [false, true]) {
      const r = report(new Set(), 0, 'vol-1', withCluster);
      r.summary.volumes = 9_999_999;
      const line = checkMessage(renderSummary(r), `OK, cluster ${withCluster}`);
      assert.equal(line, `OK: 9999999 CSI volume(s), none orphaned${withCluster ? ', no cluster finding' : ''}`);
    }
  });

  it('PROBLEM: every combination of counts (1, 3, 999), with every kind of name', () => {
    let checked = 0;
    let maxBytes = 0;
    for (let mask = 1; mask < 1 << KINDS.length; mask++) {
      const kinds = new Set(KINDS.filter((_, i) => (mask & (1 << i)) !== 0));
      for (const n of [1, 3, 999]) {
        for (const [nameKind, handle] of Object.entries(NAMES)) {
          const line = checkMessage(renderSummary(report(kinds, n, handle, true)), `${[...kinds].join('+')} × ${n}, ${nameKind} names`);
          for (const k of kinds) assert.ok(line.includes(HEADS[k](n)), `${HEADS[k](n)} missing: ${line}`);
          // The first orphaned volume is named whenever orphaned is the only count.
          if (kinds.size === 1 && kinds.has('orphaned')) assert.match(line, /\(ebs\.csi\./, line);
          maxBytes = Math.max(maxBytes, Buffer.byteLength(line));
          checked++;
        }
      }
    }
    assert.equal(checked, 127 * 3 * 4);
    assert.ok(maxBytes > 150, `the long names must push the budget (longest ${maxBytes} bytes)`);
  });

  it('PROBLEM: every count at a million still fits, whole', () => {
    const line = checkMessage(renderSummary(report(new Set(KINDS), 1_000_000, NAMES['long']!, true)), 'all kinds × 1,000,000');
    for (const k of KINDS) assert.ok(line.includes(HEADS[k](1_000_000)), line);
  });

  it('short names are shown whole, as before', () => {
    const line = checkMessage(renderSummary(report(new Set(['orphaned', 'at-risk']), 1, 'vol-1', true)), 'story');
    assert.equal(line, `PROBLEM: 1 orphaned (ebs.csi.${'d'.repeat(40)}.example.com^vol-1), 1 at-risk`);
  });

  it('UNKNOWN: every failure reason, with a worst-case detail', () => {
    const details = ['x', `/var/lib/kubelet/${'p/'.repeat(3000)}`, 'line one\nline two', `${'é'.repeat(150)}💾`];
    for (const reason of AUDIT_FAILURE_REASONS) {
      for (const d of details) {
        const line = checkMessage(renderSummaryUnknown(new AuditRunFailure(reason, `nodevol audit: ${d}`)), `${reason}: ${d.slice(0, 20)}`);
        // The start and the end of the reason stay; a long middle (a path) is elided.
        const first = d.split('\n')[0]!;
        assert.ok(line.startsWith(`UNKNOWN: ${cutToBytes(first, 50).replace(/…$/, '')}`), line);
        assert.ok(line.endsWith(Array.from(first).slice(-10).join('')), line);
      }
    }
  });

  describe('UNKNOWN: the real failure of every reason', () => {
    let fx: NodeFixture;
    beforeEach(async () => {
      fx = await NodeFixture.create();
    });
    afterEach(async () => {
      await fx.cleanup();
    });

    it('each reason is reached, and its message is a short line with no advice', async () => {
      const mountinfo = await fx.writeMountInfo();
      const longDir = path.join(fx.base, 'd'.repeat(200), 'e'.repeat(200));
      const outside = path.join(fx.base, 'outside');
      const hostile = path.join(fx.base, 'hostile-root');
      await mkdir(outside);
      await mkdir(path.join(hostile, 'plugins', 'kubernetes.io'), { recursive: true });
      await symlink(outside, path.join(hostile, 'pods'));
      await symlink(outside, path.join(hostile, 'plugins', 'kubernetes.io', 'csi'));
      const kubeconfig = path.join(fx.base, 'kubeconfig');
      await writeFile(kubeconfig, 'not: [a kubeconfig');
      const base = { rootDir: fx.root, mountinfo, featureGates: [], v: 0, loggingFormat: 'text' as const };
      const cases: Record<AuditFailureReason, Parameters<typeof collectAuditRun>[0]> = {
        flags: { ...base, featureGates: ['NoSuchGate=true'] },
        'root-dir': { ...base, rootDir: longDir },
        mountinfo: { ...base, mountinfo: path.join(longDir, 'mountinfo') },
        'cluster-state': { ...base, clusterState: path.join(longDir, 'cluster.json'), nodeName: 'node-1' },
        'cluster-api': { ...base, kubeconfig, nodeName: 'node-1' },
        'nothing-read': { ...base, rootDir: hostile },
      };
      const { nothingReadFailure } = await import('../../../src/cli/auditRun.js');
      for (const reason of AUDIT_FAILURE_REASONS) {
        const run = await collectAuditRun(cases[reason], discardLogger, 'audit');
        const failure = run instanceof AuditRunFailure ? run : nothingReadFailure(run, 'audit');
        assert.ok(failure !== undefined, `${reason}: the run did not fail`);
        assert.equal(failure.reason, reason, failure.message);
        const line = checkMessage(renderSummaryUnknown(failure), reason);
        if (reason === 'root-dir') {
          // The stderr line keeps its advice for a person; the Node condition does not.
          assert.match(failure.message, /nodevol demo/);
          assert.match(line, /^UNKNOWN: --root-dir \S+ does not exist$/);
        }
      }
    });
  });
});
