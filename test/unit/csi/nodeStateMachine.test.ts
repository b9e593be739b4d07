// The shared CSI node state machine: decisions, strict vs lenient, per-volume locks, faults,
// snapshot/restore — and that the in-process fake answers with it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  CsiNodeState,
  VolumeLocks,
  decidePublish,
  decideStage,
  decideUnpublish,
  decideUnstage,
} from '../../../src/csi/nodeStateMachine.js';
import { CsiCallError, GrpcStatus } from '../../../src/ports/csi.js';
import { FakeCsiDriver } from '../../../src/adapters/memory/fakeCsiDriver.js';
import { MemFs } from '../../../src/adapters/memory/memFs.js';
import { MemoryMounter } from '../../../src/adapters/memory/memoryMounter.js';
import { FakeClock } from '../../support/fakeClock.js';

const strict = { mode: 'strict' as const, stageUnstage: true };
const lenient = { mode: 'lenient' as const, stageUnstage: true };

describe('CSI node state machine', () => {
  it('stage: argument checks in spec order, conflict at another path, repeat at the same path', () => {
    const st = new CsiNodeState();
    assert.deepEqual(decideStage(undefined, { volumeId: '', stagingTargetPath: '/s', access: 'mount' }), {
      ok: false,
      code: GrpcStatus.INVALID_ARGUMENT,
      details: 'volume ID missing in request',
    });
    assert.equal(decideStage(undefined, { volumeId: 'v', stagingTargetPath: '/s', access: undefined }).ok, false);
    assert.deepEqual(decideStage(st.view('v'), { volumeId: 'v', stagingTargetPath: '/s', access: 'mount' }), { ok: true, repeat: false });
    st.recordStaged('v', '/s', false);
    assert.deepEqual(decideStage(st.view('v'), { volumeId: 'v', stagingTargetPath: '/s', access: 'mount' }), { ok: true, repeat: true });
    const other = decideStage(st.view('v'), { volumeId: 'v', stagingTargetPath: '/t', access: 'mount' });
    assert.equal(!other.ok && other.code, GrpcStatus.FAILED_PRECONDITION);
  });

  it('unstage while published: strict refuses, lenient accepts', () => {
    const st = new CsiNodeState();
    st.recordStaged('v', '/s', false);
    st.recordPublished('v', '/t', false);
    const q = { volumeId: 'v', stagingTargetPath: '/s' };
    const refused = decideUnstage(st.view('v'), q, strict);
    assert.equal(!refused.ok && refused.code, GrpcStatus.FAILED_PRECONDITION);
    assert.deepEqual(decideUnstage(st.view('v'), q, lenient), { ok: true, repeat: false });
    assert.deepEqual(decideUnstage(undefined, q, strict), { ok: true, repeat: true }, 'not staged: idempotent success');
  });

  it('publish needs the volume staged at the staging path unless ephemeral; unpublish of an unknown target is a repeat', () => {
    const st = new CsiNodeState();
    const q = { volumeId: 'v', targetPath: '/t', stagingTargetPath: '/s', access: 'mount' as const, ephemeral: false };
    const notStaged = decidePublish(st.view('v'), q, strict);
    assert.equal(!notStaged.ok && notStaged.code, GrpcStatus.FAILED_PRECONDITION);
    assert.deepEqual(decidePublish(undefined, { ...q, stagingTargetPath: '', ephemeral: true }, strict), { ok: true, repeat: false });
    st.recordStaged('v', '/s', false);
    assert.deepEqual(decidePublish(st.view('v'), q, strict), { ok: true, repeat: false });
    assert.deepEqual(decideUnpublish(st.view('v'), { volumeId: 'v', targetPath: '/t' }), { ok: true, repeat: true });
  });

  it('per-volume locks answer ABORTED for a busy volume only, and a driver restart clears them', () => {
    const locks = new VolumeLocks();
    assert.equal(locks.acquire('a'), undefined);
    assert.equal(locks.acquire('a')?.code, GrpcStatus.ABORTED);
    assert.equal(locks.acquire('b'), undefined);
    assert.equal(locks.acquire(''), undefined, 'calls without a volume never lock');
    locks.clear();
    assert.equal(locks.acquire('a'), undefined);
  });

  it('snapshot and restore round-trip the state', () => {
    const st = new CsiNodeState();
    st.recordStaged('v', '/s', true);
    st.recordPublished('v', '/t2', true);
    st.recordPublished('v', '/t1', true);
    const snap = st.snapshot();
    assert.deepEqual(snap, { volumes: [{ volumeId: 'v', stagedAt: '/s', publishedAt: ['/t1', '/t2'], block: true }] });
    const copy = new CsiNodeState();
    copy.restore(snap);
    assert.deepEqual(copy.snapshot(), snap);
    copy.recordUnpublished('v', '/t1');
    copy.recordUnpublished('v', '/t2');
    copy.recordUnstaged('v');
    assert.deepEqual(copy.ids(), [], 'an idle volume is forgotten');
  });
});

describe('the in-process fake answers with the shared state machine', () => {
  async function fake(mode: 'strict' | 'lenient', volumeLocks = false): Promise<FakeCsiDriver> {
    const fs = MemFs.create();
    fs.writeRaw('/s/.keep', '');
    fs.writeRaw('/p/.keep', '');
    const mounter = new MemoryMounter(fs);
    const d = new FakeCsiDriver({ name: 'd', fs, mounter, clock: new FakeClock(), mode, volumeLocks });
    const cap = { mount: { fsType: '', mountFlags: [], volumeMountGroup: '' }, accessMode: { mode: 'SINGLE_NODE_WRITER' as const } };
    await d.nodeStageVolume({ volumeId: 'v', publishContext: {}, stagingTargetPath: '/s', volumeCapability: cap, secrets: {}, volumeContext: {} });
    await d.nodePublishVolume({ volumeId: 'v', publishContext: {}, stagingTargetPath: '/s', targetPath: '/p/t', volumeCapability: cap, readonly: false, secrets: {}, volumeContext: {} });
    return d;
  }

  it('strict refuses NodeUnstageVolume while published; lenient unstages and keeps the publication on record', async () => {
    const strictDriver = await fake('strict');
    await assert.rejects(strictDriver.nodeUnstageVolume({ volumeId: 'v', stagingTargetPath: '/s' }), (e: unknown) => e instanceof CsiCallError && e.code === GrpcStatus.FAILED_PRECONDITION);
    const lenientDriver = await fake('lenient');
    await lenientDriver.nodeUnstageVolume({ volumeId: 'v', stagingTargetPath: '/s' });
    assert.deepEqual(lenientDriver.volume('v'), { publishedAt: new Set(['/p/t']), block: false });
  });

  it('with volume locks, a call for a volume with a call in flight answers ABORTED; snapshot/restore copy the state', async () => {
    const d = await fake('strict', true);
    d.inject({ method: 'NodeUnpublishVolume', hang: true, times: 1 });
    const first = d.nodeUnpublishVolume({ volumeId: 'v', targetPath: '/p/t' });
    await assert.rejects(d.nodeUnpublishVolume({ volumeId: 'v', targetPath: '/p/t' }), (e: unknown) => e instanceof CsiCallError && e.code === GrpcStatus.ABORTED);
    assert.equal(d.isBusy('v'), true);
    d.releaseHangs();
    await first;
    assert.equal(d.isBusy('v'), false);
    const snap = d.snapshot();
    assert.deepEqual(snap, { volumes: [{ volumeId: 'v', stagedAt: '/s', publishedAt: [], block: false }] });
    d.restore({ volumes: [] });
    assert.equal(d.volume('v'), undefined);
  });
});
