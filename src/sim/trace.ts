/**
 * The simulator's trace: a stable, documented JSON structure (README "Proving it: the explorer",
 * "Trace format"), version 1. A later timeline view reads exactly this.
 *
 *   SimTrace { version: 1, scenario, featureGates, seed, plan, replay, hash, steps[], violations[] }
 *   TraceStep {
 *     step, timeMs, life,                 // scheduler step, virtual ms, engine life (0 = none yet)
 *     event: { kind, label },             // what the scheduler delivered (see TraceEventKind)
 *     calls: PortCallRecord[],            // port calls whose effect landed in this step, with seq
 *     csi?: CsiRecord,                    // a CSI request/response at the driver
 *     fs?: { added[], removed[] },        // files and directories below the root dir
 *     mounts?: { added[], removed[] },    // mount points
 *     volumesInUse, volumesAttached,      // node status after the step
 *     violations: string[]                // invariant names first seen at this step
 *   }
 *   TraceViolation { invariant, step, message }
 */

export type TraceEventKind =
  | 'port-call' // an engine port call's effect lands (fs, mount, cluster, clock)
  | 'csi-send' // an engine CSI call reaches the driver
  | 'csi-reply' // the driver's answer reaches the engine
  | 'timer' // a timer fires (engine loop, driver delay, client deadline)
  | 'scenario' // a scenario step (addPod, deletePod, fault, deleteFile, ...)
  | 'crash' // the engine life ends (restart or reboot); details in label
  | 'start'; // a new engine life starts

export interface PortCallRecord {
  readonly seq: number;
  readonly life: number;
  readonly port: 'fs' | 'mount' | 'cluster' | 'csi' | 'clock';
  readonly op: string;
  readonly args: string;
  /** 'ok', or the error's code / message. */
  readonly result: string;
}

export interface CsiRecord {
  readonly seq: number;
  readonly driver: string;
  readonly method: string;
  readonly volumeId: string;
  readonly request: Readonly<Record<string, unknown>>;
  /** 'OK' or the gRPC code name; undefined while only sent. */
  readonly code?: string;
  readonly durationMs?: number;
}

export interface TraceStep {
  readonly step: number;
  readonly timeMs: number;
  readonly life: number;
  readonly event: { readonly kind: TraceEventKind; readonly label: string };
  readonly calls: PortCallRecord[];
  csi?: CsiRecord;
  fs?: { readonly added: string[]; readonly removed: string[] };
  mounts?: { readonly added: string[]; readonly removed: string[] };
  volumesInUse: readonly string[];
  volumesAttached: readonly string[];
  readonly violations: string[];
}

export interface TraceViolation {
  readonly invariant: string;
  readonly step: number;
  readonly message: string;
}

export interface SimTrace {
  readonly version: 1;
  readonly scenario: string;
  readonly featureGates: Readonly<Record<string, boolean>>;
  readonly seed: number;
  readonly plan: string;
  readonly replay: string;
  readonly hash: string;
  readonly steps: readonly TraceStep[];
  readonly violations: readonly TraceViolation[];
}

function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A small self-contained HTML page of one trace (no executable script, no external resource; the trace JSON is embedded as data). */
export function traceHtml(trace: SimTrace, title: string): string {
  const violationSteps = new Map<number, string[]>();
  for (const v of trace.violations) violationSteps.set(v.step, [...(violationSteps.get(v.step) ?? []), v.invariant]);
  const rows = trace.steps
    .filter((s) => s.event.kind !== 'timer' || s.calls.length > 0 || s.violations.length > 0)
    .map((s) => {
      const bad = s.violations.length > 0;
      const marker = s.event.kind === 'crash' ? ' class="crash"' : bad ? ' class="bad"' : s.event.kind === 'start' ? ' class="start"' : '';
      const calls = s.calls.map((c) => `#${c.seq} ${c.port}.${c.op}(${c.args}) → ${c.result}`).join('<br>');
      const csi = s.csi === undefined ? '' : `${s.csi.method} ${s.csi.volumeId}${s.csi.code === undefined ? ' (sent)' : ` → ${s.csi.code}`}`;
      const fs = s.fs === undefined ? '' : [...s.fs.added.map((p) => `+ ${p}`), ...s.fs.removed.map((p) => `− ${p}`)].join('<br>');
      const mounts = s.mounts === undefined ? '' : [...s.mounts.added.map((p) => `+ ${p}`), ...s.mounts.removed.map((p) => `− ${p}`)].join('<br>');
      return `<tr${marker} id="step-${s.step}"><td>${s.step}</td><td>${(s.timeMs / 1000).toFixed(3)}s</td><td>${s.life}</td><td>${esc(s.event.kind)}<br><small>${esc(s.event.label)}</small></td><td>${esc(calls).replace(/&#60;br&#62;/g, '<br>')}</td><td>${esc(csi)}</td><td><small>${esc(fs).replace(/&#60;br&#62;/g, '<br>')}</small></td><td><small>${esc(mounts).replace(/&#60;br&#62;/g, '<br>')}</small></td><td><small>in use: ${esc(s.volumesInUse.join(', '))}<br>attached: ${esc(s.volumesAttached.join(', '))}</small></td><td>${esc(s.violations.join(', '))}</td></tr>`;
    })
    .join('\n');
  const violations = trace.violations
    .map((v) => `<li><a href="#step-${v.step}">step ${v.step}</a>: <b>${esc(v.invariant)}</b>: ${esc(v.message)}</li>`)
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title>
<style>
body{font-family:system-ui,sans-serif;margin:1em}table{border-collapse:collapse;font-size:12px}
td,th{border:1px solid #ccc;padding:2px 4px;vertical-align:top}tr.bad{background:#fdd}tr.crash{background:#fe9}tr.start{background:#def}
code{background:#eee;padding:1px 3px}
</style></head><body>
<h1>${esc(title)}</h1>
<p>scenario <code>${esc(trace.scenario)}</code>, seed ${trace.seed}, plan <code>${esc(trace.plan || '(none)')}</code>, feature gates <code>${esc(JSON.stringify(trace.featureGates))}</code>, trace hash ${trace.hash}</p>
<p>replay: <code>${esc(trace.replay)}</code></p>
<h2>Violations</h2><ul>${violations}</ul>
<h2>Steps</h2>
<table><tr><th>step</th><th>time</th><th>life</th><th>event</th><th>port calls</th><th>CSI</th><th>files</th><th>mounts</th><th>node status</th><th>violations</th></tr>
${rows}
</table>
<script type="application/json" id="trace">${JSON.stringify(trace).replace(/</g, '\\u003c')}</script>
</body></html>
`;
}
