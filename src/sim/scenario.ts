/**
 * Simulator scenarios: YAML a storage engineer can read, validated with zod. A file with an
 * error is refused with ONE line naming the file, the line and the field:
 *   `scenarios/x.yaml:12: steps[3].fault.method: Invalid enum value ...`
 *
 * Format (docs/explorer.md, "Scenario format"):
 *   name, description
 *   featureGates: { CSIGlobalMountReconstruction: true }        (the CLI's --feature-gates wins)
 *   drivers: [{ name, attachRequired, podInfoOnMount, stageUnstage, mode: strict|lenient,
 *               singleNodeMultiWriter }]        (NodeGetCapabilities reports SINGLE_NODE_MULTI_WRITER)
 *   volumes: [{ name, handle, driver, volumeMode: Filesystem|Block, inline,
 *               claim: Bound|Pending|Lost|Deleting|ClaimRefMismatch,
 *               accessModes: [ReadWriteOnce|ReadWriteOncePod|ReadWriteMany|ReadOnlyMany] }]
 *               (inline: ephemeral, no PV; claim: what kubelet's populator checks; all but Bound
 *               are refused; accessModes: the PV's, ReadWriteOnce when absent)
 *   pods: [{ uid, volumes: [name...], unused: [name...], running }]   (running: false = added later by addPod;
 *               unused: in spec.volumes, in no container's volumeMounts / volumeDevices)
 *   steps: wait: converged | advance: 30s | addPod: uid | deletePod: uid | restart | reboot |
 *          terminatePod: uid                                      (deletionTimestamp set, the pod still listed)
 *          podPhase: { pod, phase: Succeeded|Failed }             (terminal, the pod still listed)
 *          fault: <a rule of src/csi/faults.ts: method, volumeId, delay, hang, code, afterEffect,
 *                  clientTimeout, exit, times> | clearFaults |
 *                  (hang: forever: the driver never answers those calls, restarts and clearFaults
 *                  do not end the rule; the driver's volumes are exempt from `converges`)
 *          deleteFile: { pod, volume }                             (the pod-local vol_data.json)
 *          readError: { pod, volume, code: EIO|EACCES, times }    (reads of the pod-local vol_data.json fail)
 *          restartDriver: name                                    (the driver's process restarts)
 *          fsFault: { code: ENOSPC|EROFS, for: 30s }              (the root dir's filesystem is full / read-only)
 *          slowDisk: { latency: 200ms, for: 30s }                 (every file call of the engine takes that long)
 *          corruptFile: { pod, volume, as: badJson|wrongHandle|wrongDriver }  (the pod-local vol_data.json)
 *          apiDown: { for: 30s }                                  (the API server is unreachable)
 *          sigterm | sigterm: { grace: 5s }                       (kubelet stops gracefully, exits, restarts)
 *   clusterSignalsChanges: false                                  (no watch: the populator polls)
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

import { isMap, isPair, isScalar, isSeq, LineCounter, parseDocument, stringify as stringifyYaml, type Node as YamlNode } from 'yaml';
import { z } from 'zod';

import { csiFaultSchema, writtenFault, type CsiFault } from '../csi/faults.js';

/** Whether the volume's PV is ReadWriteOncePod (its only access mode, as the API server allows it). */
export function isReadWriteOncePod(v: { readonly accessModes?: readonly string[] }): boolean {
  return v.accessModes?.length === 1 && v.accessModes[0] === 'ReadWriteOncePod';
}

/** The largest scenario file read. */
export const MAX_SCENARIO_BYTES = 256 * 1024;

const name = z.string().regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, 'must be a lowercase DNS-style name');
const duration = z.string().regex(/^\d+(ms|s|m)$/, 'must be a duration such as 500ms, 30s or 2m');

/** A fault step is a rule of the one CSI fault model (src/csi/faults.ts), as faults files hold them. */
const faultSchema = csiFaultSchema;

/** The node calls that carry a volume: the ones generated workloads fault (src/sim/generate.ts). */
export const NODE_FAULT_METHODS = ['NodeStageVolume', 'NodeUnstageVolume', 'NodePublishVolume', 'NodeUnpublishVolume'] as const;

/**
 * The CSI calls a fault step of a scenario may name: the node calls the simulated drivers serve,
 * and NodeGetCapabilities (kubelet asks it inside MountDevice and SetUp, before and after it
 * writes the volume's directories; a rule for it names no volume).
 */
