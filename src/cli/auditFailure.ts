/**
 * Why an audit run could not complete (exit 2): one of a fixed set of reasons, so that the
 * `reason` label of `nodevol_audit_last_run_failure_info` has a bounded number of values, and a
 * node-problem-detector message can say it in one short line.
 */

/** Every reason a run can fail for (docs/reference/audit.md, "Exit codes"). */
export const AUDIT_FAILURE_REASONS = ['flags', 'root-dir', 'mountinfo', 'cluster-state', 'cluster-api', 'nothing-read'] as const;
export type AuditFailureReason = (typeof AUDIT_FAILURE_REASONS)[number];

/** A run that could not complete: its reason, the stderr line, and a short one for a Node condition. */
export class AuditRunFailure {
  constructor(
    readonly reason: AuditFailureReason,
    /** The one line printed on stderr (`nodevol <command>: …`). */
    readonly message: string,
    /** The same without the command prefix or any advice: what a Node condition shows. */
    readonly brief: string = message.replace(/^nodevol [a-z-]+: /, ''),
  ) {}
}
