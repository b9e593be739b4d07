import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { StatusEvent, TraceEvent } from '../../../src/trace/events.js';
import { analyzeInUse } from '../../../src/timeline/inUse.js';
import { storyOneRuns } from '../../support/timelineFixture.js';

const V = 'kubernetes.io/csi/mock.csi.nodevol.io^vol-1';
const STAGING = '/var/lib/kubelet/plugins/kubernetes.io/csi/mock.csi.nodevol.io/abc/globalmount';

function states(events: readonly TraceEvent[]): string[] {
  const a = analyzeInUse(events);
  return events.filter((e): e is StatusEvent => e.kind === 'status').map((e) => a.statuses.get(e)?.state ?? '?');
}

describe('volumesInUse against what is on the node', () => {
  it('story 1 gate off: vol-1 dropped while its NodeUnstageVolume never answered is unsafe, and the sentence says why', () => {
    const [off] = storyOneRuns();
    const a = analyzeInUse(off!.events);
    assert.deepEqual(states(off!.events), ['in-use', 'unsafe']);
    assert.equal(a.verdict.kind, 'unsafe');
    assert.equal(a.verdict.headline, 'vol-1 dropped from volumesInUse while staged → another node may attach it');
    assert.match(a.verdict.explanation, /^At step 3, reboot, volumesInUse became \[\] without vol-1, while vol-1 was still attached and staged on this node \(its NodeUnstageVolume at step 2, deletePod uid-1 \(NodeUnstageVolume hangs\) never answered\)\. The attach\/detach controller may now detach vol-1 and attach it to another node/);
  });

  it('story 1 gate on: vol-1 dropped only after NodeUnstageVolume succeeded is safe', () => {
    const [, on] = storyOneRuns();
    const a = analyzeInUse(on!.events);
    assert.deepEqual(states(on!.events), ['in-use', 'in-use', 'safe']);
    assert.equal(a.verdict.kind, 'safe');
    assert.equal(a.verdict.headline, 'vol-1 unstaged first, then dropped from volumesInUse: safe');
    assert.match(a.verdict.explanation, /^NodeUnstageVolume for vol-1 succeeded at step 4, wait: converged, and only then did volumesInUse drop it/);
  });

  it('attached before it is staged and reported: not yet in use, which is safe', () => {
    const events: TraceEvent[] = [
      { kind: 'step', t: 0, index: 0, label: 'start' },
      { kind: 'status', t: 1, volumesInUse: [], volumesAttached: [V] },
      { kind: 'status', t: 2, volumesInUse: [V], volumesAttached: [V] },
      { kind: 'csi', t: 3, end: 4, method: 'NodeStageVolume', volumeId: 'vol-1', outcome: 'OK' },
    ];
    assert.deepEqual(states(events), ['not-yet', 'in-use']);
    assert.equal(analyzeInUse(events).verdict.kind, 'clean');
  });

  it('an agent that finds vol-1 in use at start and drops it without unstaging it: unsafe, staging unknown', () => {
    const events: TraceEvent[] = [
      { kind: 'step', t: 0, index: 0, label: 'agent started: pid 7, boot b, CSIGlobalMountReconstruction=false' },
      { kind: 'status', t: 1, volumesInUse: [V], volumesAttached: [V], source: 'read' },
      { kind: 'status', t: 2, volumesInUse: [], volumesAttached: [V], source: 'written' },
    ];
    const a = analyzeInUse(events);
    assert.deepEqual(states(events), ['in-use', 'unsafe']);
    assert.equal(a.verdict.headline, 'vol-1 dropped from volumesInUse without being unstaged → another node may attach it');
    assert.match(a.verdict.explanation, /volumesInUse was written as \[\] without vol-1, while vol-1 was still attached and possibly staged on this node \(it was in volumesInUse when the trace began/);
  });

  it('the same start with the gate on: NodeUnstageVolume succeeds first, then the write: safe', () => {
    const events: TraceEvent[] = [
      { kind: 'step', t: 0, index: 0, label: 'agent started' },
      { kind: 'status', t: 1, volumesInUse: [V], volumesAttached: [V], source: 'read' },
      { kind: 'csi', t: 2, end: 3, method: 'NodeUnstageVolume', volumeId: 'vol-1', outcome: 'OK', request: { volumeId: 'vol-1', stagingTargetPath: STAGING } },
      { kind: 'status', t: 4, volumesInUse: [], volumesAttached: [V], source: 'written' },
      { kind: 'status', t: 5, volumesInUse: [], volumesAttached: [], source: 'read' },
    ];
    assert.deepEqual(states(events), ['in-use', 'safe', 'in-use']);
    assert.equal(analyzeInUse(events).verdict.kind, 'safe');
  });

  it('a failed NodeUnstageVolume leaves the volume staged; a published target keeps it on the node', () => {
    const failed: TraceEvent[] = [
      { kind: 'step', t: 0, index: 0, label: 'start' },
      { kind: 'csi', t: 1, end: 2, method: 'NodeStageVolume', volumeId: 'vol-1', outcome: 'OK' },
      { kind: 'status', t: 3, volumesInUse: [V], volumesAttached: [V] },
      { kind: 'csi', t: 4, end: 5, method: 'NodeUnstageVolume', volumeId: 'vol-1', outcome: 'INTERNAL' },
      { kind: 'status', t: 6, volumesInUse: [], volumesAttached: [V] },
    ];
    assert.deepEqual(states(failed), ['in-use', 'unsafe']);
    assert.match(analyzeInUse(failed).verdict.explanation, /its NodeUnstageVolume at step 1, start failed with INTERNAL/);
    // A later success does not rewrite what was true when the volume was dropped.
    const later: TraceEvent[] = [...failed, { kind: 'csi', t: 7, end: 8, method: 'NodeUnstageVolume', volumeId: 'vol-1', outcome: 'OK' }, { kind: 'status', t: 9, volumesInUse: [], volumesAttached: [V] }];
    assert.deepEqual(states(later), ['in-use', 'unsafe', 'not-yet']);
    assert.match(analyzeInUse(later).verdict.explanation, /while vol-1 was still attached and staged on this node \(its NodeUnstageVolume at step 1, start failed with INTERNAL\)/);
    const published: TraceEvent[] = [
      { kind: 'step', t: 0, index: 0, label: 'start' },
      { kind: 'csi', t: 1, end: 2, method: 'NodePublishVolume', volumeId: 'vol-1', outcome: 'OK', request: { targetPath: '/t/1' } },
      { kind: 'status', t: 3, volumesInUse: [V], volumesAttached: [V] },
      { kind: 'status', t: 4, volumesInUse: [], volumesAttached: [V] },
      { kind: 'csi', t: 5, end: 6, method: 'NodeUnpublishVolume', volumeId: 'vol-1', outcome: 'OK', request: { targetPath: '/t/1' } },
      { kind: 'status', t: 7, volumesInUse: [], volumesAttached: [V] },
    ];
    assert.deepEqual(states(published), ['in-use', 'unsafe', 'not-yet']);
  });

  it('a volume not attached is no attach/detach risk: dropping it while staged is not flagged', () => {
    const events: TraceEvent[] = [
      { kind: 'step', t: 0, index: 0, label: 'start' },
      { kind: 'csi', t: 1, end: 2, method: 'NodeStageVolume', volumeId: 'vol-1', outcome: 'OK' },
      { kind: 'status', t: 3, volumesInUse: [V], volumesAttached: [] },
      { kind: 'status', t: 4, volumesInUse: [], volumesAttached: [] },
    ];
    assert.deepEqual(states(events), ['in-use', 'in-use']);
  });
});