export const SCENARIO_FAULT_METHODS = [...NODE_FAULT_METHODS, 'NodeGetCapabilities'] as const;

/** errnos a read of a file can fail with: EIO at the read, EACCES at the open. */
export const READ_ERROR_CODES = ['EIO', 'EACCES'] as const;

const readErrorSchema = z
  .object({
    pod: name,
    volume: name,
    code: z.enum(READ_ERROR_CODES).default('EIO'),
    times: z.number().int().positive().max(1000),
  })
  .strict();

/** errnos the root dir's filesystem can refuse changes with: full, or read-only. */
export const FS_FAULT_CODES = ['ENOSPC', 'EROFS'] as const;

const fsFaultSchema = z.object({ code: z.enum(FS_FAULT_CODES), for: duration }).strict();

/** The longest a slow disk makes one file call take (a disk slower than this is a hang, not a slow disk). */
export const MAX_SLOW_DISK_LATENCY_MS = 10_000;

const slowDiskSchema = z.object({ latency: duration, for: duration }).strict();

/** How a pod-local vol_data.json is corrupted: cut in half, or naming another handle or driver. */
export const CORRUPTIONS = ['badJson', 'wrongHandle', 'wrongDriver'] as const;

const apiDownSchema = z.object({ for: duration }).strict();

/** The longest grace period a `sigterm` step may give (the run's liveness bound is 30 minutes). */
export const MAX_SIGTERM_GRACE_MS = 10 * 60_000;

/** `sigterm: { grace: 5s }`: the grace period of the stop (default the agent's, 30s). */
const sigtermSchema = z.object({ grace: duration.optional() }).strict();

const corruptFileSchema = z.object({ pod: name, volume: name, as: z.enum(CORRUPTIONS) }).strict();

/** The terminal phases a `podPhase` step sets (the pod's containers have stopped). */
export const TERMINAL_PHASES = ['Succeeded', 'Failed'] as const;

const podPhaseSchema = z.object({ pod: name, phase: z.enum(TERMINAL_PHASES) }).strict();

/**
 * A PV's claim as kubelet's populator checks it: Bound (kubelet mounts it), Pending or Lost (not
 * Bound), Deleting (a deletionTimestamp), ClaimRefMismatch (the PV's claimRef.uid names another
 * claim). Every state but Bound is refused, so the volume is never staged.
 */
export const CLAIM_STATES = ['Bound', 'Pending', 'Lost', 'Deleting', 'ClaimRefMismatch'] as const;
export type ClaimState = (typeof CLAIM_STATES)[number];

/** A PV's access modes (its spec.accessModes); kubelet maps the first to the CSI access mode it sends. */
export const ACCESS_MODES = ['ReadWriteOnce', 'ReadWriteOncePod', 'ReadWriteMany', 'ReadOnlyMany'] as const;
export type VolumeAccessMode = (typeof ACCESS_MODES)[number];

const stepSchema = z.union([
  z.object({ wait: z.literal('converged') }).strict(),
  z.object({ advance: duration }).strict(),
  z.object({ addPod: name }).strict(),
  z.object({ deletePod: name }).strict(),
  z.object({ restart: z.literal(true).or(z.null()) }).strict(),
  z.object({ reboot: z.literal(true).or(z.null()) }).strict(),
  z.object({ fault: faultSchema }).strict(),
  z.object({ clearFaults: z.literal(true).or(z.null()) }).strict(),
  z.object({ deleteFile: z.object({ pod: name, volume: name }).strict() }).strict(),
  z.object({ readError: readErrorSchema }).strict(),
  z.object({ restartDriver: z.string().min(1) }).strict(),
  z.object({ fsFault: fsFaultSchema }).strict(),
  z.object({ slowDisk: slowDiskSchema }).strict(),
  z.object({ corruptFile: corruptFileSchema }).strict(),
  z.object({ apiDown: apiDownSchema }).strict(),
  z.object({ terminatePod: name }).strict(),
  z.object({ podPhase: podPhaseSchema }).strict(),
  z.object({ sigterm: sigtermSchema.or(z.literal(true)).or(z.null()) }).strict(),
  z.enum(['restart', 'reboot', 'clearFaults', 'sigterm']),
]);

