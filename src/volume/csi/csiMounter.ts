/**
 * CSI SetUp / TearDown (csi_mounter.go SetUpAt / TearDownAt): the pod-local
 * vol_data.json and NodePublishVolume / NodeUnpublishVolume at <pod volume dir>/mount.
 */
import * as path from 'node:path/posix';
import { getAttachmentName } from '../../layout/names.js';
import type { MounterArgs, PodRef, VolumeMounter, VolumeUnmounter } from '../plugins.js';
import type { Spec, VolumeLifecycleMode } from '../spec.js';
import { TransientOperationFailure } from '../util/errors.js';
import type { VolumeHost } from '../volumeHost.js';
import {
  assertConfined,
  clientFor,
  csiLog,
  getCredentialsFromSecret,
  getPublishContext,
  mkdirAll,
  mountCapability,
  podInfoAttrs,
  podInfoEnabled,
  removeMountDir,
  removeMountDirLogged,
  SERVICE_ACCOUNT_TOKENS_KEY,
  serviceAccountTokenAttrs,
  supportsStageUnstage,
  unsupportedVolumeLifecycleMode,
  volumeMountGroupFor,
} from './csiUtil.js';
import { upstreamCsiHooks, type CsiHooks } from './csiHooks.js';
import { stageOrPublish } from './stageOrPublish.js';
import { saveVolumeData, volDataKey } from './volumeData.js';
import { errorMessage } from '../../ports/fs.js';
import { UncertainProgressError } from '../util/errors.js';

export interface CsiMountTarget {
  readonly driverName: string;
  readonly volumeHandle: string;
  /** spec.Name(): the PV name, or the pod volume name for an inline volume. */
  readonly specName: string;
  readonly podUID: string;
  readonly lifecycle: VolumeLifecycleMode;
}

/** csiMountMgr for SetUp: built by NewMounter from a spec and a pod. */
export class CsiMounter implements VolumeMounter {
  constructor(
    private readonly host: VolumeHost,
    private readonly target: CsiMountTarget,
    private readonly spec: Spec,
    private readonly pod: PodRef,
    private readonly hooks: CsiHooks = upstreamCsiHooks,
  ) {}

  getPath(): string {
    return this.host.layout.csiPodMountPath(this.target.podUID, this.target.specName);
  }

