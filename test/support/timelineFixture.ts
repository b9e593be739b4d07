/**
 * Test helper: two hand-written runs of KEP story 1 (drain + reboot while NodeUnstageVolume is in
 * flight) as trace events, gate off and gate on, with the gate-off run's in-use-reported
 * violation after the reboot. The simulator produces the real ones; these pin the renderer.
 */
import type { TraceEvent, TraceRun } from '../../src/trace/events.js';

const VOL = 'kubernetes.io/csi/mock.csi.nodevol.io^vol-1';
const GLOBAL = '/var/lib/kubelet/plugins/kubernetes.io/csi/mock.csi.nodevol.io/abc/globalmount';
const TARGET = '/var/lib/kubelet/pods/uid-1/volumes/kubernetes.io~csi/pv-1/mount';

function common(): TraceEvent[] {
  return [
    { kind: 'step', t: 0, index: 0, label: 'wait: converged' },
    { kind: 'operation', t: 100, end: 240, name: 'volume_mount', volumeName: VOL, podName: 'uid-1' },
    { kind: 'file', t: 110, action: 'write', path: GLOBAL.replace('/globalmount', '/vol_data.json') },
    { kind: 'csi', t: 120, end: 160, method: 'NodeStageVolume', volumeId: 'vol-1', outcome: 'OK', request: { volumeId: 'vol-1', stagingTargetPath: GLOBAL } },
    { kind: 'mount', t: 150, action: 'mount', target: GLOBAL, source: '/dev/fake/vol-1' },
    { kind: 'csi', t: 170, end: 230, method: 'NodePublishVolume', volumeId: 'vol-1', outcome: 'OK' },
    { kind: 'mount', t: 220, action: 'mount', target: TARGET, source: GLOBAL },
    { kind: 'status', t: 1000, volumesInUse: [VOL], volumesAttached: [VOL] },
    { kind: 'step', t: 2000, index: 1, label: 'deletePod uid-1 (NodeUnstageVolume hangs)' },
    { kind: 'operation', t: 2100, end: 2200, name: 'volume_unmount', volumeName: VOL, podName: 'uid-1' },
    { kind: 'csi', t: 2110, end: 2150, method: 'NodeUnpublishVolume', volumeId: 'vol-1', outcome: 'OK' },
    { kind: 'mount', t: 2140, action: 'unmount', target: TARGET },
    { kind: 'operation', t: 2300, end: undefined, name: 'unmount_device', volumeName: VOL, podName: '' },
    { kind: 'csi', t: 2310, end: undefined, method: 'NodeUnstageVolume', volumeId: 'vol-1', outcome: 'UNAVAILABLE' },
    { kind: 'step', t: 3000, index: 2, label: 'reboot' },
    { kind: 'crash', t: 3000, crash: 'reboot', detail: 'every mount is gone; files and driver state stay' },
    { kind: 'mount', t: 3000, action: 'lost', target: GLOBAL },
  ];
}

export function storyOneRuns(): TraceRun[] {
  const off: TraceEvent[] = [
    ...common(),
    { kind: 'status', t: 4000, volumesInUse: [], volumesAttached: [VOL] },
    { kind: 'violation', t: 4000, invariant: 'in-use-reported', message: `${VOL} is staged at the driver and attached, but volumesInUse omits it` },
    { kind: 'step', t: 5000, index: 3, label: 'wait: converged' },
    { kind: 'violation', t: 1_805_000, invariant: 'converges', message: `${VOL} is still staged at the driver; no pod wants it` },
  ];
  const on: TraceEvent[] = [
    ...common(),
    { kind: 'reconstruct', t: 3100, found: 'global-listing', volumeName: VOL, detail: GLOBAL },
    { kind: 'status', t: 4000, volumesInUse: [VOL], volumesAttached: [VOL] },
    { kind: 'step', t: 5000, index: 3, label: 'wait: converged' },
    { kind: 'operation', t: 5100, end: 5300, name: 'unmount_device', volumeName: VOL, podName: '' },
    { kind: 'csi', t: 5110, end: 5200, method: 'NodeUnstageVolume', volumeId: 'vol-1', outcome: 'OK' },
    { kind: 'file', t: 5250, action: 'rmdir', path: GLOBAL },
    { kind: 'file', t: 5260, action: 'remove', path: GLOBAL.replace('/globalmount', '/vol_data.json') },
    { kind: 'status', t: 6000, volumesInUse: [], volumesAttached: [] },
  ];
  return [
    { label: 'CSIGlobalMountReconstruction=false', summary: 'After the reboot volumesInUse drops the still-staged volume: the attach/detach controller may attach it elsewhere.', events: off },
    { label: 'CSIGlobalMountReconstruction=true', summary: 'The listing registers the global mount as uncertain, keeps it in volumesInUse and unstages it.', events: on },
  ];
}