/** Steps with a value to check field by field, by their one key: an error then names the field. */
const STEP_FIELDS: Readonly<Record<string, z.ZodTypeAny>> = {
  fault: faultSchema,
  readError: readErrorSchema,
  fsFault: fsFaultSchema,
  slowDisk: slowDiskSchema,
  corruptFile: corruptFileSchema,
  apiDown: apiDownSchema,
  podPhase: podPhaseSchema,
  sigterm: sigtermSchema,
};
const STEP_KEYS = ['wait', 'advance', 'addPod', 'deletePod', 'terminatePod', 'podPhase', 'restart', 'reboot', 'sigterm', 'fault', 'clearFaults', 'deleteFile', 'readError', 'restartDriver', 'fsFault', 'slowDisk', 'corruptFile', 'apiDown'];

/**
 * A step the union refused: when it is an object whose one key names a step with fields, the
 * first problem of that step's own schema, with its full path (`steps[2].readError.code`).
 */
function stepIssue(value: unknown, at: readonly (string | number)[]): z.ZodIssue | undefined {
  let step: unknown = value;
  for (const k of at) step = typeof step === 'object' && step !== null ? (step as Record<string | number, unknown>)[k] : undefined;
  if (typeof step !== 'object' || step === null || Array.isArray(step)) return undefined;
  const keys = Object.keys(step);
  const key = keys[0];
  if (keys.length !== 1 || key === undefined) return undefined;
  const schema = STEP_FIELDS[key];
  if (schema === undefined) return undefined;
  const r = schema.safeParse((step as Record<string, unknown>)[key]);
  const issue = r.success ? undefined : r.error.issues[0];
  return issue === undefined ? undefined : { ...issue, path: [...at, key, ...issue.path] };
}

export const scenarioSchema = z
  .object({
    name,
    description: z.string().optional(),
    featureGates: z.record(z.boolean()).optional(),
    // false: the cluster view signals no change (no watch), so the DSW populator polls.
    clusterSignalsChanges: z.boolean().default(true),
    drivers: z
      .array(
        z
          .object({
            name: z.string().min(1),
            attachRequired: z.boolean().default(true),
            // As csi-driver-host-path's CSIDriver: the pod keys (and the ephemeral key an inline
            // volume needs) reach NodePublishVolume.
            podInfoOnMount: z.boolean().default(true),
            stageUnstage: z.boolean().default(true),
            mode: z.enum(['strict', 'lenient']).default('strict'),
            // After a reboot the node plugin registers with kubelet this long after kubelet started.
            registersAfter: duration.optional(),
            // NodeGetCapabilities reports SINGLE_NODE_MULTI_WRITER (as csi-driver-host-path): kubelet
            // then sends SINGLE_NODE_MULTI_WRITER / SINGLE_NODE_SINGLE_WRITER for RWO / RWOP.
            singleNodeMultiWriter: z.boolean().default(false),
          })
          .strict(),
      )
      .min(1),
    volumes: z
      .array(
        z
          .object({
            name,
            handle: z.string().min(1).optional(),
            driver: z.string().min(1).optional(),
            volumeMode: z.enum(['Filesystem', 'Block']).default('Filesystem'),
            inline: z.boolean().default(false),
            claim: z.enum(CLAIM_STATES).default('Bound'),
            accessModes: z.array(z.enum(ACCESS_MODES)).min(1, 'must name at least one access mode').optional(),
          })
          .strict(),
      )
      .default([]),
    pods: z
      .array(z.object({ uid: name, volumes: z.array(name).default([]), unused: z.array(name).default([]), running: z.boolean().default(true) }).strict())
      .default([]),
    steps: z.array(stepSchema).default([]),
  })
  .strict();

export type ScenarioInput = z.input<typeof scenarioSchema>;
type Parsed = z.output<typeof scenarioSchema>;
export type ScenarioFault = CsiFault;