  /**
   * SetUpAt, in kubelet's order: the CSIDriver's volumeLifecycleModes, the STAGE_UNSTAGE_VOLUME check (a PV only), the target's parent,
   * pod information (only when the CSIDriver has podInfoOnMount), the VOLUME_MOUNT_GROUP check
   * (fsGroup goes to the driver only when it has it), vol_data.json, then NodePublishVolume (which
   * first asks for SINGLE_NODE_MULTI_WRITER to map the access mode).
   */
  async setUp(args: MounterArgs): Promise<void> {
    const { host, target, spec } = this;
    const dir = this.getPath();
    const client = clientFor(host, target.driverName);
    const csi = spec.kind === 'persistent' ? spec.persistentVolume.csi : spec.volume.csi;
    // The CSIDriver must list the volume's lifecycle mode (a transient failure: retried with backoff).
    let unsupported: string | undefined;
    try {
      unsupported = await unsupportedVolumeLifecycleMode(host, target.driverName, target.lifecycle);
    } catch (err) {
      unsupported = errorMessage(err);
    }
    if (unsupported !== undefined) throw new TransientOperationFailure(csiLog(`mounter.SetupAt failed to check volume lifecycle mode: ${unsupported}`));
    let deviceMountPath = '';
    if (target.lifecycle === 'Persistent') {
      let stageUnstage: boolean;
      try {
        stageUnstage = await supportsStageUnstage(client);
      } catch (err) {
        // Upstream returns a plain (final) error here, whatever the gRPC code.
        throw new Error(csiLog(`mounter.SetUpAt failed to check for STAGE_UNSTAGE_VOLUME capability: ${errorMessage(err)}`));
      }
      if (stageUnstage) deviceMountPath = host.layout.csiDeviceMountPath(target.driverName, target.volumeHandle);
    }
    // A PV's publish context: the VolumeAttachment's attachmentMetadata (none without attach).
    let publishContext: Record<string, string> = {};
    if (target.lifecycle === 'Persistent') {
      try {
        publishContext = await getPublishContext(host, target.volumeHandle, target.driverName);
      } catch (err) {
        throw new TransientOperationFailure(csiLog(`mounter.SetUpAt failed to fetch publishContext: ${errorMessage(err)}`));
      }
    }
    const volDir = path.dirname(dir);
    await mkdirAll(host, volDir);

    // The publish secrets: a PV's nodePublishSecretRef, or an inline volume's in the pod's namespace.
    let secrets: Record<string, string> = {};
    const secretRef =
      spec.kind === 'persistent'
        ? spec.persistentVolume.csi?.nodePublishSecretRef
        : spec.volume.csi?.nodePublishSecretRef !== undefined
          ? { name: spec.volume.csi.nodePublishSecretRef.name, namespace: this.pod.namespace }
          : undefined;
    if (secretRef !== undefined) {
      try {
        secrets = await getCredentialsFromSecret(host, secretRef);
      } catch (err) {
        throw new TransientOperationFailure(`fetching NodePublishSecretRef ${secretRef.namespace}/${secretRef.name} failed: ${errorMessage(err)}`);
      }
    }

    let volumeContext: Record<string, string> = { ...(csi?.volumeAttributes ?? {}) };
    let podInfo: boolean;
    try {
      podInfo = await podInfoEnabled(host, target.driverName);
    } catch (err) {
      throw new TransientOperationFailure(csiLog(`mounter.SetUpAt failed to assemble volume attributes: ${errorMessage(err)}`));
    }
    if (podInfo) volumeContext = { ...volumeContext, ...podInfoAttrs(this.pod, target.lifecycle) };
    // The pod's service account tokens, for a CSIDriver with tokenRequests (whatever podInfoOnMount says).
    let tokens: Awaited<ReturnType<typeof serviceAccountTokenAttrs>>;
    try {
      tokens = await serviceAccountTokenAttrs(host, target.driverName, this.pod);
    } catch (err) {
      // kubelet's text, spelling included.
      throw new TransientOperationFailure(csiLog(`mounter.SetUpAt failed to get service accoount token attributes: ${errorMessage(err)}`));
    }
    if (tokens !== undefined) {
      if (tokens.inSecrets) secrets = { ...secrets, [SERVICE_ACCOUNT_TOKENS_KEY]: tokens.value };
      else volumeContext = { ...volumeContext, [SERVICE_ACCOUNT_TOKENS_KEY]: tokens.value };
    }

    const volumeMountGroup = await volumeMountGroupFor(client, args.fsGroup, 'mounter.SetUpAt');

    const data: Record<string, string> = {
      [volDataKey.specVolID]: target.specName,
      [volDataKey.volHandle]: target.volumeHandle,
      [volDataKey.driverName]: target.driverName,
      [volDataKey.nodeName]: host.nodeName,
      [volDataKey.volumeLifecycleMode]: target.lifecycle,
      [volDataKey.attachmentID]: getAttachmentName(target.volumeHandle, target.driverName, host.nodeName),
    };
    if (args.seLinuxLabel !== undefined && args.seLinuxLabel !== '') data[volDataKey.seLinuxMountContext] = args.seLinuxLabel;
    try {
      await saveVolumeData(host.fs, volDir, data);
    } catch (err) {
      const msg = csiLog(`mounter.SetUpAt failed to save volume info data: ${errorMessage(err)}`);
      const decision = this.hooks.onFinishedError?.({ operation: 'SetUp', step: 'saveVolumeData', path: dir, args }) ?? 'cleanup';
      if (decision === 'cleanup' && !(await removeMountDirLogged(host, dir, 'mounter.SetUpAt failed to remove mount dir after error', { dir })) && this.hooks.afterFailedCleanup !== undefined) {
        if ((await this.hooks.afterFailedCleanup({ operation: 'SetUp', step: 'saveVolumeData', path: dir, args, dataDir: volDir })) === 'uncertain') throw new UncertainProgressError(msg);
      }
      if (decision === 'uncertain') throw new UncertainProgressError(msg);
      throw new TransientOperationFailure(msg);
    }

    // A final error: nothing is published there, clean up what SetUp created (csi_mounter.go
    // SetUpAt's deferred removeMountDir, whose own failure is only logged).
    await stageOrPublish(host, this.hooks, client, {
      caller: 'mounter.SetupAt',
      spec,
      path: dir,
      workShown: { caller: 'mounter.SetUpAt' },
      removal: {
        operation: 'SetUp',
        step: 'NodePublishVolume',
        args,
        dataDir: volDir,
        remove: () => removeMountDirLogged(host, dir, 'mounter.SetupAt failed to remove mount dir after a NodePublish() error', { dir }),
      },
      accessModeFailure: 'handled',
      send: (accessMode) =>
        client.nodePublishVolume({
          volumeId: target.volumeHandle,
          publishContext,
          stagingTargetPath: deviceMountPath,
          targetPath: dir,
          volumeCapability: mountCapability(spec, csi?.fsType ?? '', volumeMountGroup, accessMode),
          // NewMounter: a PV's spec.ReadOnly (the pod's claim) only; an inline volume's csi.readOnly.
          readonly: spec.kind === 'persistent' ? spec.readOnly : (csi?.readOnly ?? false),
          secrets,
          volumeContext,
        }),
    });
    host.logger.v(4).info(csiLog('mounter.SetUp successfully requested NodePublish'), { dir, pod: `${this.pod.namespace}/${this.pod.name}` });
  }
}

/** csiMountMgr for TearDown: built by NewUnmounter from what the pod-local file names. */
export class CsiUnmounter implements VolumeUnmounter {
  constructor(
    private readonly host: VolumeHost,
    private readonly target: Omit<CsiMountTarget, 'lifecycle'>,
  ) {}

  getPath(): string {
    return this.host.layout.csiPodMountPath(this.target.podUID, this.target.specName);
  }

  async tearDown(): Promise<void> {
    const dir = this.getPath();
    const client = clientFor(this.host, this.target.driverName);
    await assertConfined(this.host, dir, 'NodeUnpublishVolume');
    try {
      await client.nodeUnpublishVolume({ volumeId: this.target.volumeHandle, targetPath: dir });
    } catch (err) {
      throw new Error(csiLog(`Unmounter.TearDownAt failed: ${errorMessage(err)}`));
    }
    try {
      await removeMountDir(this.host, dir);
    } catch (err) {
      throw new Error(csiLog(`Unmounter.TearDownAt failed to clean mount dir [${dir}]: ${errorMessage(err)}`));
    }
    this.host.logger.v(4).info(csiLog('Unmounter.TearDownAt successfully unmounted dir'), { dir });
  }
}
