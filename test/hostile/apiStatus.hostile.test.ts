/**
 * `nodevol audit` as a process against an API server that refuses: 401 and 403 are exit 2 with a
 * line saying the credentials or their RBAC are wrong, one request, never a verdict, and under
 * --interval one request per cycle (no tight loop) with /healthz never healthy; a 429 with
 * Retry-After is waited for (the request is asked again no sooner than the server said), and a
 * Retry-After longer than the run waits for puts the next cycle after it.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import type { IncomingMessage } from 'node:http';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';

import { CliProcess, NODEVOL_BIN } from '../support/cliProcess.js';
import { node } from '../support/clusterObjects.js';
import { waitFor } from '../support/e2e/waitFor.js';
import { fakeApiServer, writeKubeconfig, type FakeApiServer, type StatusAnswer } from '../support/fakeApiServer.js';
import { NodeFixture } from '../support/nodeFixture.js';

const NODE = 'node-1';

function envWithoutCluster(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env['KUBERNETES_SERVICE_HOST'];
  delete env['NODE_NAME'];
  return env;
}

interface Run {
  readonly status: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the CLI without blocking this process (the API server under test lives here). */
function nodevol(args: readonly string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [NODEVOL_BIN, ...args], { env: envWithoutCluster(), timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ status: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr });
    });
  });
}

const isNodeGet = (req: IncomingMessage): boolean => (req.url ?? '').startsWith(`/api/v1/nodes/${NODE}`);

describe('hostile API server: 401, 403 and 429 with Retry-After', () => {
  let fx: NodeFixture;
  let api: FakeApiServer | undefined;
  let kubeconfig = '';
  let mountinfo = '';
  beforeEach(async () => {
    fx = await NodeFixture.create();
    kubeconfig = path.join(fx.base, 'kubeconfig');
    mountinfo = await fx.writeMountInfo();
  });
  afterEach(async () => {
    await api?.close();
    api = undefined;
    await fx.cleanup();
  });

  async function serve(fail: (req: IncomingMessage) => StatusAnswer | undefined): Promise<FakeApiServer> {
    const s = await fakeApiServer([node(NODE)], { fail });
    api = s;
    await writeKubeconfig(kubeconfig, s.url);
    return s;
  }
  const auditArgs = (...more: string[]): string[] => ['audit', '--root-dir', fx.root, '--mountinfo', mountinfo, '--kubeconfig', kubeconfig, '--node-name', NODE, ...more];

  it('401 and 403: exit 2, one line saying the credentials or their RBAC are wrong, one request, never a verdict', async () => {
    for (const [answer, want] of [
      [{ code: 401, reason: 'Unauthorized', message: 'Unauthorized' }, /get node node-1: HTTP 401: Unauthorized \(the API server did not accept the credentials: check the kubeconfig's user or the service account token; not retried\)$/],
      [{ code: 403, reason: 'Forbidden', message: 'nodes "node-1" is forbidden' }, /get node node-1: HTTP 403: nodes "node-1" is forbidden \(the credentials lack the RBAC permission for this request; .*; not retried\)$/],
    ] as const) {
      const s = await serve(() => answer);
      for (const output of ['table', 'json', 'summary']) {
        const before = s.requests.length;
        const r = await nodevol(auditArgs('-o', output));
        assert.equal(r.status, 2, `${answer.code} -o ${output}: ${r.stderr}`);
        assert.equal(r.stderr.trimEnd().split('\n').length, 1, r.stderr);
        assert.match(r.stderr.trimEnd(), want);
        // -o summary: node-problem-detector's UNKNOWN line; nothing else ever says anything.
        if (output === 'summary') assert.match(r.stdout, /^UNKNOWN: /);
        else assert.equal(r.stdout, '');
        assert.equal(s.requests.length - before, 1, 'one request, not retried');
      }
      await s.close();
      api = undefined;
    }
  });

  it('--interval with 403: one request per cycle, no verdict served, /healthz and /readyz never healthy', { timeout: 60_000 }, async () => {
    const s = await serve(() => ({ code: 403, reason: 'Forbidden', message: 'nodes "node-1" is forbidden' }));
    const p = CliProcess.start([...auditArgs('--interval', '1s', '--metrics-bind-address', '127.0.0.1:0', '--logging-format', 'json')], envWithoutCluster());
    try {
      const address = String((await p.logged('Audit serving metrics'))['address']);
      const failed = (): number => p.stderrLines.filter((l) => l.includes('"msg":"Audit could not run; serving no verdict"')).length;
      await waitFor(() => failed() >= 3, { what: 'three failed cycles', timeoutMs: 30_000, observe: () => p.stderrLines.slice(-3) });
      const cycles = failed();
      // The request of the next cycle may be on its way: at most one more request than failed cycles.
      assert.ok(s.requests.length >= cycles && s.requests.length <= cycles + 1, `${s.requests.length} requests for ${cycles} cycles`);
      const metrics = await (await fetch(`http://${address}/metrics`)).text();
      assert.match(metrics, /^nodevol_audit_last_run_success 0$/m);
      assert.doesNotMatch(metrics, /^nodevol_audit_volumes/m);
      assert.equal((await fetch(`http://${address}/healthz`)).status, 500);
      assert.equal((await fetch(`http://${address}/readyz`)).status, 503);
      assert.ok(p.stderrLines.some((l) => l.includes('the credentials lack the RBAC permission for this request')));
    } finally {
      assert.deepEqual(await p.stop(), { code: 0, signal: null });
    }
  });

  it('429 with Retry-After: 1: the request is asked again no sooner than 1 s later, and the audit completes', async () => {
    let n = 0;
    const s = await serve((req) => (isNodeGet(req) && n++ === 0 ? { code: 429, reason: 'TooManyRequests', message: 'too many requests', headers: { 'Retry-After': '1' } } : undefined));
    const r = await nodevol(auditArgs('-o', 'json'));
    assert.equal(r.status, 0, r.stderr);
    const gets = s.requests.filter((q) => q.path === `/api/v1/nodes/${NODE}`);
    assert.equal(gets.length, 2);
    const [first, second] = gets;
    assert.ok(first !== undefined && second !== undefined);
    assert.ok(second.atMs - first.atMs >= 1000, `asked again after ${second.atMs - first.atMs} ms`);
  });

  it('--interval with a Retry-After longer than the run waits (30 s): the next cycle waits for it; SIGTERM ends the wait', { timeout: 60_000 }, async () => {
    const s = await serve((req) => (isNodeGet(req) ? { code: 429, reason: 'TooManyRequests', message: 'too many requests', headers: { 'Retry-After': '30' } } : undefined));
    const p = CliProcess.start([...auditArgs('--interval', '1s', '--metrics-bind-address', '127.0.0.1:0', '--logging-format', 'json')], envWithoutCluster());
    try {
      const later = await p.logged('The API server asked to be called again later (Retry-After): the next audit waits for it');
      assert.equal(later['retryAfterMs'], 30_000);
      assert.equal(later['waitMs'], 30_000);
      assert.equal(s.requests.length, 1, 'not retried within the run');
    } finally {
      assert.deepEqual(await p.stop(), { code: 0, signal: null });
    }
    assert.equal(s.requests.length, 1, 'no request before the server\'s time');
  });
});