export type ScenarioStep =
  | { readonly kind: 'wait' }
  | { readonly kind: 'advance'; readonly ms: number }
  | { readonly kind: 'addPod'; readonly uid: string }
  | { readonly kind: 'deletePod'; readonly uid: string }
  | { readonly kind: 'terminatePod'; readonly uid: string }
  | { readonly kind: 'podPhase'; readonly uid: string; readonly phase: (typeof TERMINAL_PHASES)[number] }
  | { readonly kind: 'restart' }
  | { readonly kind: 'reboot' }
  /** A SIGTERM: the runtime stops with `graceMs` (default the agent's), then kubelet exits and restarts. */
  | { readonly kind: 'sigterm'; readonly graceMs?: number }
  | { readonly kind: 'fault'; readonly fault: ScenarioFault }
  | { readonly kind: 'clearFaults' }
  | { readonly kind: 'deleteFile'; readonly pod: string; readonly volume: string }
  | { readonly kind: 'readError'; readonly pod: string; readonly volume: string; readonly code: (typeof READ_ERROR_CODES)[number]; readonly times: number }
  | { readonly kind: 'restartDriver'; readonly driver: string }
  | { readonly kind: 'fsFault'; readonly code: (typeof FS_FAULT_CODES)[number]; readonly ms: number }
  | { readonly kind: 'slowDisk'; readonly latencyMs: number; readonly ms: number }
  | { readonly kind: 'apiDown'; readonly ms: number }
  | { readonly kind: 'corruptFile'; readonly pod: string; readonly volume: string; readonly as: (typeof CORRUPTIONS)[number] };

export interface ScenarioDriver {
  readonly name: string;
  readonly attachRequired: boolean;
  readonly podInfoOnMount: boolean;
  readonly stageUnstage: boolean;
  readonly mode: 'strict' | 'lenient';
  /** After a node reboot, the driver registers with kubelet this long after kubelet started (0: at once). */
  readonly registersAfterMs?: number;
  /** NodeGetCapabilities reports SINGLE_NODE_MULTI_WRITER; absent is false. */
  readonly singleNodeMultiWriter?: boolean;
}

export interface ScenarioVolume {
  readonly name: string;
  readonly handle: string;
  readonly driver: string;
  readonly volumeMode: 'Filesystem' | 'Block';
  readonly inline: boolean;
  /** The PV's claim as kubelet checks it; absent is Bound. */
  readonly claim?: ClaimState;
  /** The PV's access modes; absent is a PV that names none (kubelet takes ReadWriteOnce). */
  readonly accessModes?: readonly VolumeAccessMode[];
}

export interface ScenarioPod {
  readonly uid: string;
  readonly volumes: readonly string[];
  /** Volumes in the pod's spec.volumes that no container mounts or uses as a device (kubelet skips them); absent is none. */
  readonly unused?: readonly string[];
  readonly running: boolean;
}

export interface Scenario {
  readonly name: string;
  readonly description: string;
  /** Where it came from (file path or `builtin:<name>`). */
  readonly source: string;
  readonly featureGates: Readonly<Record<string, boolean>>;
  /** false: the cluster view signals no change, and the DSW populator polls (default true). */
  readonly clusterSignalsChanges?: boolean;
  readonly drivers: readonly ScenarioDriver[];
  readonly volumes: readonly ScenarioVolume[];
  readonly pods: readonly ScenarioPod[];
  readonly steps: readonly ScenarioStep[];
}

/** A scenario that cannot be used: `message` is one line naming file, line and field. */
export class ScenarioError extends Error {
  override readonly name = 'ScenarioError';
}

export function parseDurationMs(s: string): number {
  const m = /^(\d+)(ms|s|m)$/.exec(s);
  if (m === null) throw new ScenarioError(`bad duration ${JSON.stringify(s)}`);
  const n = Number(m[1]);
  return m[2] === 'ms' ? n : m[2] === 's' ? n * 1000 : n * 60_000;
}

function fieldPath(p: readonly (string | number)[]): string {
  let out = '';
  for (const k of p) out += typeof k === 'number' ? `[${k}]` : out === '' ? k : `.${k}`;
  return out === '' ? '(document)' : out;
}

/** The YAML node at a zod issue path (the deepest that exists). */
function nodeAt(root: YamlNode | null, p: readonly (string | number)[]): YamlNode | null {
  let node: YamlNode | null = root;
  for (const k of p) {
    if (node === null) return null;
    if (isMap(node)) {
      const pair = node.items.find((it) => isPair(it) && isScalar(it.key) && it.key.value === k);
      if (pair === undefined) return node;
      node = (pair.value as YamlNode | null) ?? (pair.key as YamlNode);
    } else if (isSeq(node) && typeof k === 'number') {
      const item = node.items[k] as YamlNode | undefined;
      if (item === undefined) return node;
      node = item;
    } else return node;
  }
  return node;
}

