/**
 * What a run did with node.status.volumesInUse, read from its trace events: for every status
 * line, whether a volume left volumesInUse while it was still on the node (the bug KEP-6058
 * fixes: the attach/detach controller may then detach it and attach it to another node) or only
 * after NodeUnstageVolume succeeded (safe); and one verdict per run for the report's headline.
 *
 * "On the node" is read from the CSI calls the trace holds: a volume is staged from its
 * NodeStageVolume (answered OK, or not answered: it may have been staged) until a
 * NodeUnstageVolume answered OK, and published while a NodePublishVolume target is not
 * unpublished. A reboot takes neither away: the driver keeps the volume staged and attached. A
 * volume already in volumesInUse when the trace begins (an agent started on a busy node) may be
 * staged: nothing in the trace says it is not. CSI calls name the volume handle; node.status
 * names the unique volume name, `kubernetes.io/csi/<driver>^<handle>`, matched by its handle.
 */
import type { StatusEvent, TraceEvent } from '../trace/events.js';

/**
 * - `in-use`: every volume still on the node, and every attached one, is in volumesInUse.
 * - `not-yet`: an attached volume is not in volumesInUse, but nothing of it is on the node (it
 *   was not staged yet, or was unstaged after an unsafe drop): the controller may detach it.
 * - `unsafe`: a volume left volumesInUse while still on the node and attached (or not known to
 *   be detached).
 * - `safe`: a volume left volumesInUse after its NodeUnstageVolume succeeded.
 */
export type InUseState = 'in-use' | 'not-yet' | 'unsafe' | 'safe';

export interface StatusAssessment {
  readonly state: InUseState;
  /** The volumes (unique names) that make the state: dropped, or not yet in use. */
  readonly volumes: readonly string[];
  /** A few words for the lane ('' when all is in use): "✗ vol-1 dropped while staged". */
  readonly label: string;
  /** One sentence for the tooltip. */
  readonly note: string;
}

export interface InUseVerdict {
  /** `unsafe` if any status line is; else `safe` if a volume left safely; else `clean`. */
  readonly kind: 'unsafe' | 'safe' | 'clean';
  /** The report's headline for the run. */
  readonly headline: string;
  /** The sentence that explains it: which step, which volume, what the controller may do. */
  readonly explanation: string;
  /** When the first unsafe (or safe) drop happened; undefined for `clean`. */
  readonly t: number | undefined;
}

export interface InUseAnalysis {
  readonly statuses: ReadonlyMap<StatusEvent, StatusAssessment>;
  readonly verdict: InUseVerdict;
}

type Staging = 'staged' | 'unstaged' | 'unknown';

interface VolumeState {
  staging: Staging | undefined;
  readonly targets: Set<string>;
  /** The last NodeUnstageVolume that did not succeed: what says the volume is still staged. */
  lastUnstage: { readonly t: number; readonly outcome: string; readonly answered: boolean } | undefined;
  /** When NodeUnstageVolume last succeeded (answered). */
  unstagedAt: number | undefined;
  wasInUse: boolean;
  /** Whether it left volumesInUse with nothing of it on the node (undefined: it has not left). */
  droppedSafely: boolean | undefined;
  /** A CSI call for it was seen. */
  seen: boolean;
}

/** The handle of a unique volume name (`kubernetes.io/csi/<driver>^<handle>`), or the name. */
export function volumeHandle(name: string): string {
  const i = name.lastIndexOf('^');
  return i >= 0 ? name.slice(i + 1) : name;
}

