import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemFs } from '../../../src/adapters/memory/memFs.js';
import { MemoryMounter } from '../../../src/adapters/memory/memoryMounter.js';
import { createAgentTracer } from '../../../src/agent/tracer.js';
import { AGENT_STOPPED_MESSAGE } from '../../../src/trace/agentLife.js';
import { FakeCluster } from '../../../src/adapters/memory/fakeCluster.js';
import type { TraceEvent } from '../../../src/trace/events.js';
import { traceLine } from '../../../src/trace/traceFile.js';
import { FAILED_MESSAGE, GLOBAL_LISTING_MESSAGE } from '../../../src/trace/reconstruction.js';

const ROOT = '/var/lib/kubelet';

function setup() {
  const fs = MemFs.create();
  fs.writeRaw(`${ROOT}/.keep`, '');
  const mounter = new MemoryMounter(fs);
  const events: TraceEvent[] = [];
  let now = 1000;
  const tracer = createAgentTracer({ sink: (e) => events.push(e), nowMs: () => now++, rootDir: ROOT, mounter });
  return { fs, mounter, events, tracer };
}

describe('agent trace', () => {
  it('records the engine file changes it makes through the port, and only those', async () => {
    const { fs, events, tracer } = setup();
    const traced = tracer.fs(fs);
    await traced.mkdir(`${ROOT}/pods/u1`, { recursive: true, mode: 0o750 });
    await traced.writeFile(`${ROOT}/pods/u1/f`, new Uint8Array([1]));
    await traced.readdir(`${ROOT}/pods`);
    await traced.unlink(`${ROOT}/pods/u1/f`);
    await assert.rejects(traced.rmdir(`${ROOT}/pods/nope`));
    assert.deepEqual(
      events.map((e) => (e.kind === 'file' ? `${e.action} ${e.path}` : e.kind)),
      [`mkdir ${ROOT}/pods/u1`, `write ${ROOT}/pods/u1/f`, `remove ${ROOT}/pods/u1/f`],
    );
  });

  it('after a CSI call, records the mounts under the root dir that appeared and disappeared', async () => {
    const { fs, mounter, events, tracer } = setup();
    await fs.mkdir(`${ROOT}/g/globalmount`, { recursive: true, mode: 0o750 });
    await fs.mkdir('/elsewhere', { recursive: true, mode: 0o750 });
    await tracer.checkMounts();
    await mounter.mount('/dev/x', `${ROOT}/g/globalmount`, 'ext4', []);
    await mounter.mount('/dev/y', '/elsewhere', 'ext4', []);
    tracer.observeCsiCall({ driverName: 'd', method: 'NodeStageVolume', volumeId: 'v', request: { volumeId: 'v' }, startMs: 5, endMs: 9, code: 'OK', error: undefined });
    await tracer.checkMounts();
    await mounter.unmount(`${ROOT}/g/globalmount`);
    tracer.observeCsiCall({ driverName: 'd', method: 'NodeUnstageVolume', volumeId: 'v', request: { volumeId: 'v' }, startMs: 10, endMs: 12, code: 'INTERNAL', error: 'still published' });
    await tracer.checkMounts();
    assert.deepEqual(
      events.map((e) => (e.kind === 'mount' ? `${e.action} ${e.target}` : e.kind === 'csi' ? `${e.method} ${e.outcome} ${e.t}-${e.end}` : e.kind)),
      // Each call ends at the wall time it is recorded (the test's wall clock counts one per
      // reading) and starts its monotonic duration (4, then 2) before.
      ['NodeStageVolume OK 997-1001', `mount ${ROOT}/g/globalmount`, 'NodeUnstageVolume INTERNAL 1002-1004', `unmount ${ROOT}/g/globalmount`],
    );
  });

  it('a wall clock stepped back an hour during a CSI call: the call is drawn ending after it starts, as long as it lasted', () => {
    const events: TraceEvent[] = [];
    const wallAtStart = Date.UTC(2026, 11, 1, 10, 0, 0);
    let wall = wallAtStart;
    const tracer = createAgentTracer({ sink: (e) => events.push(e), nowMs: () => wall, rootDir: ROOT, mounter: new MemoryMounter(MemFs.create()) });
    // The call ran from monotonic 5,000 to 5,250 ms; meanwhile the wall clock went back an hour.
    wall = wallAtStart + 250 - 3_600_000;
    tracer.observeCsiCall({ driverName: 'd', method: 'NodeGetCapabilities', volumeId: '', request: undefined, startMs: 5_000, endMs: 5_250, code: 'OK', error: undefined });
    const csi = events.find((e) => e.kind === 'csi');
    assert.ok(csi?.kind === 'csi');
    assert.equal(csi.end, wall, 'stamped with the wall clock when recorded');
    assert.equal((csi.end ?? Number.NaN) - csi.t, 250, 'lasting its monotonic duration');
  });

  it('records volumesInUse when it is written and changes, with volumesAttached as last read', async () => {
    const { events, tracer } = setup();
    const inner = new FakeCluster();
    inner.attach('v1');
    const cluster = tracer.cluster(inner);
    await cluster.getNodeStatus();
    await cluster.setVolumesInUse(['v1']);
    await cluster.setVolumesInUse(['v1']);
    await cluster.setVolumesInUse([]);
    assert.deepEqual(
      events.map((e) => (e.kind === 'status' ? `${e.source ?? '?'} ${e.volumesInUse.join(',')}|${e.volumesAttached?.join(',') ?? 'unknown'}` : e.kind)),
      ['read |v1', 'written v1|v1', 'written |v1'],
    );
  });

  it('a restart that finds a volume in node.status records it as read, never an assumed empty list', async () => {
    // The picture of the bug is `volumesInUse = []` before UnstageVolume: a trace must not draw
    // it when node.status kept the volume.
    const { events, tracer } = setup();
    const inner = new FakeCluster();
    inner.attach('v1');
    inner.volumesInUse = ['v1'];
    const cluster = tracer.cluster(inner);
    await cluster.getNodeStatus();
    await cluster.setVolumesInUse(['v1']);
    await cluster.getNodeStatus();
    await cluster.setVolumesInUse([]);
    assert.deepEqual(
      events.map((e) => (e.kind === 'status' ? `${e.source ?? '?'} ${e.volumesInUse.join(',')}|${e.volumesAttached?.join(',') ?? 'unknown'}` : e.kind)),
      ['read v1|v1', 'written |v1'],
    );
  });

  it('a write before any read records volumesAttached as unknown, not as empty', async () => {
    const { events, tracer } = setup();
    const inner = new FakeCluster();
    inner.attach('v1');
    const cluster = tracer.cluster(inner);
    await cluster.setVolumesInUse(['v1']);
    await cluster.getNodeStatus();
    assert.deepEqual(
      events.map((e) => (e.kind === 'status' ? `${e.source ?? '?'} ${e.volumesInUse.join(',')}|${e.volumesAttached?.join(',') ?? 'unknown'}` : e.kind)),
      ['written v1|unknown', 'read v1|v1'],
    );
  });

  it('a life that did not write the stop line was killed: restart on the same boot, reboot on another', () => {
    const { events, tracer } = setup();
    const previous = [
      traceLine({ kind: 'step', t: 1, index: 0, label: 'agent started: pid 7, boot 1111-aaaa, gates' }),
      traceLine({ kind: 'csi', t: 2, method: 'NodeUnstageVolume', volumeId: 'v', outcome: 'OK' }),
    ].join('');
    tracer.started({ pid: 8, bootId: '1111-aaaa', gates: 'g', previousTail: previous });
    tracer.started({ pid: 9, bootId: '2222-bbbb', gates: 'g', previousTail: previous });
    tracer.started({ pid: 10, bootId: '2222-bbbb', gates: 'g', previousTail: previous + traceLine({ kind: 'log', t: 3, severity: 'I', message: `${AGENT_STOPPED_MESSAGE} (SIGTERM)` }) });
    tracer.started({ pid: 11, bootId: '2222-bbbb', gates: 'g', previousTail: '' });
    assert.deepEqual(
      events.map((e) => (e.kind === 'crash' ? e.crash : e.kind)),
      ['restart', 'step', 'reboot', 'step', 'step', 'step'],
    );
  });

  it('warnings and errors logged, at any verbosity, are recorded; info lines are not', () => {
    const { events, tracer } = setup();
    const lines: string[] = [];
    const base = {
      info: (m: string) => lines.push(m),
      warning: (m: string) => lines.push(m),
      error: (_e: unknown, m: string) => lines.push(m),
      v: () => base,
      enabled: () => true,
    };
    const logger = tracer.logger(base);
    logger.info('hello');
    logger.v(4).warning('careful', { volumeName: 'v1' });
    logger.error(new Error('boom'), 'Operation failed');
    assert.deepEqual(lines, ['hello', 'careful', 'Operation failed']);
    assert.deepEqual(
      events.map((e) => (e.kind === 'log' ? `${e.severity} ${e.message}` : e.kind)),
      ['W careful volumeName=v1', 'E Operation failed: boom'],
    );
  });

  it("records what reconstruction found, from the engine's V(2) lines, even when the log's verbosity drops them", () => {
    const { events, tracer } = setup();
    const written: string[] = [];
    const quiet = {
      info: (m: string) => written.push(m),
      warning: (m: string) => written.push(m),
      error: (_e: unknown, m: string) => written.push(m),
      // -v=0: a V(2) line is dropped.
      v: () => ({ ...quiet, info: () => undefined }),
      enabled: () => false,
    };
    const logger = tracer.logger(quiet);
    const vol = 'kubernetes.io/csi/d^vol-1';
    logger.v(2).info(GLOBAL_LISTING_MESSAGE, { volumeName: vol, deviceMountPath: `${ROOT}/plugins/kubernetes.io/csi/d/abc/globalmount` });
    logger.v(2).info('Volume reconstruction finished');
    logger.info(FAILED_MESSAGE, { podName: 'uid-2', volumeSpecName: 'pv-2', err: 'no vol_data.json' });
    assert.deepEqual(written, [FAILED_MESSAGE]);
    assert.deepEqual(
      events.map((e) => (e.kind === 'reconstruct' ? `${e.found} ${e.volumeName} ${e.podName ?? '-'} ${e.detail ?? '-'}` : e.kind)),
      [`global-listing ${vol} - ${ROOT}/plugins/kubernetes.io/csi/d/abc/globalmount`, 'failed pv-2 uid-2 no vol_data.json'],
    );
  });
});