/** Parses and validates a scenario's text; `file` names it in errors. */
export function parseScenario(text: string, file: string): Scenario {
  if (text.length > MAX_SCENARIO_BYTES) throw new ScenarioError(`${file}: larger than ${MAX_SCENARIO_BYTES} bytes`);
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true, logLevel: 'error' });
  const yamlError = doc.errors[0];
  if (yamlError !== undefined) {
    const line = lineCounter.linePos(yamlError.pos[0]).line;
    throw new ScenarioError(`${file}:${line}: (yaml): ${yamlError.message.split('\n')[0] ?? ''}`);
  }
  let value: unknown;
  try {
    // Throws on an alias to no anchor and on an alias bomb (more than 100 expansions).
    value = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    throw new ScenarioError(`${file}:1: (yaml): ${err instanceof Error ? err.message : String(err)}`);
  }
  const result = scenarioSchema.safeParse(value);
  if (!result.success) {
    const first = result.error.issues[0];
    const issue = first?.code === 'invalid_union' ? (stepIssue(value, first.path) ?? first) : first;
    const p = issue?.path ?? [];
    const node = nodeAt(doc.contents, p);
    const line = node?.range === undefined || node.range === null ? 1 : lineCounter.linePos(node.range[0]).line;
    const msg = issue?.code === 'invalid_union' ? `not a known step (${STEP_KEYS.join(', ')}) or a bad value in it` : (issue?.message ?? 'invalid');
    throw new ScenarioError(`${file}:${line}: ${fieldPath(p)}: ${msg}`);
  }
  return normalize(result.data, file, (p) => {
    const node = nodeAt(doc.contents, p);
    return node?.range === undefined || node.range === null ? 1 : lineCounter.linePos(node.range[0]).line;
  });
}

