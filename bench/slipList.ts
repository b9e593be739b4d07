/**
 * Eleven plausible one-line slips in the shipped engine, each as exact search/replace
 * edits on one source file. `npm run slips` (bench/slips.ts) puts one at a time into a temporary
 * copy of the tree and asks whether the built-in scenarios, the generated workloads and the unit
 * tests of the touched folder notice it (bench/slipCheck.ts). test/unit/bench/slips.test.ts keeps
 * the list from going stale: every search text is found exactly once in the current source.
 */

export interface SlipEdit {
  /** Exact text, found exactly once in the file. */
  readonly search: string;
  readonly replace: string;
}

export interface Slip {
  readonly id: number;
  /** One line: what the slip does. */
  readonly description: string;
  /** The source file, relative to the repository root. */
  readonly file: string;
  readonly edits: readonly SlipEdit[];
}

export const SLIPS: readonly Slip[] = [
  {
    id: 1,
    description: 'a listed volume is never queued for the node status update',
    file: 'src/volumemanager/reconciler/reconstruct.ts',
    edits: [
      {
        search: '    this.volumesNeedUpdateFromNodeStatus.push(name);\n    this.listedThisPass.set(name, gv.deviceMountPath);\n',
        replace: '    this.listedThisPass.set(name, gv.deviceMountPath);\n',
      },
    ],
  },
  {
    id: 2,
    description: 'volumesInUse counts only globally-mounted devices of the actual state',
    file: 'src/volumemanager/volumeManager.ts',
    edits: [
      {
        search: '    for (const v of this.asw.getAttachedVolumes()) if (v.pluginIsAttachable) names.add(v.volumeName);\n',
        replace: '    for (const v of this.asw.getGloballyMountedVolumes()) if (v.pluginIsAttachable) names.add(v.volumeName);\n',
      },
    ],
  },
  {
    id: 3,
    description: 'a listed global volume is marked mounted instead of uncertain',
    file: 'src/volumemanager/reconciler/reconstruct.ts',
    edits: [
      {
        search: '      asw.markDeviceAsUncertain(name, \'\', gv.deviceMountPath, gv.seLinuxMountContext);\n',
        replace: '      asw.markDeviceAsMounted(name, \'\', gv.deviceMountPath, gv.seLinuxMountContext);\n',
      },
    ],
  },
  {
    id: 4,
    description: 'the global vol_data.json is written in place (no temp file, fsync, rename)',
    file: 'src/volume/csi/csiAttacher.ts',
    edits: [
      {
        search: 'import { isVolumeDataNotFound, loadVolumeData, saveVolumeData, VOL_DATA_FILE_NAME, volDataKey } from \'./volumeData.js\';\n',
        replace: 'import { encodeVolumeData, isVolumeDataNotFound, loadVolumeData, saveVolumeData, VOL_DATA_FILE_NAME, volDataKey } from \'./volumeData.js\';\n',
      },
      {
        search: '      await saveVolumeData(host.fs, dataDir, data);\n',
        replace: '      await host.fs.writeFile(path.join(dataDir, VOL_DATA_FILE_NAME), encodeVolumeData(data), { mode: 0o644 });\n',
      },
    ],
  },
  {
    id: 5,
    description: 'NodeUnstageVolume\'s error is logged and swallowed',
    file: 'src/volume/csi/csiAttacher.ts',
    edits: [
      {
        search: '      throw new Error(csiLog(`attacher.UnmountDevice failed: ${errorMessage(err)}`));\n',
        replace: '      host.logger.error(err, csiLog(\'attacher.UnmountDevice failed\'));\n',
      },
    ],
  },
  {
    id: 6,
    description: 'the staging dir is removed before NodeUnstageVolume',
    file: 'src/volume/csi/csiAttacher.ts',
    edits: [
      {
        search: '    if (record !== undefined) await record.started(host, dataDir, \'attacher.UnmountDevice\');\n',
        replace: '    await removeMountDir(host, deviceMountPath);\n    if (record !== undefined) await record.started(host, dataDir, \'attacher.UnmountDevice\');\n',
      },
    ],
  },
  {
    id: 7,
    description: 'the pod-local fallback (global vol_data.json via the mount table) is off at reconstruction',
    file: 'src/volume/csi/csiPlugin.ts',
    edits: [
      {
        search: '      if (!this.host.features.enabled(CSIGlobalMountReconstruction)) throw new CsiSpecError(original);\n',
        replace: '      if (!this.host.features.enabled(CSIGlobalMountReconstruction) || caller === \'constructVolumeSpec\') throw new CsiSpecError(original);\n',
      },
    ],
  },
  {
    id: 8,
    description: 'the global listing skips block volumes',
    file: 'src/volume/csi/globalVolumes.ts',
    edits: [
      {
        search: '  await listBlockVolumes(host, blockDir, volumes, skip);\n',
        replace: '  void listBlockVolumes;\n',
      },
    ],
  },
  {
    id: 9,
    description: 'an operation\'s backoff never expires',
    file: 'src/operationexecutor/nestedPendingOperations.ts',
    edits: [
      {
        search: '    return backoff.durationBeforeRetryMs > 0 && this.clock.nowMs() - backoff.lastErrorTimeMs <= backoff.durationBeforeRetryMs;\n',
        replace: '    return backoff.durationBeforeRetryMs > 0;\n',
      },
    ],
  },
  {
    id: 10,
    description: 'the runtime\'s loops start before reconstruction ends',
    file: 'src/agent/runtime.ts',
    edits: [
      {
        search: '    await this.vm.start();\n',
        replace: '    void this.vm.start();\n',
      },
    ],
  },
  {
    id: 11,
    description: 'a failed UnmountDevice marks the device unmounted, not uncertain',
    file: 'src/operationexecutor/operationGenerator.ts',
    edits: [
      {
        search: '          asw.markDeviceAsUncertain(av.volumeName, av.devicePath, deviceMountPath, av.seLinuxMountContext ?? \'\');\n          throw err;\n',
        replace: '          asw.markDeviceAsUnmounted(av.volumeName);\n          throw err;\n',
      },
    ],
  },
];

/** How many times `search` occurs in `text` (non-overlapping). */
export function occurrences(text: string, search: string): number {
  if (search === '') return 0;
  let n = 0;
  for (let i = text.indexOf(search); i !== -1; i = text.indexOf(search, i + search.length)) n++;
  return n;
}

/** `text` with the slip's edits applied; throws when a search text is not found exactly once. */
export function applySlip(slip: Slip, text: string): string {
  let out = text;
  for (const [i, e] of slip.edits.entries()) {
    const n = occurrences(out, e.search);
    if (n !== 1) throw new Error(`slip ${slip.id} (${slip.file}) edit ${i + 1}: search text found ${n} times, want exactly once`);
    out = out.replace(e.search, () => e.replace);
  }
  return out;
}

export function slipById(id: number): Slip {
  const s = SLIPS.find((x) => x.id === id);
  if (s === undefined) throw new Error(`no slip ${id}; slips are 1..${SLIPS.length}`);
  return s;
}