export function analyzeInUse(events: readonly TraceEvent[]): InUseAnalysis {
  const steps = events
    .filter((e): e is Extract<TraceEvent, { kind: 'step' }> => e.kind === 'step')
    .map((e) => ({ index: e.index, label: e.label, t: e.t }))
    .sort((a, b) => a.t - b.t || a.index - b.index);
  const stepAt = (t: number): string => {
    let current = steps[0];
    for (const s of steps) if (s.t <= t) current = s;
    return current === undefined ? 'the start' : `step ${current.index + 1}, ${current.label}`;
  };

  // CSI calls act when answered (or, unanswered, when sent: the driver may have acted).
  type Change = { readonly t: number; readonly order: number; readonly apply: () => void };
  const changes: Change[] = [];
  const byHandle = new Map<string, VolumeState>();
  /** A volume's state; `call`: a CSI call for it is being applied. */
  const stateOf = (handle: string, call: boolean): VolumeState => {
    let s = byHandle.get(handle);
    if (s === undefined) {
      s = { staging: undefined, targets: new Set(), lastUnstage: undefined, unstagedAt: undefined, wasInUse: false, droppedSafely: undefined, seen: false };
      byHandle.set(handle, s);
    }
    if (call) s.seen = true;
    return s;
  };
  const state = (handle: string): VolumeState => stateOf(handle, false);
  let order = 0;
  for (const e of events) {
    if (e.kind !== 'csi' || e.volumeId === '') continue;
    const answered = e.end !== undefined;
    const ok = answered && e.outcome === 'OK';
    const at = e.end ?? e.t;
    const target = targetOf(e.request);
    switch (e.method) {
      case 'NodeStageVolume':
        if (ok || !answered) changes.push({ t: at, order: order++, apply: () => void (stateOf(e.volumeId, true).staging = 'staged') });
        break;
      case 'NodeUnstageVolume':
        changes.push({
          t: at,
          order: order++,
          apply: () => {
            const s = stateOf(e.volumeId, true);
            if (ok) {
              s.staging = 'unstaged';
              s.lastUnstage = undefined;
              s.unstagedAt = at;
            } else s.lastUnstage = { t: e.t, outcome: e.outcome, answered };
          },
        });
        break;
      case 'NodePublishVolume':
        if (ok || !answered) changes.push({ t: at, order: order++, apply: () => void stateOf(e.volumeId, true).targets.add(target) });
        break;
      case 'NodeUnpublishVolume':
        if (ok) changes.push({ t: at, order: order++, apply: () => void stateOf(e.volumeId, true).targets.delete(target) });
        break;
      default:
        break;
    }
  }
  changes.sort((a, b) => a.t - b.t || a.order - b.order);

  const statuses = new Map<StatusEvent, StatusAssessment>();
  /** The first unsafe drop, with the volume's state as it was then. */
  let firstUnsafe: { e: StatusEvent; volume: string; s: Pick<VolumeState, 'staging' | 'lastUnstage'> & { published: number }; attachedKnown: boolean } | undefined;
  let firstSafe: { e: StatusEvent; volume: string; unstagedAt: number | undefined } | undefined;
  let next = 0;
  let first = true;
  let prevInUse = new Set<string>();
  for (const e of [...events].filter((x): x is StatusEvent => x.kind === 'status').sort((a, b) => a.t - b.t)) {
    while (next < changes.length && (changes[next]?.t ?? Infinity) <= e.t) changes[next++]?.apply();
    const inUse = new Set(e.volumesInUse);
    if (first) {
      // Volumes the Node reports in use before the trace saw them staged may well be staged.
      for (const v of e.volumesInUse) {
        const s = state(volumeHandle(v));
        if (!s.seen) s.staging = 'unknown';
      }
      first = false;
    }
    // Every volume that is attached, or that was in volumesInUse at the previous status line.
    const names = new Set([...(e.volumesAttached ?? []), ...prevInUse]);
    const unsafe: string[] = [];
    const safe: string[] = [];
    let afterUnstage = false;
    const notYet: string[] = [];
    for (const name of names) {
      if (inUse.has(name)) continue;
      const s = state(volumeHandle(name));
      const attached = e.volumesAttached === undefined || e.volumesAttached.includes(name);
      const onNode = s.staging === 'staged' || s.staging === 'unknown' || s.targets.size > 0;
      if (prevInUse.has(name)) s.droppedSafely = !onNode;
      if (onNode && attached) {
        unsafe.push(name);
        if (firstUnsafe === undefined) firstUnsafe = { e, volume: name, s: { staging: s.staging, lastUnstage: s.lastUnstage, published: s.targets.size }, attachedKnown: e.volumesAttached !== undefined };
      } else if (!onNode && s.wasInUse && s.droppedSafely === true && (attached || prevInUse.has(name))) {
        // Dropped safely just now, or since and still attached (the controller has yet to detach it).
        safe.push(name);
        afterUnstage ||= s.unstagedAt !== undefined;
        if (firstSafe === undefined || (firstSafe.unstagedAt === undefined && s.unstagedAt !== undefined)) firstSafe = { e, volume: name, unstagedAt: s.unstagedAt };
      } else if (!onNode && attached) notYet.push(name);
    }
    for (const v of e.volumesInUse) state(volumeHandle(v)).wasInUse = true;
    prevInUse = inUse;
    const short = (list: readonly string[]): string => list.map(volumeHandle).join(', ');
    statuses.set(
      e,
      unsafe.length > 0
        ? { state: 'unsafe', volumes: unsafe, label: `✗ ${short(unsafe)} dropped while staged`, note: `${short(unsafe)} left volumesInUse while still on this node and attached: the attach/detach controller may detach it and attach it to another node` }
        : safe.length > 0
          ? { state: 'safe', volumes: safe, label: afterUnstage ? `✓ ${short(safe)} unstaged, then dropped` : `✓ ${short(safe)} dropped, never staged`, note: `${short(safe)} left volumesInUse with nothing of it staged or published on this node: safe to detach` }
          : notYet.length > 0
            ? { state: 'not-yet', volumes: notYet, label: '', note: `${short(notYet)} attached, not in volumesInUse, nothing of it on this node: safe to detach` }
            : { state: 'in-use', volumes: [], label: '', note: 'every volume on this node and every attached one is in volumesInUse' },
    );
  }

  let verdict: InUseVerdict;
  if (firstUnsafe !== undefined) {
    const { e, volume, s, attachedKnown } = firstUnsafe;
    const h = volumeHandle(volume);
    const never = s.staging === 'unknown' && s.published === 0;
    const where = s.staging === 'staged' || s.staging === 'unknown' ? 'staged' : 'published';
    const evidence =
      s.lastUnstage !== undefined
        ? `its NodeUnstageVolume at ${stepAt(s.lastUnstage.t)} ${s.lastUnstage.answered ? `failed with ${s.lastUnstage.outcome}` : 'never answered'}`
        : never
          ? 'it was in volumesInUse when the trace began, and no NodeUnstageVolume for it succeeded'
          : where === 'staged'
            ? 'no NodeUnstageVolume for it had succeeded'
            : 'a pod target was still published';
    verdict = {
      kind: 'unsafe',
      headline: never ? `${h} dropped from volumesInUse without being unstaged → another node may attach it` : `${h} dropped from volumesInUse while staged → another node may attach it`,
      explanation:
        `At ${stepAt(e.t)}, volumesInUse ${e.source === 'read' ? 'was read as' : e.source === 'written' ? 'was written as' : 'became'} ${listOf(e.volumesInUse)} without ${h}, ` +
        `while ${h} was still ${attachedKnown ? 'attached and ' : ''}${never ? 'possibly staged' : where} on this node (${evidence}). ` +
        `The attach/detach controller may now detach ${h} and attach it to another node while it is still staged here: two nodes writing to one device.`,
      t: e.t,
    };
  } else if (firstSafe !== undefined) {
    const h = volumeHandle(firstSafe.volume);
    const dropped = stepAt(firstSafe.e.t);
    const unstaged = firstSafe.unstagedAt === undefined ? dropped : stepAt(firstSafe.unstagedAt);
    verdict = {
      kind: 'safe',
      headline: `${h} unstaged first, then dropped from volumesInUse: safe`,
      explanation:
        `NodeUnstageVolume for ${h} succeeded at ${unstaged}, and only then did volumesInUse drop it${unstaged === dropped ? '' : ` (at ${dropped})`}: ` +
        'the attach/detach controller detaches a volume that is no longer staged on this node.',
      t: firstSafe.e.t,
    };
  } else {
    verdict = {
      kind: 'clean',
      headline: 'no volume dropped from volumesInUse while staged',
      explanation: 'Every volume stayed in volumesInUse for as long as it was staged or published on this node.',
      t: undefined,
    };
  }
  return { statuses, verdict };
}

/** The name node.status uses for a handle at this status line (the handle itself if it names none). */
function targetOf(request: unknown): string {
  if (typeof request === 'object' && request !== null && 'targetPath' in request) {
    const t = (request as { targetPath?: unknown }).targetPath;
    if (typeof t === 'string') return t;
  }
  return '';
}

function listOf(names: readonly string[]): string {
  return `[${names.map(volumeHandle).join(', ')}]`;
}