function normalize(s: Parsed, file: string, lineOf: (p: (string | number)[]) => number): Scenario {
  const err = (p: (string | number)[], msg: string): ScenarioError => new ScenarioError(`${file}:${lineOf(p)}: ${fieldPath(p)}: ${msg}`);
  const driverNames = new Set(s.drivers.map((d) => d.name));
  const firstDriver = s.drivers[0]?.name ?? '';
  const volumes: ScenarioVolume[] = s.volumes.map((v, i) => {
    const driver = v.driver ?? firstDriver;
    if (!driverNames.has(driver)) throw err(['volumes', i, 'driver'], `unknown driver ${JSON.stringify(driver)}`);
    if (v.inline && v.volumeMode === 'Block') throw err(['volumes', i, 'volumeMode'], 'an inline ephemeral volume is always Filesystem');
    if (v.inline && v.claim !== 'Bound') throw err(['volumes', i, 'claim'], 'an inline ephemeral volume has no claim');
    if (v.inline && v.accessModes !== undefined) throw err(['volumes', i, 'accessModes'], 'an inline ephemeral volume has no PV and no access modes');
    const dup = v.accessModes?.findIndex((m, j) => v.accessModes?.indexOf(m) !== j) ?? -1;
    if (dup >= 0) throw err(['volumes', i, 'accessModes', dup], `${JSON.stringify(v.accessModes?.[dup])} is named twice`);
    // As the API server's PV validation: ReadWriteOncePod is a PV's only access mode.
    if (v.accessModes !== undefined && v.accessModes.length > 1 && v.accessModes.includes('ReadWriteOncePod')) {
      throw err(['volumes', i, 'accessModes'], 'ReadWriteOncePod cannot be combined with other access modes');
    }
    return {
      name: v.name,
      handle: v.handle ?? v.name,
      driver,
      volumeMode: v.volumeMode,
      inline: v.inline,
      ...(v.claim === 'Bound' ? {} : { claim: v.claim }),
      ...(v.accessModes === undefined ? {} : { accessModes: v.accessModes }),
    };
  });
  const volumeNames = new Set(volumes.map((v) => v.name));
  const podUids = new Set<string>();
  s.pods.forEach((p, i) => {
    if (podUids.has(p.uid)) throw err(['pods', i, 'uid'], `duplicate pod ${p.uid}`);
    podUids.add(p.uid);
    p.volumes.forEach((v, j) => {
      if (!volumeNames.has(v)) throw err(['pods', i, 'volumes', j], `unknown volume ${JSON.stringify(v)}`);
    });
    p.unused.forEach((v, j) => {
      if (!volumeNames.has(v)) throw err(['pods', i, 'unused', j], `unknown volume ${JSON.stringify(v)}`);
      if (p.volumes.includes(v)) throw err(['pods', i, 'unused', j], `${JSON.stringify(v)} is in volumes too: a volume is used or unused`);
    });
  });
  const steps: ScenarioStep[] = s.steps.map((raw, i): ScenarioStep => {
    if (typeof raw === 'string') return { kind: raw };
    if ('sigterm' in raw) {
      const grace = raw.sigterm === null || raw.sigterm === true ? undefined : raw.sigterm.grace;
      if (grace === undefined) return { kind: 'sigterm' };
      const graceMs = parseDurationMs(grace);
      if (graceMs > MAX_SIGTERM_GRACE_MS) throw err(['steps', i, 'sigterm', 'grace'], `must be at most ${formatScenarioDuration(MAX_SIGTERM_GRACE_MS)}`);
      return { kind: 'sigterm', graceMs };
    }
    if ('wait' in raw) return { kind: 'wait' };
    if ('advance' in raw) return { kind: 'advance', ms: parseDurationMs(raw.advance) };
    if ('addPod' in raw || 'deletePod' in raw) {
      const uid = 'addPod' in raw ? raw.addPod : raw.deletePod;
      if (!podUids.has(uid)) throw err(['steps', i, 'addPod' in raw ? 'addPod' : 'deletePod'], `unknown pod ${JSON.stringify(uid)}`);
      return 'addPod' in raw ? { kind: 'addPod', uid } : { kind: 'deletePod', uid };
    }
    if ('terminatePod' in raw) {
      if (!podUids.has(raw.terminatePod)) throw err(['steps', i, 'terminatePod'], `unknown pod ${JSON.stringify(raw.terminatePod)}`);
      return { kind: 'terminatePod', uid: raw.terminatePod };
    }
    if ('podPhase' in raw) {
      if (!podUids.has(raw.podPhase.pod)) throw err(['steps', i, 'podPhase', 'pod'], `unknown pod ${JSON.stringify(raw.podPhase.pod)}`);
      return { kind: 'podPhase', uid: raw.podPhase.pod, phase: raw.podPhase.phase };
    }
    if ('restart' in raw) return { kind: 'restart' };
    if ('reboot' in raw) return { kind: 'reboot' };
    if ('clearFaults' in raw) return { kind: 'clearFaults' };
    if ('fault' in raw) {
      const f = raw.fault;
      if (!(SCENARIO_FAULT_METHODS as readonly string[]).includes(f.method)) {
        throw err(['steps', i, 'fault', 'method'], `the simulated drivers serve ${SCENARIO_FAULT_METHODS.join(', ')}`);
      }
      if (f.volumeId !== undefined && !volumes.some((v) => !v.inline && v.handle === f.volumeId)) {
        throw err(['steps', i, 'fault', 'volumeId'], `no volume has the handle ${JSON.stringify(f.volumeId)}`);
      }
      return { kind: 'fault', fault: f };
    }
    if ('restartDriver' in raw) {
      if (!driverNames.has(raw.restartDriver)) throw err(['steps', i, 'restartDriver'], `unknown driver ${JSON.stringify(raw.restartDriver)}`);
      return { kind: 'restartDriver', driver: raw.restartDriver };
    }
    if ('fsFault' in raw) return { kind: 'fsFault', code: raw.fsFault.code, ms: parseDurationMs(raw.fsFault.for) };
    if ('slowDisk' in raw) {
      const latencyMs = parseDurationMs(raw.slowDisk.latency);
      if (latencyMs < 1 || latencyMs > MAX_SLOW_DISK_LATENCY_MS) throw err(['steps', i, 'slowDisk', 'latency'], `must be from 1ms to ${formatScenarioDuration(MAX_SLOW_DISK_LATENCY_MS)}`);
      return { kind: 'slowDisk', latencyMs, ms: parseDurationMs(raw.slowDisk.for) };
    }
    if ('apiDown' in raw) return { kind: 'apiDown', ms: parseDurationMs(raw.apiDown.for) };
    if ('corruptFile' in raw) {
      const c = raw.corruptFile;
      if (!podUids.has(c.pod)) throw err(['steps', i, 'corruptFile', 'pod'], `unknown pod ${JSON.stringify(c.pod)}`);
      const pod = s.pods.find((p) => p.uid === c.pod);
      if (pod !== undefined && !pod.volumes.includes(c.volume)) throw err(['steps', i, 'corruptFile', 'volume'], `pod ${c.pod} has no volume ${JSON.stringify(c.volume)}`);
      if (volumes.find((v) => v.name === c.volume)?.volumeMode === 'Block') throw err(['steps', i, 'corruptFile', 'volume'], 'a Block volume has no pod-local vol_data.json');
      return { kind: 'corruptFile', pod: c.pod, volume: c.volume, as: c.as };
    }
    if ('readError' in raw) {
      const r = raw.readError;
      if (!podUids.has(r.pod)) throw err(['steps', i, 'readError', 'pod'], `unknown pod ${JSON.stringify(r.pod)}`);
      if (!volumeNames.has(r.volume)) throw err(['steps', i, 'readError', 'volume'], `unknown volume ${JSON.stringify(r.volume)}`);
      const pod = s.pods.find((p) => p.uid === r.pod);
      if (pod !== undefined && !pod.volumes.includes(r.volume)) throw err(['steps', i, 'readError', 'volume'], `pod ${r.pod} has no volume ${JSON.stringify(r.volume)}`);
      if (volumes.find((v) => v.name === r.volume)?.volumeMode === 'Block') throw err(['steps', i, 'readError', 'volume'], 'a Block volume has no pod-local vol_data.json');
      return { kind: 'readError', pod: r.pod, volume: r.volume, code: r.code, times: r.times };
    }
    const d = raw.deleteFile;
    if (!podUids.has(d.pod)) throw err(['steps', i, 'deleteFile', 'pod'], `unknown pod ${JSON.stringify(d.pod)}`);
    if (!volumeNames.has(d.volume)) throw err(['steps', i, 'deleteFile', 'volume'], `unknown volume ${JSON.stringify(d.volume)}`);
    return { kind: 'deleteFile', pod: d.pod, volume: d.volume };
  });
  return {
    name: s.name,
    description: s.description ?? '',
    source: file,
    featureGates: s.featureGates ?? {},
    ...(s.clusterSignalsChanges ? {} : { clusterSignalsChanges: false }),
    drivers: s.drivers.map(({ registersAfter, singleNodeMultiWriter, ...d }) => ({
      ...d,
      ...(registersAfter === undefined ? {} : { registersAfterMs: parseDurationMs(registersAfter) }),
      ...(singleNodeMultiWriter ? { singleNodeMultiWriter: true } : {}),
    })),
    volumes,
    pods: s.pods.map(({ unused, ...p }) => (unused.length === 0 ? p : { ...p, unused })),
    steps,
  };
}

/**
 * Validates a scenario built in memory (the shrinker's candidates) the way its file would be: the
 * schema, then the references between drivers, volumes, pods and steps. Throws a ScenarioError.
 */
export function checkScenario(s: Scenario): Scenario {
  const result = scenarioSchema.safeParse(scenarioDocument(s));
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new ScenarioError(`${s.source}: ${fieldPath(issue?.path ?? [])}: ${issue?.message ?? 'invalid'}`);
  }
  return normalize(result.data, s.source, () => 1);
}

/** Reads a scenario file (bounded). */
export function loadScenarioFile(file: string): Scenario {
  let text: string;
  try {
    const st = statSync(file);
    if (!st.isFile()) throw new ScenarioError(`${file}: not a regular file`);
    if (st.size > MAX_SCENARIO_BYTES) throw new ScenarioError(`${file}: larger than ${MAX_SCENARIO_BYTES} bytes`);
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if (err instanceof ScenarioError) throw err;
    throw new ScenarioError(`${file}: cannot read: ${err instanceof Error ? err.message : String(err)}`);
  }
  return parseScenario(text, file);
}

/** The `scenarios/` directory shipped with nodevol (next to package.json). */
export function builtinScenarioDir(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = path.join(dir, 'scenarios');
    if (existsSync(path.join(dir, 'package.json')) && existsSync(candidate)) return candidate;
    const parent = path.dirname(dir);
    if (parent === dir) throw new ScenarioError('the built-in scenarios directory was not found');
    dir = parent;
  }
}

/** Names of the built-in scenarios, sorted. */
export function builtinScenarioNames(): string[] {
  return readdirSync(builtinScenarioDir())
    .filter((f) => f.endsWith('.yaml'))
    .map((f) => f.slice(0, -'.yaml'.length))
    .sort();
}

export function loadBuiltinScenario(scenarioName: string): Scenario {
  const names = builtinScenarioNames();
  if (!names.includes(scenarioName)) throw new ScenarioError(`unknown scenario ${JSON.stringify(scenarioName)}; built in: ${names.join(', ')}`);
  return loadScenarioFile(path.join(builtinScenarioDir(), `${scenarioName}.yaml`));
}

/** A duration as the scenario format writes it (`90s`, `2m`, `500ms`). */
export function formatScenarioDuration(ms: number): string {
  if (ms > 0 && ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms > 0 && ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}

/** One step as the scenario format writes it. */
function writtenStep(step: ScenarioStep): unknown {
  switch (step.kind) {
    case 'wait':
      return { wait: 'converged' };
    case 'advance':
      return { advance: formatScenarioDuration(step.ms) };
    case 'addPod':
      return { addPod: step.uid };
    case 'deletePod':
      return { deletePod: step.uid };
    case 'terminatePod':
      return { terminatePod: step.uid };
    case 'podPhase':
      return { podPhase: { pod: step.uid, phase: step.phase } };
    case 'restart':
    case 'reboot':
    case 'clearFaults':
      return step.kind;
    case 'sigterm':
      return step.graceMs === undefined ? 'sigterm' : { sigterm: { grace: formatScenarioDuration(step.graceMs) } };
    case 'fault':
      return { fault: writtenFault(step.fault) };
    case 'deleteFile':
      return { deleteFile: { pod: step.pod, volume: step.volume } };
    case 'readError':
      return { readError: { pod: step.pod, volume: step.volume, code: step.code, times: step.times } };
    case 'restartDriver':
      return { restartDriver: step.driver };
    case 'fsFault':
      return { fsFault: { code: step.code, for: formatScenarioDuration(step.ms) } };
    case 'apiDown':
      return { apiDown: { for: formatScenarioDuration(step.ms) } };
    case 'corruptFile':
      return { corruptFile: { pod: step.pod, volume: step.volume, as: step.as } };
    case 'slowDisk':
      return { slowDisk: { latency: formatScenarioDuration(step.latencyMs), for: formatScenarioDuration(step.ms) } };
  }
}

/** A scenario as the document its file holds: parseScenario(YAML of it) gives it back. */
export function scenarioDocument(s: Scenario): Record<string, unknown> {
  return {
    name: s.name,
    ...(s.description === '' ? {} : { description: s.description }),
    ...(Object.keys(s.featureGates).length === 0 ? {} : { featureGates: { ...s.featureGates } }),
    ...(s.clusterSignalsChanges === false ? { clusterSignalsChanges: false } : {}),
    drivers: s.drivers.map((d) => ({
      name: d.name,
      attachRequired: d.attachRequired,
      podInfoOnMount: d.podInfoOnMount,
      stageUnstage: d.stageUnstage,
      mode: d.mode,
      ...(d.registersAfterMs === undefined || d.registersAfterMs === 0 ? {} : { registersAfter: formatScenarioDuration(d.registersAfterMs) }),
      ...(d.singleNodeMultiWriter === true ? { singleNodeMultiWriter: true } : {}),
    })),
    volumes: s.volumes.map((v) => ({
      name: v.name,
      handle: v.handle,
      driver: v.driver,
      ...(v.volumeMode === 'Filesystem' ? {} : { volumeMode: v.volumeMode }),
      ...(v.inline ? { inline: true } : {}),
      ...(v.claim === undefined || v.claim === 'Bound' ? {} : { claim: v.claim }),
      ...(v.accessModes === undefined ? {} : { accessModes: [...v.accessModes] }),
    })),
    pods: s.pods.map((p) => ({ uid: p.uid, volumes: [...p.volumes], ...(p.unused === undefined || p.unused.length === 0 ? {} : { unused: [...p.unused] }), ...(p.running ? {} : { running: false }) })),
    steps: s.steps.map(writtenStep),
  };
}

/** A scenario's file text; `comment` (lines) goes on top. */
export function scenarioYaml(s: Scenario, comment: readonly string[] = []): string {
  const head = comment.map((l) => `# ${l}`.trimEnd()).join('\n');
  const body = stringifyYaml(scenarioDocument(s), { lineWidth: 0, flowCollectionPadding: true, collectionStyle: 'block' });
  return head === '' ? body : `${head}\n${body}`;
}
